"""The figures' bounds (metrics/health.py, figure_health) against a plain reference of its documented formulas (docs/metrics.md, "Client
health"; the module's docstring), on cells of random requests and stalls drawn as the loop-lag probe
draws them (load/lag.py: each due a period after the last or at the late wake, each stall last seen at the
previous wake, so windows overlap after a stall longer than the period), with reads of several chunks,
failed and token-less requests, one loop or several, and a token log that folded (issue 39: a test for
every behaviour a single-point change could alter; the folded path with stalls was never run before).

The reference works stamp by stamp with loops over every stall and read, where the module works on sorted
arrays:
- a stall's window: start = max(the probe's previous wake, the latest stamp of the cell at or before the
  due) (one loop; several loops: the previous wake), end = max(woke, caught) + the probe's resolution; a
  stamp t in (due, end] may be late by t - start; the largest over the stalls, the later stall's cause on a
  tie;
- a burst (a read of >= 2 chunks of a request) is the client's when a stall held it and the stall explains
  its chunks (no more than 1 + 2 x held / the request's pace, held = min(its stall delay, the time since the
  request's read before); a request read whole in one burst: held at least half its wait); any other is
  upstream's; when upstream bursts carry half the token chunks, every first token, last token and end of
  a request with tokens is held (its time - the stamp two reads before, moved back by a stall that held
  that stamp), else only those read in an upstream burst of >= 4 chunks;
- TTFT's sample carries its first token's delay, E2EL its end's, NTPOT its end's / n, TPOT (first to last
  token, as the tally's) the larger of the first's and the last's over (n - 1), the stream tail the larger
  of the last's and the end's; an ITL gap the larger of its two chunks' (stalls) and, held upstream, every
  gap by the largest hold (in pieces) or each bounded burst's gaps by its hold; mean ITL the first's and
  the last's per request;
- a mean moves by sum(d) / N; a percentile (and the max) by min(max d, the distance to the samples k ranks
  away);
- a throughput by (the last end's delay, or its hold + every end's delay over the slots) / duration x the
  figure.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

import numpy as np
import pytest

from tokenbench.client.records import RequestRecord
from tokenbench.load.lag import PROBE_PERIOD_NS
from tokenbench.metrics import token_log
from tokenbench.metrics.cell_summary import CellSummary
from tokenbench.metrics.health import figure_health
from tokenbench.metrics.summary import of_tally, tally_of
from tokenbench.metrics.tally import (
    CAUSES,
    CLIENT_CAUSES,
    PROBE_RESOLUTION_NS,
    CellTally,
    Stall,
    Stalls,
)
from tokenbench.spec.bench import Load

MS = 1_000_000
BUFFERING = CAUSES.index("buffering")
QS = ((50, "median"), (50, "p50"), (90, "p90"), (95, "p95"), (99, "p99"))


# ---- a cell as the client would have measured it ----

def request(rng: random.Random, i: int) -> RequestRecord:
    """An ok request whose stamps are unique to it (+ i ns): a TTFT, then chunks 0-30 ms apart, some of
    them read together (equal stamps, sometimes 4 or more: a coalesced read)."""
    sent = rng.randrange(0, 300) * MS + i
    n = rng.choice([0, 1, 2, 3, 5, 8, 12, 20])
    times, t = [], sent + rng.randrange(5, 80) * MS
    while len(times) < n:
        size = min(n - len(times), rng.choice([1, 1, 1, 2, 4, 5]))
        times += [t] * size
        t += rng.randrange(1, 30) * MS
    end = (times[-1] if times else sent + 40 * MS) + rng.randrange(0, 3) * MS
    return RequestRecord(index=i, phase="measure", input_len=8, output_len=n, intended_ns=sent, sent_ns=sent,
                         end_ns=end, token_times_ns=times, token_counts=[1] * n, completion_tokens=n,
                         usage_source="server")


def failed(rng: random.Random, i: int) -> RequestRecord:
    sent = rng.randrange(0, 300) * MS + i
    return RequestRecord(index=i, phase="measure", input_len=8, output_len=4, intended_ns=sent, sent_ns=sent,
                         end_ns=sent + rng.randrange(1, 50) * MS, error_kind="http_status")


def probe_stalls(rng: random.Random, horizon_ns: int, chance: float) -> list[Stall]:
    """The stalls a 10 ms probe records: due = max(last due + period, last wake), `after` the last wake."""
    stalls, seen, due = [], 0, PROBE_PERIOD_NS
    while due < horizon_ns:
        late = rng.random() < chance
        woke = due + (rng.randrange(PROBE_RESOLUTION_NS + 1, 60 * MS) if late else rng.randrange(0, PROBE_RESOLUTION_NS))
        if late:               # its catch-up, followed by the probe, some ms past the wake (or none recorded)
            caught = rng.choice([None, woke, woke + rng.randrange(0, 30 * MS)])
            stalls.append(Stall(after_ns=seen, due_ns=due, woke_ns=woke, cause=rng.choice(CLIENT_CAUSES),
                                caught_ns=caught))
        seen, due = woke, max(due + PROBE_PERIOD_NS, woke)
    return stalls


def drawn(seed: int) -> tuple[list[RequestRecord], list[Stall], Load]:
    rng = random.Random(seed)
    recs = [request(rng, i) for i in range(rng.randrange(1, 30))]
    recs += [failed(rng, len(recs) + i) for i in range(rng.choice([0, 0, 2]))]
    load = rng.choice([Load(concurrency=4, num_prompts=len(recs)), Load(request_rate=10.0, num_prompts=len(recs)),
                       Load(request_rate=10.0, max_concurrency=3, num_prompts=len(recs))])
    horizon = max(r.end_ns for r in recs) + 40 * MS
    return recs, probe_stalls(rng, horizon, rng.choice([0.0, 0.1, 0.3, 0.6])), load


# ---- the reference ----

@dataclass
class Window:
    start: int
    due: int
    end: int
    cause: int


def windows(stalls: list[Stall], activity: list[int] | None) -> list[Window]:
    out = []
    for s in sorted(stalls, key=lambda s: s.due_ns):
        seen = [a for a in activity or [] if a <= s.due_ns]
        start = max([s.after_ns, *seen[-1:]]) if activity is not None else s.after_ns
        out.append(Window(start, s.due_ns, max(s.woke_ns, s.caught) + PROBE_RESOLUTION_NS, CAUSES.index(s.cause)))
    return out


def late(wins: list[Window], t: int) -> tuple[float, int]:
    """(ms, cause) a stall may have delayed stamp t; the later stall's cause on a tie."""
    best = (0.0, -1)
    for w in reversed(wins):
        if w.due < t <= w.end and (t - w.start) / MS > best[0]:
            best = ((t - w.start) / MS, w.cause)
    return best


