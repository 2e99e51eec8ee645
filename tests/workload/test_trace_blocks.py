"""A trace's hash_ids as shared token blocks, and the trace's own reuse: by hand, and against the
reference server's prefix cache (testing/prefix_cache.PrefixCache) as the oracle of what a block cache
of the same block size serves."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokenbench.errors import UsageError
from tokenbench.testing.prefix_cache import PrefixCache
from tokenbench.workload.trace_replay import BlockIds, TraceRow, read_trace, trace_reuse
from tokenbench.workload.vocab import Vocab

VOCAB = Vocab.with_margins(32000, "test")


def row(n: int, *hashes: int) -> TraceRow:
    return TraceRow(0.0, n, 4, tuple(hashes))


def test_the_same_hash_gives_the_same_ids_and_the_last_block_is_cut():
    blocks = BlockIds("0/cell", 8, VOCAB)
    a, b = blocks.prompt(row(20, 1, 2, 3)), blocks.prompt(row(11, 1, 4))
    assert len(a) == 20 and len(b) == 11                       # exact lengths
    assert a[:8] == b[:8] and a[8:16] != b[8:16]               # block 1 shared, 2 and 4 differ
    assert blocks.prompt(row(24, 1, 2, 3))[:20] == a           # a partial block is the head of the full one
    assert BlockIds("0/cell", 8, VOCAB, keep=1).prompt(row(20, 1, 2, 3)) == a    # evicted blocks come back equal
    assert BlockIds("0/other", 8, VOCAB).prompt(row(20, 1, 2, 3)) != a          # another cell: other ids
    assert all(VOCAB.low <= t < VOCAB.high for t in a)


def test_reuse_by_hand():
    b = 4
    rows = [row(10, 1, 2, 3),      # holds (1), (1,2) as full blocks; block 3 partial: never held
            row(12, 1, 2, 3),      # (12-1)//4 = 2 blocks may hit: (1), (1,2) -> 8; now (1,2,3) is held full
            row(12, 1, 2, 3),      # again 2 blocks (the third holds the last token) -> 8
            row(13, 1, 2, 3, 5),   # (13-1)//4 = 3 blocks: (1,2,3) was held full by row 2 -> 12
            row(9, 2, 1, 6),       # hash 2 at position 0: another prefix, no hit
            row(4, 1),             # (4-1)//4 = 0: a one-block prompt never hits
            row(8, 1, 7)]          # (8-1)//4 = 1: block (1) -> 4
    reuse = trace_reuse(rows, b)
    assert reuse.reusable_tokens == 8 + 8 + 12 + 0 + 0 + 4
    assert reuse.prompt_tokens == 10 + 12 + 12 + 13 + 9 + 4 + 8
    assert reuse.rate == pytest.approx(32 / 68)
    assert trace_reuse([row(8, 1, 2)], 4).rate == 0           # nothing earlier, nothing reused
    assert trace_reuse([TraceRow(0.0, 8, 4)] * 3, 4).reusable_tokens == 0     # no hash_ids: fresh content


traces = st.lists(st.tuples(st.integers(1, 40), st.lists(st.integers(0, 5), min_size=1, max_size=10)),
                  min_size=1, max_size=30)


@settings(max_examples=120, deadline=None)
@given(traces, st.sampled_from([1, 3, 4, 8]))
def test_reuse_is_what_a_block_cache_of_that_size_serves(spec, block_size):
    """Any trace (hash ids repeating at any position, partial last blocks, one-token prompts): sending its
    prompts one after another to a prefix cache of the same block size hits exactly the trace's own reuse."""
    rows = []
    for n, hashes in spec:
        count = -(-n // block_size)
        rows.append(row(n, *(hashes * count)[:count]))
    blocks, cache, hits = BlockIds("s", block_size, VOCAB), PrefixCache(10**6, block_size), 0
    for r in rows:
        ids = blocks.prompt(r)
        hits += cache.lookup(ids)
        cache.store(ids)
    assert hits == trace_reuse(rows, block_size).reusable_tokens


def test_hash_ids_must_match_the_block_size(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in [
        {"timestamp": 0, "input_length": 600, "output_length": 1, "hash_ids": [1, 2]},
        {"timestamp": 1, "input_length": 600, "output_length": 1, "hash_ids": [1]}]))
    with pytest.raises(UsageError, match=r"t.jsonl:2: 1 hash_ids for 600 tokens, but blocks of 512 tokens make 2"):
        read_trace(str(path), 512)
    assert [len(r.hash_ids) for r in read_trace(str(path))] == [2, 1]    # not checked without a block size
    path.write_text(json.dumps({"timestamp": 0, "input_length": 6, "output_length": 1, "hash_ids": ["a"]}))
    with pytest.raises(UsageError, match="not a list of integers"):
        read_trace(str(path))
