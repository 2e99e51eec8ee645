"""What the tally keeps of each read (metrics/tally.Reads): the bursts and the per-request bases, the same
whether a request's reads each carried one chunk (the fast path) or some carried several; hypothesis."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tokenbench.metrics.tally import PIECE_CHUNKS, Reads


def _by_hand(times: list[int], sent: int) -> tuple[tuple[int, int, int, int], list[tuple[int, int, int]]]:
    """The per-request bases and hold, and each burst's (stamp, base, chunks), read by read."""
    reads: list[list[int]] = []
    for t in times:
        if reads and reads[-1][0] == t:
            reads[-1][1] += 1
        else:
            reads.append([t, 1])
    before = [sent, sent, *(t for t, _ in reads)]
    last = len(reads) - 1
    hold = max(t - before[g] for g, (t, _) in enumerate(reads))
    bursts = [(t, before[g], n) for g, (t, n) in enumerate(reads) if n >= PIECE_CHUNKS]
    return (before[0], before[last], before[last + 1], hold), bursts


@settings(max_examples=300, deadline=None)
@given(gaps=st.lists(st.integers(0, 3), min_size=1, max_size=40), sent=st.integers(0, 100))
def test_reads_keep_the_bases_holds_and_bursts_of_every_request(gaps, sent):
    """`gaps` between consecutive chunks in ms (0: the same read): the request's bases and hold, and its
    bursts, are what reading it read by read gives."""
    times, t = [], sent + 1
    for g in gaps:
        t += g
        times.append(t)
    r = Reads()
    r.add(times, sent)
    want, bursts = _by_hand(times, sent)
    assert tuple(int(r.requests.np(k)[0]) for k in ("first", "last", "end", "hold")) == want
    b = r.bursts()
    assert list(zip(b["stamp"].tolist(), b["base"].tolist(), b["chunks"].tolist(), strict=True)) == bursts


def test_bursts_past_the_kept_ones_are_counted_not_kept(monkeypatch):
    """Memory stays bounded: past BURSTS_KEPT bursts a cell counts their chunks only."""
    from tokenbench.metrics import tally
    monkeypatch.setattr(tally, "BURSTS_KEPT", 3)
    r = Reads()
    for i in range(5):
        r.add([10 + i, 10 + i, 20 + i, 30 + i], i)
    assert len(r.bursts()["stamp"]) == 3 and r.more_chunks == 4 and len(r.requests) == 5