def larger(*pairs: tuple[float, int]) -> tuple[float, int]:
    best = pairs[0]
    for p in pairs[1:]:
        best = p if p[0] > best[0] else best
    return best


def dominant(pairs: list[tuple[float, int]]) -> str | None:
    weights = [0.0] * len(CAUSES)
    for d, c in pairs:
        if d > 0:
            weights[c] += d
    return None if not any(weights) else CAUSES[weights.index(max(weights))]


def at(sorted_values: list[float], pos: float) -> float:
    if pos > len(sorted_values) - 1:
        return math.inf
    if pos < 0:
        return -math.inf
    return float(np.percentile(sorted_values, 100 * pos / max(len(sorted_values) - 1, 1)))


def rank(n: int, at_pos, q: float, pairs: list[tuple[float, int]]) -> tuple[float, str | None]:
    k = sum(d > 0 for d, _ in pairs)
    if not n or not k:
        return 0.0, None
    pos = (n - 1) * q / 100
    here = at_pos(pos)
    by_rank = max(at_pos(pos + k) - here, here - at_pos(pos - k))
    return min(max(d for d, _ in pairs), by_rank), dominant(pairs)


def figure_bounds(values: list[float], pairs: list[tuple[float, int]], name: str) -> dict:
    n, ranks = len(values), sorted(values)
    out = {f"mean_{name}_ms": (sum(d for d, _ in pairs) / n if n else 0.0, dominant(pairs))}
    for q, stat in (*QS, (100, "max")):
        out[f"{stat}_{name}_ms"] = rank(n, lambda p: at(ranks, p), q, pairs)
    return out


@dataclass(kw_only=True)
class Burst:
    stamp: int
    base: int
    chunks: int
    gaps: int
    client: bool
    first: bool
    last: bool


def reads_of(r: RequestRecord) -> list[tuple[int, int]]:
    out: list[list[int]] = []
    for t in r.token_times_ns:
        if out and out[-1][0] == t:
            out[-1][1] += 1
        else:
            out.append([t, 1])
    return [(t, n) for t, n in out]


