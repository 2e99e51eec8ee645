"""Cell summaries from request records: vLLM `bench serve` key names where the quantity is the same.

Pure functions; formulas in docs/metrics.md.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from tokenbench.client.records import RequestRecord
from tokenbench.metrics import request as rm
from tokenbench.metrics.stats import describe
from tokenbench.spec.bench import SLO, Load

NS = 1e9


def _duration_ns(recs: Sequence[RequestRecord]) -> int:
    """From the first intended start to the last end among measured requests."""
    return max(r.end_ns for r in recs) - min(r.intended_ns for r in recs)


def _load_keys(load: Load, input_len: int, output_len: int) -> dict:
    return {
        "concurrency": load.concurrency,
        "request_rate": load.request_rate,
        "max_concurrency": load.max_concurrency,
        "arrival": load.arrival if load.concurrency is None else None,
        "input_len": input_len,
        "output_len": output_len,
    }


def _counts(recs: Sequence[RequestRecord]) -> dict:
    ok = [r for r in recs if r.ok]
    kinds = Counter(r.error_kind for r in recs if not r.ok)
    return {
        "num_prompts": len(recs),
        "completed": len(ok),
        "failed": len(recs) - len(ok),
        "failed_by_kind": dict(sorted(kinds.items())),
        "total_input_tokens": sum(r.prompt_tokens or r.input_len for r in ok),
        "total_output_tokens": sum(r.output_tokens for r in ok),
        "usage_source": dict(Counter(r.usage_source for r in ok)),
        "count_source": dict(Counter(r.count_source for r in ok)),
        "length_mismatches": sum(1 for r in recs if r.length_error),
        "total_reasoning_tokens": sum(r.reasoning_tokens for r in ok),
        "reasoning_requests": sum(1 for r in ok if r.reasoning_tokens),
        "zero_token_requests": sum(1 for r in ok if not r.token_times_ns),
    }


def _cache(ok: Sequence[RequestRecord]) -> dict:
    """Prefix-cache hits as the server reports them (usage.prompt_tokens_details.cached_tokens); empty
    when no request reported them."""
    told = [(r.cached_tokens, r.prompt_tokens) for r in ok if r.cached_tokens is not None and r.prompt_tokens]
    if not told:
        return {}
    cached, prompt = sum(c for c, _ in told), sum(p for _, p in told)
    return {"total_cached_tokens": cached, "cache_hit_rate": cached / prompt, "cache_reported_requests": len(told)}


def _prompt_agreement(ok: Sequence[RequestRecord]) -> dict:
    """How far the server's prompt counts are from the workload's own (its tokenizer + chat template):
    requests that disagree, the mean signed difference and the largest one (server - ours)."""
    diffs = [r.prompt_tokens - r.expected_prompt_tokens for r in ok
             if r.prompt_tokens is not None and r.expected_prompt_tokens is not None]
    if not diffs:
        return {}
    return {"prompt_tokens_disagreeing": sum(1 for d in diffs if d),
            "prompt_tokens_diff_mean": sum(diffs) / len(diffs), "prompt_tokens_diff_max": max(diffs, key=abs)}


def _images(recs: Sequence[RequestRecord]) -> dict:
    """Images sent with ok requests, their bytes, and the server's own count where it reports one."""
    ok = [r for r in recs if r.ok]
    if not any(r.images for r in recs):
        return {}
    counted = [r.image_count for r in ok if r.image_count is not None]
    return {"total_images": sum(r.images for r in ok), "total_image_bytes": sum(r.image_bytes for r in ok),
            "server_counted_images": sum(counted) if counted else None}


def _latencies(ok: Sequence[RequestRecord]) -> dict:
    out: dict = {}
    ttft = [v for r in ok if (v := rm.ttft_ms(r)) is not None]
    ttfc = [v for r in ok if (v := rm.ttfc_ms(r)) is not None]
    tpot = [v for r in ok if (v := rm.tpot_ms(r)) is not None]
    ntpot = [v for r in ok if (v := rm.ntpot_ms(r)) is not None]
    itl = [v for r in ok for v in rm.itl_ms(r)]
    if ttfc:            # time to the first answer token: absent when no request had one
        out.update(describe(ttfc, "ttfc"))
    connects = [v for r in ok if (v := rm.connect_ms(r)) is not None]
    out["new_connections"] = len(connects)
    if connects:
        out.update(describe(connects, "connect"))
    for name, vals in (("ttft", ttft), ("tpot", tpot), ("itl", itl), ("e2el", [rm.e2el_ms(r) for r in ok]),
                       ("ntpot", ntpot), ("queue", [rm.queue_ms(r) for r in ok])):
        out.update(describe(vals, name))
    return out


