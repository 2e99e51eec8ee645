"""Arrival traces in the Mooncake JSONL format: one request per line, replayed on absolute times.

    {"timestamp": 0, "input_length": 6955, "output_length": 52, "hash_ids": [46, 47, ...]}

`timestamp` is in milliseconds; `input_length` / `output_length` in tokens (`input_len` / `output_len`
are accepted too). `hash_ids` (Mooncake's prefix-block ids) and other fields are ignored. Rows are
replayed in time order: request i is due at t0 + (timestamp_i - timestamp_0) x time_scale, so 0.5
replays twice as fast. Prompts are fresh random content of exactly the row's lengths.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tokenbench.errors import UsageError
from tokenbench.workload.dataset import Filters, read_json_or_jsonl

NS_PER_MS = 1_000_000


@dataclass(frozen=True, slots=True)
class TraceRow:
    timestamp_ms: float
    input_len: int
    output_len: int


def _int_field(record: dict, names: tuple[str, str], where: str) -> int:
    value = record.get(names[0], record.get(names[1]))
    if type(value) is not int or value <= 0:
        raise UsageError(f"{where}: '{names[0]}' is {value!r}, not a positive integer",
                         'each line is {"timestamp": MS, "input_length": N, "output_length": M}')
    return value


def row(record: object, where: str) -> TraceRow:
    if not isinstance(record, dict):
        raise UsageError(f"{where}: not a JSON object", 'each line is {"timestamp": MS, "input_length": N, ...}')
    ts = record.get("timestamp")
    if isinstance(ts, bool) or not isinstance(ts, (int, float)) or ts < 0:
        raise UsageError(f"{where}: 'timestamp' is {ts!r}, not milliseconds >= 0", "fix the trace file")
    return TraceRow(float(ts), _int_field(record, ("input_length", "input_len"), where),
                    _int_field(record, ("output_length", "output_len"), where))


def read_trace(path: str) -> list[TraceRow]:
    """The trace's rows in time order (a stable sort keeps the file's order for equal timestamps)."""
    rows = [row(record, f"{path}:{line}") for line, record in read_json_or_jsonl(path, "trace")]
    if not rows:
        raise UsageError(f"{path}: the trace holds no requests", "write one JSON object per line")
    return sorted(rows, key=lambda r: r.timestamp_ms)


def offsets_ns(rows: Sequence[TraceRow], time_scale: float) -> list[int]:
    """Arrival offsets from the first row, scaled; absolute (never summed gaps), so no drift."""
    t0 = rows[0].timestamp_ms if rows else 0.0
    return [round((r.timestamp_ms - t0) * time_scale * NS_PER_MS) for r in rows]


@dataclass
class Replay:
    rows: list[TraceRow]
    offsets_ns: list[int]
    dropped: int                      # rows the length filters removed


def select(rows: Sequence[TraceRow], time_scale: float, filters: Filters, forced_output: int | None,
           num_prompts: int | None = None, duration_s: float | None = None) -> Replay:
    """The rows to replay: filtered, output length forced if asked, cut to num_prompts rows and to the
    rows due before duration_s (scaled time). Offsets are from the first row kept."""
    kept = [TraceRow(r.timestamp_ms, r.input_len, forced_output or r.output_len) for r in rows]
    kept = [r for r in kept if filters.accepts(r.input_len, r.output_len)]
    dropped = len(rows) - len(kept)
    if not kept:
        raise UsageError("no trace row passes the length filters (or fits the server's context)",
                         "relax the filters, or start the server with a larger context")
    kept = kept[:num_prompts] if num_prompts else kept
    offsets = offsets_ns(kept, time_scale)
    if duration_s is not None:
        n = sum(1 for o in offsets if o < duration_s * 1e9)
        kept, offsets = kept[:n], offsets[:n]
    return Replay(kept, offsets, dropped)