def bursts_of(r: RequestRecord, wins: list[Window]) -> list[Burst]:
    reads, times = reads_of(r), r.token_times_ns
    before = [r.sent_ns, r.sent_ns, *(t for t, _ in reads)]
    pace = (times[-1] - times[0]) // (len(times) - 1) if len(times) > 1 else 0
    out = []
    for g, (t, n) in enumerate(reads):
        if n < 2:
            continue
        prev = reads[g - 1][0] if g else r.sent_ns
        held = min(late(wins, t)[0] * MS, t - prev)
        explained = n <= 1 + 2 * held / max(pace, 1) if pace > 0 else 2 * held >= t - prev
        out_gap = g + 1 < len(reads) and reads[g + 1][1] < 2
        out.append(Burst(stamp=t, base=before[g], chunks=n, gaps=n - 1 + (g > 0) + out_gap,
                         client=held > 0 and explained, first=g == 0, last=g == len(reads) - 1))
    return out


def hold(wins: list[Window], t: int, base: int) -> tuple[float, int]:
    """t's hold (ms): t - base, plus what a stall may have delayed the base by (in ns, as the stamps)."""
    return ((t - base + round(late(wins, base)[0] * MS)) / MS, BUFFERING)


def reference(recs: list[RequestRecord], stalls: list[Stall], summary: CellSummary, tally: CellTally,
              one_loop: bool) -> tuple[dict, dict]:
    ok = [r for r in recs if r.ok]
    folded = tally.tokens.chunks() is None
    chunks = [] if folded else [t for r in ok for t in r.token_times_ns]
    firsts = [r.token_times_ns[0] if r.token_times_ns else -1 for r in ok]
    activity = sorted([r.sent_ns for r in recs] + [r.end_ns for r in recs] + firsts + chunks)
    wins = windows(stalls, activity if one_loop else None)
    bursts = {r.index: bursts_of(r, wins) for r in ok}
    total = len(chunks) if not folded else tally.tokens.gap_ranks()[0] + sum(1 for r in ok if r.token_times_ns)
    up_chunks = sum(b.chunks for bs in bursts.values() for b in bs if not b.client)
    pieces = up_chunks > 0 and up_chunks >= 0.5 * max(total, 1)
    bound = {i: [b for b in bs if not b.client and (pieces or b.chunks >= 4)] for i, bs in bursts.items()}

    def stamps(r: RequestRecord) -> dict[str, tuple[float, int]]:
        reads = reads_of(r)
        before = [r.sent_ns, r.sent_ns, *(t for t, _ in reads)]
        first, last = reads[0][0], reads[-1][0]
        on_first = pieces or any(b.first for b in bound[r.index])
        on_last = pieces or any(b.last for b in bound[r.index])
        none = (0.0, -1)
        return {"first": larger(late(wins, first), hold(wins, first, before[0]) if on_first else none),
                "last": larger(late(wins, last), hold(wins, last, before[len(reads) - 1]) if on_last else none),
                "end": larger(late(wins, r.end_ns), hold(wins, r.end_ns, before[len(reads)]) if on_last else none)}

    timed = [r for r in ok if r.token_times_ns]
    d = {r.index: stamps(r) for r in timed}
    out = {}
    out |= figure_bounds([(r.token_times_ns[0] - r.sent_ns) / MS for r in timed], [d[r.index]["first"] for r in timed],
                         "ttft")
    multi = [r for r in timed if r.output_tokens >= 2]
    per = [r.output_tokens - 1 for r in multi]
    tpot = [larger(d[r.index]["first"], d[r.index]["last"]) for r in multi]
    out |= figure_bounds([(r.token_times_ns[-1] - r.token_times_ns[0]) / MS / k for r, k in zip(multi, per, strict=True)],
                         [(x / k, c) for (x, c), k in zip(tpot, per, strict=True)], "tpot")
    ends = [d[r.index]["end"] if r.token_times_ns else late(wins, r.end_ns) for r in ok]
    out |= figure_bounds([(r.end_ns - r.sent_ns) / MS for r in ok], ends, "e2el")
    outs = [r for r, e in zip(ok, ends, strict=True) if r.output_tokens > 0]
    out |= figure_bounds([(r.end_ns - r.sent_ns) / MS / r.output_tokens for r in outs],
                         [(e[0] / r.output_tokens, e[1]) for r, e in zip(ok, ends, strict=True) if r.output_tokens > 0],
                         "ntpot")
    out |= figure_bounds([(r.end_ns - r.token_times_ns[-1]) / MS for r in timed],
                         [larger(d[r.index]["last"], d[r.index]["end"]) for r in timed], "stream_tail")
    out |= itl(timed, wins, tally, d, (pieces, bound))
    out |= rates(recs, wins, summary, (pieces, bound))
    shown = summary.to_dict()
    bounds = {k: v for k, v in out.items() if v[0] > 0 and shown.get(k) is not None and shown[k] == shown[k]}
    facts = {"token_chunks": total,
             "chunks_after_stall": None if folded else sum(late(wins, t)[0] > 0 for t in chunks),
             "chunks_coalesced": sum(b.chunks for bs in bursts.values() for b in bs if not b.client)}
    return bounds, facts