def in_flight_steps(recs: Sequence[RequestRecord]) -> list[tuple[int, int]]:
    """(time, requests in flight after that time) at every send and end, time-ordered."""
    events = sorted([(r.sent_ns, 1) for r in recs] + [(r.end_ns, -1) for r in recs])
    level, steps = 0, []
    for t, d in events:
        level += d
        steps.append((t, level))
    return steps


def sustained_concurrency(recs: Sequence[RequestRecord], load: Load) -> float | None:
    """Closed loop: time-weighted mean of requests in flight from the moment the C-th request was sent
    (ramp-up done) to the last send. Below C only by the client's delay in replacing a finished
    request; None for open loop, or when no request replaced another."""
    cap = load.concurrency
    sends = sorted(r.sent_ns for r in recs)
    if cap is None or len(sends) <= cap:
        return None
    a, b = sends[cap - 1], sends[-1]
    if b <= a:
        return None
    area, level, t_prev = 0, 0, None
    for t, new_level in in_flight_steps(recs):
        if t_prev is not None and t > a:
            area += level * (min(t, b) - max(t_prev, a))
        if t >= b:
            break
        t_prev, level = t, new_level
    return area / (b - a)


def steady_window(recs: Sequence[RequestRecord], load: Load) -> tuple[int, int] | None:
    """Closed loop: first to last moment the cell held its full concurrency.
    Open loop: from first send + mean E2EL (ramp-up) to the last send."""
    cap = load.in_flight_cap if load.concurrency is not None else None
    if cap is None:
        mean_e2e = sum(r.e2el_ns for r in recs) / len(recs)
        start = min(r.sent_ns for r in recs) + int(mean_e2e)
        end: int | None = max(r.sent_ns for r in recs)
    else:
        full = [t for t, level in in_flight_steps(recs) if level >= cap]
        if len(full) < 2:
            return None
        start = full[0]
        end = next((t for t, level in in_flight_steps(recs) if t > full[-1] and level < cap), None)
    return (start, end) if end is not None and end > start else None


def _steady(ok: Sequence[RequestRecord], window: tuple[int, int] | None) -> dict:
    keys = ("steady_duration", "steady_request_throughput", "steady_output_throughput",
            "steady_total_token_throughput")
    if window is None or not ok:
        return dict.fromkeys(keys)
    a, b = window
    dur = (b - a) / NS
    out_tok = sum(c for r in ok for t, c in zip(r.token_times_ns, r.token_counts, strict=False) if a <= t <= b)
    in_tok = sum(r.prompt_tokens or r.input_len for r in ok if r.token_times_ns and a <= r.token_times_ns[0] <= b)
    done = sum(1 for r in ok if a <= r.end_ns <= b)
    return dict(zip(keys, (dur, done / dur, out_tok / dur, (in_tok + out_tok) / dur), strict=False))


def summarize(recs: Sequence[RequestRecord], load: Load, input_len: int, output_len: int,
              slo: SLO | None = None) -> dict:
    """Summary of one cell's measured requests (warmup records must be filtered out by the caller)."""
    out = _load_keys(load, input_len, output_len)
    out.update(_counts(recs))
    if not recs:
        return out
    ok = [r for r in recs if r.ok]
    out.update(_cache(ok))
    out.update(_prompt_agreement(ok))
    out.update(_images(recs))
    dur = _duration_ns(recs) / NS
    out["duration"] = dur
    out["request_throughput"] = len(ok) / dur
    out["output_throughput"] = out["total_output_tokens"] / dur
    out["total_token_throughput"] = (out["total_input_tokens"] + out["total_output_tokens"]) / dur
    out["achieved_concurrency"] = sum(r.e2el_ns for r in recs) / NS / dur
    out["sustained_concurrency"] = sustained_concurrency(recs, load)
    if slo is not None and not slo.is_empty():
        good = sum(1 for r in ok if rm.meets_slo(r, slo))
        out["request_goodput"] = good / dur
        out["goodput_fraction"] = good / len(recs)
    out.update(_latencies(ok))
    out.update(_steady(ok, steady_window(recs, load)))
    return out
