"""Arrival traces in the Mooncake JSONL format: one request per line, replayed on absolute times.

    {"timestamp": 0, "input_length": 6955, "output_length": 52, "hash_ids": [46, 47, ...]}

`timestamp` is in milliseconds; `input_length` / `output_length` in tokens (`input_len` / `output_len`
are accepted too); other fields are ignored. Rows are replayed in time order: request i is due at
t0 + (timestamp_i - timestamp_0) x time_scale, so 0.5 replays twice as fast.

`hash_ids` (optional) name the prompt's blocks of `block_size` tokens (Mooncake: 512): equal ids are
equal blocks. Each hash id becomes one block of random token ids (`BlockIds`), the same in every
request of the cell, so a prompt is its blocks' ids end to end, the last block cut to input_length.
Rows without hash_ids are fresh random content. `trace_reuse` is the share of the trace's prompt tokens
a prefix cache of that block size can serve (docs/metrics.md, "Trace reuse").
"""

from __future__ import annotations

import random
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, replace

from tokenbench.errors import UsageError
from tokenbench.workload.dataset import Filters, read_json_or_jsonl
from tokenbench.workload.random_ids import random_ids
from tokenbench.workload.vocab import Vocab

NS_PER_MS = 1_000_000
BLOCK_HINT = ("pass --trace-block-size N, the block size the trace's hash_ids were made with (Mooncake: 512), "
              "or drop hash_ids from the file to replay fresh content")


@dataclass(frozen=True, slots=True)
class TraceRow:
    timestamp_ms: float
    input_len: int
    output_len: int
    hash_ids: tuple[int, ...] = ()      # the prompt's blocks, in order (empty: fresh content)


def _int_field(record: dict, names: tuple[str, str], where: str) -> int:
    value = record.get(names[0], record.get(names[1]))
    if type(value) is not int or value <= 0:
        raise UsageError(f"{where}: '{names[0]}' is {value!r}, not a positive integer",
                         'each line is {"timestamp": MS, "input_length": N, "output_length": M}')
    return value


def _hash_ids(record: dict, where: str) -> tuple[int, ...]:
    ids = record.get("hash_ids", [])
    if not isinstance(ids, list) or any(type(h) is not int for h in ids):
        raise UsageError(f"{where}: 'hash_ids' is {ids!r}, not a list of integers", "fix the trace file")
    return tuple(ids)


def blocks_needed(input_len: int, block_size: int) -> int:
    return -(-input_len // block_size)


def row(record: object, where: str, block_size: int | None = None) -> TraceRow:
    """One trace line; with `block_size`, its hash_ids (if any) must number ceil(input_length / block_size)."""
    if not isinstance(record, dict):
        raise UsageError(f"{where}: not a JSON object", 'each line is {"timestamp": MS, "input_length": N, ...}')
    ts = record.get("timestamp")
    if isinstance(ts, bool) or not isinstance(ts, (int, float)) or ts < 0:
        raise UsageError(f"{where}: 'timestamp' is {ts!r}, not milliseconds >= 0", "fix the trace file")
    out = TraceRow(float(ts), _int_field(record, ("input_length", "input_len"), where),
                   _int_field(record, ("output_length", "output_len"), where), _hash_ids(record, where))
    need = blocks_needed(out.input_len, block_size) if block_size else len(out.hash_ids)
    if out.hash_ids and len(out.hash_ids) != need:
        raise UsageError(f"{where}: {len(out.hash_ids)} hash_ids for {out.input_len} tokens, but blocks of "
                         f"{block_size} tokens make {need}", BLOCK_HINT)
    return out


def read_trace(path: str, block_size: int | None = None) -> list[TraceRow]:
    """The trace's rows in time order (a stable sort keeps the file's order for equal timestamps); with
    `block_size`, every row's hash_ids are checked against it."""
    rows = [row(record, f"{path}:{line}", block_size) for line, record in read_json_or_jsonl(path, "trace")]
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
    kept = [replace(r, output_len=forced_output or r.output_len) for r in rows]
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


# ---- hash_ids -> token blocks, and the trace's own reuse ----

class BlockIds:
    """The token ids of a trace's hash blocks: hash id h is `block_size` random ids drawn from a stream
    of its own (seeded by `key` and h), so the same hash gives the same ids in every request, and a
    partial last block is the head of the full one. Recently used blocks are kept (at most `keep`)."""

    def __init__(self, key: str, block_size: int, vocab: Vocab, keep: int = 1024) -> None:
        self.key, self.block_size, self.vocab, self.keep = key, block_size, vocab, keep
        self._blocks: OrderedDict[int, tuple[int, ...]] = OrderedDict()

    def block(self, hash_id: int) -> tuple[int, ...]:
        ids = self._blocks.get(hash_id)
        if ids is None:
            ids = random_ids(random.Random(f"{self.key}/block/{hash_id}"), self.block_size, self.vocab)
            self._blocks[hash_id] = ids
            if len(self._blocks) > self.keep:
                self._blocks.popitem(last=False)
        self._blocks.move_to_end(hash_id)
        return ids

    def prompt(self, r: TraceRow) -> tuple[int, ...]:
        """The row's prompt: its blocks' ids end to end, cut to exactly input_len tokens."""
        out: list[int] = []
        for h in r.hash_ids:
            out += self.block(h)
        return tuple(out[:r.input_len])


@dataclass(frozen=True, slots=True)
class TraceReuse:
    """The prompt tokens of a replay a prefix cache of `block_size` can serve (docs/metrics.md)."""

    block_size: int
    prompt_tokens: int           # sum of input_length over the rows
    reusable_tokens: int         # sum over rows of the cacheable blocks an earlier row already held

    @property
    def rate(self) -> float | None:
        return self.reusable_tokens / self.prompt_tokens if self.prompt_tokens else None


Trie = dict[tuple[int, int], int]      # (parent node, hash id) -> node: the full-block prefixes seen


def _reusable_blocks(r: TraceRow, seen: Trie, block_size: int) -> int:
    """Leading blocks of r whose whole prefix of hash ids an earlier row held as full blocks; never the
    block that holds the last prompt token (it is always computed)."""
    node, n = 0, 0
    while n < (r.input_len - 1) // block_size and (node, r.hash_ids[n]) in seen:
        node, n = seen[(node, r.hash_ids[n])], n + 1
    return n


def _hold(r: TraceRow, seen: Trie, block_size: int) -> None:
    """Add r's full blocks (prefix-chained) to what the cache holds."""
    node = 0
    for h in r.hash_ids[:r.input_len // block_size]:
        node = seen.setdefault((node, h), len(seen) + 1)


def trace_reuse(rows: Sequence[TraceRow], block_size: int) -> TraceReuse:
    """The trace's own reuse, in replay order: block j of a row counts (block_size tokens) when an
    earlier row had the same hash ids at 0..j with block j full, and j < (input_len - 1) // block_size."""
    seen: Trie = {}
    reusable = 0
    for r in rows:
        if r.hash_ids:
            reusable += _reusable_blocks(r, seen, block_size) * block_size
            _hold(r, seen, block_size)
    return TraceReuse(block_size, sum(r.input_len for r in rows), reusable)