def itl(timed: list[RequestRecord], wins: list[Window], tally: CellTally, d: dict, shape: tuple) -> dict:
    pieces, bound = shape
    n, at_pos = tally.tokens.gap_ranks()
    if tally.tokens.chunks() is not None:
        gaps = [(b - a) / MS for r in timed for a, b in zip(r.token_times_ns, r.token_times_ns[1:], strict=False)]
        ranks = sorted(gaps)
        assert len(gaps) == n
        at_pos = lambda p: at(ranks, p)                                   # noqa: E731
        stalled = [larger(late(wins, a), late(wins, b)) for r in timed
                   for a, b in zip(r.token_times_ns, r.token_times_ns[1:], strict=False)]
    else:
        stalled = [((w.end - PROBE_RESOLUTION_NS - w.start) / MS, w.cause) for w in wins
                   for _ in range(2 * tally.tokens.tokens_near(w.due, w.end))]
    pairs = [p for p in stalled if p[0] > 0]
    if pieces:
        reads = {r.index: reads_of(r) for r in timed}
        largest = max(t - ([r.sent_ns, r.sent_ns] + [x for x, _ in reads[r.index]])[g]
                      for r in timed for g, (t, _) in enumerate(reads[r.index])) / MS
        back = max((w.end - w.start) / MS for w in wins) if wins else 0.0
        pairs += [(largest + back, BUFFERING)] * n if largest + back > 0 else []
    else:
        pairs += [hold(wins, b.stamp, b.base) for bs in bound.values() for b in bs for _ in range(b.gaps)]
    ends = [larger(d[r.index]["first"], d[r.index]["last"]) for r in timed]
    out = {"mean_itl_ms": (sum(x for x, _ in ends) / n if n else 0.0, dominant(ends))}
    for q, stat in QS:
        out[f"{stat}_itl_ms"] = rank(n, at_pos, q, pairs)
    return out


def rates(recs: list[RequestRecord], wins: list[Window], summary: CellSummary, shape: tuple) -> dict:
    pieces, bound = shape
    if not any(r.ok for r in recs) or not summary.duration:
        return {}
    ends = [r.end_ns for r in recs]
    dl = [late(wins, t) for t in ends]
    slots = summary.concurrency or summary.max_concurrency
    held = [(x / slots if slots else 0.0, c) for x, c in dl]
    last = ends.index(max(ends))
    ok = [r for r in recs if r.ok]
    top = max(ok, key=lambda r: r.end_ns)
    upstream = 0.0
    if top.end_ns == ends[last] and top.token_times_ns and (pieces or any(b.last for b in bound[top.index])):
        upstream = hold(wins, top.end_ns, ([top.sent_ns, top.sent_ns] + [t for t, _ in reads_of(top)])[
            len(reads_of(top))])[0]
    held[last] = (max(held[last][0], dl[last][0], upstream), held[last][1])
    share = sum(h for h, _ in held) * MS / (summary.duration * 1e9)
    cause = "buffering" if upstream >= held[last][0] > 0 else dominant(held)
    names = ("request_throughput", "output_throughput", "total_token_throughput", "request_goodput")
    return {k: (share * v, cause) for k in names if (v := getattr(summary, k)) is not None and not math.isnan(v)}


# ---- the checks ----

def measured(recs: list[RequestRecord], stalls: list[Stall], load: Load, one_loop: bool = True):
    tally = tally_of(recs)
    summary = of_tally(tally, load, 8, 8)
    return summary, tally, figure_health(summary, tally, Stalls.of(stalls), one_loop=one_loop)


