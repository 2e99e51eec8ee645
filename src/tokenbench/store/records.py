"""RequestRecord <-> database row, without pickles."""

from __future__ import annotations

import math

import msgspec

from tokenbench.client.records import RequestRecord

REQUEST_COLUMNS = ("cell_id", "phase", "idx", "input_len", "output_len", "intended_ns", "sent_ns", "end_ns",
                   "status", "prompt_tokens", "completion_tokens", "cached_tokens", "usage_source",
                   "finish_reason", "error_kind", "error_detail", "length_error", "token_offsets_json",
                   "token_counts_json", "text", "worker")


_encode = msgspec.json.Encoder().encode
_ints = msgspec.json.decode          # what json.loads gives for these lists of ints, faster


def _json(values: list[int]) -> str:
    return _encode(values).decode()


def to_row(cell_id: int, r: RequestRecord) -> tuple:
    offsets = [t - r.sent_ns for t in r.token_times_ns]
    return (cell_id, r.phase, r.index, r.input_len, r.output_len, r.intended_ns, r.sent_ns, r.end_ns,
            r.status, r.prompt_tokens, r.completion_tokens, r.cached_tokens, r.usage_source, r.finish_reason,
            r.error_kind, r.error_detail, r.length_error, _json(offsets), _json(r.token_counts),
            r.text, r.worker)


def from_row(row: dict) -> RequestRecord:
    sent = row["sent_ns"]
    return RequestRecord(
        index=row["idx"], phase=row["phase"], input_len=row["input_len"], output_len=row["output_len"],
        intended_ns=row["intended_ns"], sent_ns=sent, end_ns=row["end_ns"], status=row["status"],
        token_times_ns=[sent + o for o in _ints(row["token_offsets_json"])],
        token_counts=_ints(row["token_counts_json"]), prompt_tokens=row["prompt_tokens"],
        completion_tokens=row["completion_tokens"], cached_tokens=row["cached_tokens"],
        usage_source=row["usage_source"], finish_reason=row["finish_reason"], error_kind=row["error_kind"],
        error_detail=row["error_detail"], length_error=row["length_error"], text=row["text"], worker=row["worker"],
    )


def to_dict(r: RequestRecord) -> dict:
    """JSON form for result files: times relative to the request's send, in ns."""
    return {
        "index": r.index, "phase": r.phase, "input_len": r.input_len, "output_len": r.output_len,
        "intended_ns": r.intended_ns, "sent_ns": r.sent_ns, "end_ns": r.end_ns, "status": r.status,
        "token_offsets_ns": [t - r.sent_ns for t in r.token_times_ns], "token_counts": r.token_counts,
        "prompt_tokens": r.prompt_tokens, "completion_tokens": r.completion_tokens,
        "cached_tokens": r.cached_tokens, "usage_source": r.usage_source, "finish_reason": r.finish_reason,
        "error_kind": r.error_kind, "error_detail": r.error_detail, "length_error": r.length_error,
        "images": r.images, "image_bytes": r.image_bytes, "image_count": r.image_count,
        "first_content_offset_ns": r.ttfc_ns, "reasoning_tokens": r.reasoning_tokens,
        "count_source": r.count_source, "connect_ns": r.connect_ns, "connect_in_ttft": r.connect_in_ttft,
        "expected_prompt_tokens": r.expected_prompt_tokens,
    }


def json_safe(obj):
    """JSON has no NaN or infinity: null instead (recursively through dicts and lists)."""
    if isinstance(obj, float) and (math.isnan(obj) or math.isinf(obj)):
        return None
    if isinstance(obj, dict):
        return {k: json_safe(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [json_safe(v) for v in obj]
    return obj