def agree(recs: list[RequestRecord], stalls: list[Stall], load: Load, one_loop: bool = True) -> dict:
    summary, tally, health = measured(recs, stalls, load, one_loop)
    bounds, facts = reference(recs, stalls, summary, tally, one_loop)
    got = {k: (b.bound, b.cause) for k, b in (health.client_bounds or {}).items()}
    assert sorted(got) == sorted(bounds)
    for k, (b, cause) in bounds.items():
        assert got[k][0] == pytest.approx(b, rel=1e-9, abs=1e-12), k
        assert got[k][1] == cause, k
    assert (health.token_chunks, health.chunks_after_stall, health.chunks_coalesced) == (
        facts["token_chunks"], facts["chunks_after_stall"], facts["chunks_coalesced"])
    return got


@pytest.mark.parametrize("seed", range(60))
def test_every_bound_is_the_documented_formula(seed):
    recs, stalls, load = drawn(seed)
    agree(recs, stalls, load, one_loop=seed % 3 != 0)


@pytest.mark.parametrize("seed", range(60, 72))
def test_the_folded_token_log_bounds_itl_by_every_token_near_a_stall(seed, monkeypatch):
    monkeypatch.setattr(token_log, "FOLD_CHUNKS", 16)
    recs, _, load = drawn(seed)
    recs += [request(random.Random(seed), 100 + i) for i in range(8)]
    stalls = probe_stalls(random.Random(seed + 1), max(r.end_ns for r in recs) + 40 * MS, 0.5)
    summary, tally, _ = measured(recs, stalls, load)
    assert tally.tokens.chunks() is None                             # the log folded
    got = agree(recs, stalls, load)
    assert stalls and {"p50_itl_ms", "p90_itl_ms", "p99_itl_ms"} <= set(got)      # the folded path bounded them


def test_a_stall_longer_than_the_period_overlaps_the_next_window_and_the_earlier_start_bounds_it():
    """Stall A (due 100 ms, woke 140 ms) and B (due 140 ms = A's wake, woke 150 ms): a stamp at 141 ms is in
    both windows; A's start is the earlier, so A bounds it (41 ms), not B (1 ms)."""
    a = Stall(after_ns=90 * MS, due_ns=100 * MS, woke_ns=140 * MS, cause="client_cpu")
    b = Stall(after_ns=140 * MS, due_ns=140 * MS, woke_ns=150 * MS, cause="host_contention")
    r = RequestRecord(index=0, phase="measure", input_len=8, output_len=2, intended_ns=0, sent_ns=0,
                      end_ns=200 * MS, token_times_ns=[141 * MS, 190 * MS], token_counts=[1, 1],
                      completion_tokens=2, usage_source="server")
    got = agree([r], [a, b], Load(concurrency=1, num_prompts=1), one_loop=False)
    assert got["mean_ttft_ms"] == (pytest.approx(51.0), "client_cpu")


def test_a_stamp_before_the_due_narrows_the_window_only_on_one_loop():
    s = Stall(after_ns=0, due_ns=100 * MS, woke_ns=150 * MS, cause="client_stopped")
    r = RequestRecord(index=0, phase="measure", input_len=8, output_len=2, intended_ns=0, sent_ns=90 * MS,
                      end_ns=200 * MS, token_times_ns=[120 * MS, 190 * MS], token_counts=[1, 1],
                      completion_tokens=2, usage_source="server")
    one = agree([r], [s], Load(concurrency=1, num_prompts=1), one_loop=True)
    several = agree([r], [s], Load(concurrency=1, num_prompts=1), one_loop=False)
    assert one["mean_ttft_ms"][0] == pytest.approx(30.0) and several["mean_ttft_ms"][0] == pytest.approx(120.0)


def test_no_stall_and_no_buffering_bound_nothing():
    recs, _, load = drawn(5)
    recs = [r for r in recs if len(set(r.token_times_ns)) == len(r.token_times_ns)]
    _, _, health = measured(recs, [], load)
    assert health.client_bounds == {} and health.chunks_after_stall == 0 and health.chunks_coalesced == 0


def test_a_failed_request_ending_last_bounds_nothing_without_a_stall():
    """As above, with the cell's last end a failed request's (no stream whose hold could delay it): still no bound."""
    recs, _, load = drawn(5)
    recs = [r for r in recs if len(set(r.token_times_ns)) == len(r.token_times_ns)]
    last = max(r.end_ns for r in recs)
    recs.append(RequestRecord(index=1000, phase="measure", input_len=8, output_len=4, intended_ns=last, sent_ns=last,
                              end_ns=last + 5 * MS, error_kind="http_status"))
    summary, _, health = measured(recs, [], load)
    assert summary.failed == 1 and summary.request_throughput and health.client_bounds == {}


def test_on_a_tie_the_earlier_stamps_stall_is_named():
    """The first token held 30 ms by the client's CPU, the last 30 ms by host contention: TPOT's bound and the
    ITL gap between them name the earlier stamp's cause (the reference's `larger` keeps the first on a tie)."""
    a = Stall(after_ns=111 * MS, due_ns=120 * MS, woke_ns=150 * MS, cause="client_cpu")
    b = Stall(after_ns=270 * MS, due_ns=280 * MS, woke_ns=310 * MS, cause="host_contention")
    r = RequestRecord(index=0, phase="measure", input_len=8, output_len=2, intended_ns=0, sent_ns=0,
                      end_ns=400 * MS, token_times_ns=[141 * MS, 300 * MS], token_counts=[1, 1],
                      completion_tokens=2, usage_source="server")
    got = agree([r], [a, b], Load(concurrency=1, num_prompts=1), one_loop=False)
    assert got["mean_tpot_ms"] == (pytest.approx(30.0), "client_cpu")
    assert got["mean_itl_ms"] == (pytest.approx(30.0), "client_cpu")


@pytest.mark.parametrize("kind", ["failed", "no token"])
def test_a_cell_without_a_token_chunk_has_bounds_only_where_it_has_figures(kind):
    """Every request failed, or every ok request came back without a token: no ITL, TTFT or TPOT sample, so
    no bound of theirs; a stall over the ends still bounds E2EL and the rates where they exist."""
    rng = random.Random(7)
    recs = [failed(rng, i) if kind == "failed" else request_without_tokens(rng, i) for i in range(6)]
    stalls = probe_stalls(random.Random(8), max(r.end_ns for r in recs) + 40 * MS, 0.6)
    got = agree(recs, stalls, Load(concurrency=2, num_prompts=6))
    assert not any(k.endswith(("_itl_ms", "_ttft_ms", "_tpot_ms")) for k in got)
    if kind == "no token":
        assert any(k.endswith("_e2el_ms") for k in got)


def request_without_tokens(rng: random.Random, i: int) -> RequestRecord:
    sent = rng.randrange(0, 300) * MS + i
    return RequestRecord(index=i, phase="measure", input_len=8, output_len=0, intended_ns=sent, sent_ns=sent,
                         end_ns=sent + rng.randrange(5, 80) * MS, completion_tokens=0, usage_source="server")


@pytest.mark.parametrize("seed", [0, 1])
def test_a_percentiles_bound_is_read_at_its_own_rank_in_a_large_cell(seed):
    """In a cell of a few requests a high percentile's bound is the largest delay whatever its rank; with
    hundreds of requests and few of them held, the bound is the distance to the samples k ranks away, read
    at q itself (p99 at 99, not at a neighbouring rank)."""
    rng = random.Random(seed)
    recs = []
    for i in range(400):
        sent = rng.randrange(0, 4000) * MS + i
        first = sent + int(rng.uniform(30, 40) * MS)          # close together: k ranks away is nearer than a stall
        times = [first + k * rng.randrange(1, 20) * MS for k in range(rng.randrange(1, 4))]
        recs.append(RequestRecord(index=i, phase="measure", input_len=8, output_len=len(times), intended_ns=sent,
                                  sent_ns=sent, end_ns=times[-1] + MS, token_times_ns=times,
                                  token_counts=[1] * len(times), completion_tokens=len(times), usage_source="server"))
    stalls = probe_stalls(random.Random(seed + 10), max(r.end_ns for r in recs) + 40 * MS, 0.01)
    got = agree(recs, stalls, Load(request_rate=100.0, num_prompts=400), one_loop=False)
    ttft = [got[f"p{q}_ttft_ms"][0] for q in (50, 90, 95)]
    assert len(set(ttft)) == 3 and max(ttft) < 5           # read at each rank: none is the largest delay


def test_a_latencys_tolerance_has_a_1_ms_floor_and_a_rates_has_none():
    from tokenbench.metrics.health import tolerance
    assert tolerance("p99_itl_ms", 4.0) == 1.0 and tolerance("mean_ttft_ms", 400.0) == 20.0
    assert tolerance("output_throughput", 4.0) == pytest.approx(0.2)
    assert tolerance("request_throughput", 0.5) == pytest.approx(0.025)
