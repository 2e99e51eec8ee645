"""Figures from the tally: a cell's summary (`of_tally`), vLLM `bench serve` key names where the quantity is
the same; the steady state and sustained concurrency; an open loop's send rates (`send_rates`); the stream
tail; a sessions cell's shape and figures by turn. Pure functions of what the tally kept (metrics/tally.py);
`summarize` is the same code over a list of records. Formulas: docs/metrics.md ("Send rates": the evidence
for why an open loop's sent rate is off the asked one, each a mean over the cell's sends, failed ones too:
the wait for a free `--max-concurrency` slot, the set-up of a new connection before the request was
written, and the rest of the lateness, the client's own)."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import TYPE_CHECKING

from tokenbench.client.records import RequestRecord
from tokenbench.lazy import lazy_module
from tokenbench.metrics.cell_summary import CellSummary
from tokenbench.metrics.request import describe, percentile
from tokenbench.metrics.summary_groups import (
    EarlyEnds,
    FigureHealth,
    FigureMark,
    JobFigures,
    JobStat,
    OffReason,
    SendRates,
    SessionFigures,
    StreamTail,
)
from tokenbench.metrics.tally import CellTally, JobTally, JobTurn, SendTimes, SlotWaits, Turn, TurnTally
from tokenbench.metrics.timeslices import Columns, Timeslices
from tokenbench.metrics.timeslices import compute as timeslices
from tokenbench.spec.bench import SLO, Load, Workload

if TYPE_CHECKING:
    import numpy as np
else:
    np = lazy_module("numpy")   # imported where first used (tokenbench/lazy.py)

NS = 1e9
MS = 1e6
RATE_TOLERANCE = 0.05          # the sent rate may be off the asked one by this much (relative) unmarked


def of_tally(t: CellTally, load: Load, input_len: int, output_len: int) -> CellSummary:
    """The tally's figures (vLLM's names), the load and the lengths asked: the summary before the stages'
    groups (metrics/cell.finish adds them)."""
    return CellSummary.model_validate(_figures(t, load, input_len, output_len))


def _figures(t: CellTally, load: Load, input_len: int, output_len: int) -> dict:
    out = _load_keys(load, input_len, output_len)
    out.update(_counts(t))
    if not len(t):
        return out
    out.update(_extras(t))
    sent, end = t.all.np("sent"), t.all.np("end")
    dur = (int(end.max()) - int(t.all.np("intended").min())) / NS
    tokens_in, tokens_out = int(t.ok.np("prompt").sum()), int(t.ok.np("out").sum())
    out.update(duration=dur, request_throughput=len(t.ok) / dur, output_throughput=tokens_out / dur,
               total_token_throughput=(tokens_in + tokens_out) / dur,
               achieved_concurrency=int((end - sent).sum()) / NS / dur,
               sustained_concurrency=sustained(sent, end, load))
    if t.slo is not None:
        out.update(request_goodput=t.good / dur, goodput_fraction=t.good / len(t))
    out.update(_latencies(t))
    out.update(steady(t, window(sent, end, load)))
    out["slices"] = timeslices(columns(t), t.tokens.tokens_between, t.slice_s)
    return out


def columns(t: CellTally) -> Columns:
    ok = t.ok
    return Columns(sent=t.all.np("sent"), end=t.all.np("end"), intended=t.all.np("intended"), ok_sent=ok.np("sent"),
                   ok_end=ok.np("end"), ok_first=ok.np("first"), ok_out=ok.np("out"), ok_last=ok.np("last"))


def _counts(t: CellTally) -> dict:
    n_ok = len(t.ok)
    return {
        "num_prompts": len(t), "completed": n_ok, "failed": len(t) - n_ok,
        "failed_by_kind": dict(sorted(t.kinds.items())),
        "total_input_tokens": int(t.ok.np("prompt").sum()), "total_output_tokens": int(t.ok.np("out").sum()),
        "usage_source": dict(t.usage_source), "count_source": dict(t.count_source),
        "length_mismatches": t.length_mismatches, "total_reasoning_tokens": t.reasoning_tokens,
        "reasoning_requests": t.reasoning_requests,
        "zero_token_requests": t.zero_token,
    }


def _extras(t: CellTally) -> dict:
    out: dict = {}
    cached, prompt, told = t.cache
    if told:
        out.update(total_cached_tokens=cached, cache_hit_rate=cached / prompt, cache_reported_requests=told)
    if t.prompt_told:
        out.update(prompt_tokens_disagreeing=t.prompt_diff[0],
                   prompt_tokens_diff_mean=t.prompt_diff[1] / t.prompt_told,
                   prompt_tokens_diff_max=t.prompt_diff[2])
    if t.images[0]:
        out.update(total_images=t.images[1], total_image_bytes=t.images[2],
                   server_counted_images=t.images[3] if t.images_counted else None)
    return out


def _latencies(t: CellTally) -> dict:
    ok = t.ok
    sent, end, first, last, ttfc = ok.np("sent"), ok.np("end"), ok.np("first"), ok.np("last"), ok.np("ttfc")
    outs, e2el = ok.np("out"), end - sent
    has_first = first >= 0
    ttft = first - sent
    multi = has_first & (outs >= 2)
    out: dict = {}
    if (ttfc >= 0).any():
        out.update(describe((ttfc - sent)[ttfc >= 0] / MS, "ttfc"))
    connect = ok.np("connect")
    out["new_connections"] = new = int((connect != 0).sum())
    if new:
        out.update(describe(connect[connect != 0] / MS, "connect"))
    tpot = (last[multi] - first[multi]) / (outs[multi] - 1) / MS      # ends at the last token (vLLM)
    has_out = outs > 0
    out.update(describe(ttft[has_first] / MS, "ttft"))
    out.update(describe(tpot, "tpot"))
    out.update(t.tokens.itl("itl"))
    for name, vals in (("e2el", e2el / MS), ("ntpot", e2el[has_out] / outs[has_out] / MS),
                       ("queue", ok.np("queue") / MS)):
        out.update(describe(vals, name))
    tail = stream_tail(end[has_first] - last[has_first])
    early = early_ends(np.frombuffer(t.early, dtype=np.int64) if t.early else np.zeros(0, np.int64), len(ok))
    return {**out, **({} if tail is None else {"tail": tail}), **({} if early is None else {"early": early})}


def steady(t: CellTally, window: tuple[int, int] | None) -> dict:
    keys = ("steady_duration", "steady_request_throughput", "steady_output_throughput",
            "steady_total_token_throughput")
    if window is None or not len(t.ok):
        return dict.fromkeys(keys)
    a, b = window
    dur = (b - a) / NS
    out_tok = t.tokens.tokens_between(a, b)
    first, end = t.ok.np("first"), t.ok.np("end")
    in_tok = int(t.ok.np("prompt")[(first >= 0) & (first >= a) & (first <= b)].sum())
    done = int(((end >= a) & (end <= b)).sum())
    return dict(zip(keys, (dur, done / dur, out_tok / dur, (in_tok + out_tok) / dur), strict=True))


def _load_keys(load: Load, input_len: int, output_len: int) -> dict:
    shape = {"burstiness": load.burstiness} if load.burstiness != 1.0 else {}
    return {
        "concurrency": load.concurrency,
        "request_rate": load.request_rate,
        "max_concurrency": load.max_concurrency,
        "arrival": load.arrival if load.concurrency is None else None,
        **shape,
        "input_len": input_len,
        "output_len": output_len,
    }


def in_flight_steps(sent: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(times, requests in flight after each) at every send and end, time-ordered (an end before a
    send at the same instant)."""
    times = np.concatenate([sent, end])
    deltas = np.concatenate([np.ones(len(sent), np.int64), -np.ones(len(end), np.int64)])
    order = np.lexsort((deltas, times))
    return times[order], np.cumsum(deltas[order])


def sustained(sent: np.ndarray, end: np.ndarray, load: Load) -> float | None:
    """Closed loop: time-weighted mean of requests in flight from the moment the C-th request was sent
    (ramp-up done) to the last send; None for open loop, or when no request replaced another."""
    cap = load.concurrency
    if cap is None or len(sent) <= cap:
        return None
    sends = np.sort(sent)
    a, b = int(sends[cap - 1]), int(sends[-1])
    if b <= a:
        return None
    t, level = in_flight_steps(sent, end)
    last = int(np.argmax(t >= b))                  # the step at (or after) the last send ends the sum
    k = np.arange(1, last + 1)
    k = k[t[k] > a]
    span = np.minimum(t[k], b) - np.maximum(t[k - 1], a)
    return int((level[k - 1] * span).sum()) / (b - a)


def window(sent: np.ndarray, end: np.ndarray, load: Load) -> tuple[int, int] | None:
    """Closed loop: first to last moment the cell held its full concurrency.
    Open loop: from first send + mean E2EL (ramp-up) to the last send."""
    cap = load.in_flight_cap if load.concurrency is not None else None
    if cap is None:
        mean_e2e = int((end - sent).sum()) / len(sent)
        start, stop = int(sent.min()) + int(mean_e2e), int(sent.max())
        return (start, stop) if stop > start else None
    t, level = in_flight_steps(sent, end)
    full = np.nonzero(level >= cap)[0]
    if len(full) < 2:
        return None
    start = int(t[full[0]])
    after = np.nonzero((t > t[full[-1]]) & (level < cap))[0]
    if not len(after):
        return None
    stop = int(t[after[0]])
    return (start, stop) if stop > start else None


def early_ends(outs: np.ndarray, ok: int) -> EarlyEnds | None:
    """The group over the early-ended answers' output lengths; None when none ended early."""
    if not len(outs):
        return None
    x = np.sort(outs.astype(np.float64))
    return EarlyEnds(ended_early=len(x), ended_early_share=len(x) / ok if ok else None,
                     ended_early_out_min=int(x[0]), ended_early_out_median=percentile(x, 50),
                     ended_early_out_mean=float(x.mean()), ended_early_out_max=int(x[-1]))


def stream_tail(tails_ns: np.ndarray) -> StreamTail | None:
    """The group over the requests' tails (ns); None without any."""
    if not len(tails_ns):
        return None
    ms = np.sort(tails_ns.astype(np.float64)) / MS
    return StreamTail(mean_stream_tail_ms=float(ms.mean()), median_stream_tail_ms=percentile(ms, 50),
                      p99_stream_tail_ms=percentile(ms, 99), max_stream_tail_ms=float(ms[-1]))


def rate_over(times: np.ndarray) -> float | None:
    """Events per second from the first to the last: (n - 1) / (max - min); None under 2 or no span."""
    if len(times) < 2:
        return None
    span = int(times.max()) - int(times.min())
    return (len(times) - 1) / (span / 1e9) if span > 0 else None


def _means(t: SendTimes, waits: SlotWaits) -> tuple[float, float, float]:
    """(client lateness, slot wait, connect) in ms, means over the sends."""
    n = len(t.intended)
    slot = waits.total_ns / n / MS
    connect = float(t.connect.mean()) / MS
    late = float((t.wrote - t.intended - t.connect).mean()) / MS - slot
    return max(0.0, late), slot, connect


def off_reason(rates: SendRates, load: Load) -> OffReason | None:
    """Why the sent rate is off the asked one by more than RATE_TOLERANCE (None when it is not):
    the schedule itself (the draws over these few sends, or the part of the schedule a stopped cell
    sent; under `rate_cap` gate the schedule waited for the cap's slots: "cap") before the sends; else the largest delay of the three: the cap's slots (the server did not
    finish requests as fast as the rate needs), new connections (the server accepted them late), the
    client's own lateness."""
    asked = rates.send_rate_asked
    if not asked or load.arrival == "trace":
        return None
    if rates.send_rate_achieved is None:
        return "few_requests"
    if abs(rates.send_rate_achieved / asked - 1) <= RATE_TOLERANCE:
        return None
    sched = rates.send_rate_scheduled
    if sched is None or abs(sched / asked - 1) > RATE_TOLERANCE:
        gated = load.rate_cap == "gate" and (rates.send_slot_waits or 0) > 0
        return "cap" if gated else "few_requests"     # a gate's schedule itself waited for the slots
    causes = {"cap": rates.send_slot_wait_mean_ms or 0.0, "connect": rates.send_connect_mean_ms or 0.0,
              "client": rates.send_late_mean_ms or 0.0}
    worst = max(causes, key=lambda k: causes[k])
    return worst if causes[worst] > 0 else "few_requests"     # type: ignore[return-value]


def on_schedule(load: Load) -> bool:
    """An open loop that is not a sessions cell: its sends keep a schedule, so their rates are figures."""
    return load.concurrency is None and not load.sessions


def send_rates(t: SendTimes, load: Load, waits: SlotWaits, seed: int | None = None) -> SendRates | None:
    """The group of an open-loop cell (None for a closed loop, a sessions cell, or a cell that sent nothing)."""
    if not on_schedule(load) or not len(t.intended):
        return None
    late, slot, connect = _means(t, waits)
    capped = load.max_concurrency is not None
    given = {"arrival_seed": seed if load.arrival == "poisson" else None, "send_rate_asked": load.request_rate,
             "send_rate_scheduled": rate_over(t.intended), "send_rate_achieved": rate_over(t.wrote),
             "send_late_mean_ms": late, "send_slot_wait_mean_ms": slot if capped else None,
             "send_slot_waits": waits.sends if capped else None, "send_connect_mean_ms": connect,
             "send_cap": load.rate_cap if capped else None, **schedule_fidelity(t)}
    rates = SendRates(**{k: v for k, v in given.items() if v is not None})
    why = {"send_rate_off": off_reason(rates, load), "send_schedule_off": schedule_off(rates)}
    return rates.model_copy(update={k: v for k, v in why.items() if v is not None})


SCHEDULE_SHARE = 0.05       # a send may be late by this share of the mean scheduled gap (at least 1 ms) ...
SCHEDULE_LATE_MS = 1.0
SCHEDULE_CV = 0.1           # ... and the sent gaps' CV may differ from the scheduled ones' by this much


def _cv(times: np.ndarray) -> float | None:
    gaps = np.diff(np.sort(times)).astype(np.float64)
    return float(gaps.std() / gaps.mean()) if len(gaps) >= 2 and gaps.mean() > 0 else None


def schedule_fidelity(t: SendTimes) -> dict[str, float | None]:
    """Each send against its intended time (written - intended - connect): p99 and largest lateness, the
    tolerance (max(SCHEDULE_LATE_MS, SCHEDULE_SHARE of the mean scheduled gap)) and the share of sends later
    than it; the CV of the gaps between sends as scheduled and as sent (the shape the server was offered)."""
    late = np.sort((t.wrote - t.intended - t.connect).astype(np.float64)) / MS
    sched = rate_over(t.intended)
    tol = max(SCHEDULE_LATE_MS, SCHEDULE_SHARE * 1e3 / sched) if sched else SCHEDULE_LATE_MS
    return {"send_late_p99_ms": percentile(late, 99), "send_late_max_ms": float(late[-1]),
            "send_late_tolerance_ms": tol, "send_late_share": float((late > tol).mean()),
            "send_gap_cv_scheduled": _cv(t.intended), "send_gap_cv_sent": _cv(t.wrote)}


def schedule_off(rates: SendRates) -> OffReason | None:
    """Why the sends left their schedule (None when they kept it): their p99 lateness beyond the tolerance,
    or the sent gaps' CV off the scheduled one by more than SCHEDULE_CV; the reason is the largest delay of
    the cap's slots, new connections and the client's own lateness."""
    p99, tol = rates.send_late_p99_ms, rates.send_late_tolerance_ms
    late = p99 is not None and tol is not None and p99 > tol
    a, b = rates.send_gap_cv_sent, rates.send_gap_cv_scheduled
    if not late and (a is None or b is None or abs(a - b) <= SCHEDULE_CV):
        return None
    causes: dict[OffReason, float] = {"cap": rates.send_slot_wait_mean_ms or 0.0,
                                      "connect": rates.send_connect_mean_ms or 0.0,
                                      "client": rates.send_late_mean_ms or 0.0}
    return max(causes, key=lambda k: causes[k])


def shape_of(wl: Workload, load: Load) -> SessionFigures:
    """The shape keys of a sessions cell, from what it asked."""
    return SessionFigures(users=load.users, rate=load.session_rate, ramp_up_s=load.ramp_up_s, turns=wl.turns,
                          user_len=wl.input_len, output_len=wl.output_len, system_len=wl.system_prompt_len or 0,
                          system_shared=wl.shared_system_prompt, think_time_s=wl.think_time_s,
                          think_time_dist=wl.think_time_dist, assistant_turns=wl.assistant_turns, api=wl.api)


def _mean(values: list) -> float | None:
    return float(np.mean(values)) if values else None


def turn_figures(turns: TurnTally) -> dict[str, list]:
    """The `turn_*` keys of SessionFigures, turn 0 to the last turn seen."""
    from tokenbench.metrics.uncertainty import within  # a sessions cell only
    rows = [turns.turns.get(k, Turn()) for k in range(max(turns.turns, default=-1) + 1)]
    ttft = [within(np.asarray(t.ttft), "mean") if t.ttft else None for t in rows]
    return {"turn_requests": [len(t.prompt) for t in rows],
            "turn_prompt_tokens_mean": [_mean(t.prompt) for t in rows],
            "turn_cached_tokens_mean": [_mean(t.cached) for t in rows],
            "turn_hit_rate": [sum(t.cached) / sum(t.cached_prompt) if sum(t.cached_prompt) else None for t in rows],
            "turn_ttft_mean_ms": [i.value if i else None for i in ttft],
            "turn_ttft_lo_ms": [i.lo if i else None for i in ttft],
            "turn_ttft_hi_ms": [i.hi if i else None for i in ttft],
            "turn_ttft_p50_ms": [float(np.median(t.ttft)) if t.ttft else None for t in rows],
            "turn_tpot_mean_ms": [_mean(t.tpot) for t in rows]}


def theory_figures(turns: TurnTally, theory: dict[tuple[str, int], int]) -> dict[str, object]:
    """The theoretical hit by turn (`turn_theory_hit_rate`) and over every turn (`theory_hit_rate`): the
    tokens the oracle found over the prompt tokens, over the same ok measured requests turn_requests counts."""
    rows = [turns.turns.get(k, Turn()) for k in range(max(turns.turns, default=-1) + 1)]
    found = [sum(theory.get((sid, k), 0) for sid in t.sessions) for k, t in enumerate(rows)]
    prompts = [sum(t.prompt) for t in rows]
    return {"turn_theory_hit_rate": [f / p if p else None for f, p in zip(found, prompts, strict=True)],
            "theory_hit_rate": sum(found) / sum(prompts) if sum(prompts) else None}


JOB_STATS = ("mean", "p50", "p90", "p95", "p99")


def _job_number(sid: str) -> tuple[int, str]:
    """Jobs in the order they started (a session id ends with its number)."""
    tail = sid.rsplit("-", 1)[-1]
    return (int(tail), sid) if tail.isdigit() else (-1, sid)


Planned = dict[str, tuple[int, ...]]       # a job's think (tool) time before each of its turns, ns (0 first)


def _complete(jobs: JobTally, planned: Planned) -> tuple[list[tuple[str, list[JobTurn]]], int]:
    """The jobs whose every planned turn was answered ok (in start order), and how many others started."""
    done, partial = [], 0
    for sid in sorted(set(jobs.jobs) | set(planned), key=_job_number):
        turns = jobs.jobs.get(sid, {})
        row = [turns.get(k) for k in range(len(planned.get(sid, turns)))]
        if row and all(t is not None and t.ok for t in row):
            done.append((sid, [t for t in row if t is not None]))
        else:
            partial += 1
    return done, partial


def _job_stats(values: list[float]) -> dict[str, JobStat] | None:
    return _job_stats_over([values])


def _job_stats_over(repeats: list[list[float]]) -> dict[str, JobStat] | None:
    """Each statistic of a job figure with its 95 % interval: one repeat's, or the mean over several of each
    one's statistic with the interval of that mean (uncertainty.interval, as the report's intervals)."""
    from tokenbench.metrics.uncertainty import interval  # a sessions cell only
    groups = [r for r in repeats if r]
    if not groups:
        return None
    return {stat: JobStat(value=i.value, lo=i.lo, hi=i.hi, unreliable=i.unreliable)
            for stat in JOB_STATS if (i := interval(groups, stat, sum(map(len, groups)))) is not None}


def job_figures(jobs: JobTally, planned: Planned) -> JobFigures:
    """A sessions cell's jobs (docs/metrics.md, "Jobs"): each complete job from its first send to its last
    token, split exactly into its turns' time at the server (send to last token), its tool delays (the
    trace's, each waited on the client's clock from the previous answer's end) and the rest (stream tails,
    the client's lateness)."""
    done, partial = _complete(jobs, planned)
    jct = [(t[-1].last - t[0].sent) / MS for _, t in done]
    server = [sum(x.last - x.sent for x in t) / MS for _, t in done]
    tool = [sum(planned.get(sid, ())) / MS for sid, _ in done]
    ttft = [max((x.ttft for x in t if x.ttft is not None), default=None) for _, t in done]
    tpot = [max((x.tpot for x in t if x.tpot is not None), default=None) for _, t in done]
    shares = [(s / j, o / j) if j > 0 else (0.0, 0.0) for s, o, j in zip(server, tool, jct, strict=True)]
    return JobFigures(
        started=len(done) + partial, complete=len(done), incomplete=partial,
        completion_ms=_job_stats(jct), ttft_max_ms=_job_stats([v for v in ttft if v is not None]),
        tpot_max_ms=_job_stats([v for v in tpot if v is not None]),
        turns_mean=_mean([len(t) for _, t in done]), turns_max=max((len(t) for _, t in done), default=None),
        server_share=_mean([a for a, _ in shares]), tool_share=_mean([b for _, b in shares]),
        client_share=_mean([1.0 - a - b for a, b in shares]), ids=[sid for sid, _ in done],
        each_completion_ms=jct, each_server_ms=server, each_tool_ms=tool, each_ttft_max_ms=ttft,
        each_tpot_max_ms=tpot, each_turns=[len(t) for _, t in done])


def tally_of(recs: Sequence[RequestRecord], slo: SLO | None = None) -> CellTally:
    out = CellTally(slo)
    for r in recs:
        out.add(r)
    return out


def _times(recs: Sequence[RequestRecord]) -> tuple[np.ndarray, np.ndarray]:
    return (np.array([r.sent_ns for r in recs], np.int64), np.array([r.end_ns for r in recs], np.int64))


def sustained_concurrency(recs: Sequence[RequestRecord], load: Load) -> float | None:
    """Closed loop: time-weighted mean of requests in flight from the moment the C-th request was sent
    (ramp-up done) to the last send (`sustained`)."""
    return sustained(*_times(recs), load)


def steady_window(recs: Sequence[RequestRecord], load: Load) -> tuple[int, int] | None:
    """Closed loop: first to last moment the cell held its full concurrency.
    Open loop: from first send + mean E2EL (ramp-up) to the last send."""
    return window(*_times(recs), load) if recs else None


def _steady(ok: Sequence[RequestRecord], window: tuple[int, int] | None) -> dict:
    return steady(tally_of(ok), window)


def summarize(recs: Sequence[RequestRecord], load: Load, input_len: int, output_len: int,
              slo: SLO | None = None) -> CellSummary:
    """Summary of one cell's measured requests (warmup records must be filtered out by the caller)."""
    return of_tally(tally_of(recs, slo), load, input_len, output_len)


def _mean_value(vals: list):
    """Mean of numbers (an int when every repeat gave an int and the mean is whole); dicts of counts
    are summed key by key; anything else is the first repeat's."""
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in vals):
        m = statistics.fmean(vals)
        return int(m) if all(isinstance(v, int) for v in vals) and m.is_integer() else m
    if all(isinstance(v, dict) and all(isinstance(x, int) for x in v.values()) for v in vals):
        out: dict = {}
        for v in vals:
            for k, x in v.items():
                out[k] = out.get(k, 0) + x
        return out
    return vals[0]


def _counts_only(group: list[CellSummary]) -> CellSummary:
    """The summary of a cell none of whose repeats was ok: counts, and no figure (nothing to average)."""
    told: set[str] = set().union(*(s.model_fields_set for s in group))
    counts: dict[str, list[int | float | None]] = {
        "num_prompts": [s.num_prompts for s in group], "completed": [s.completed for s in group],
        "failed": [s.failed for s in group], "length_mismatches": [s.length_mismatches for s in group]}
    return CellSummary.model_validate({k: sum(v or 0 for v in vals) for k, vals in counts.items() if k in told})


def _repeat_means(used: list[CellSummary]) -> CellSummary:
    """Each figure given by every repeat: its mean over them (the stored form, key by key); the timeslices
    are the first repeat's (slices of different cells do not average)."""
    stored = [s.to_dict() for s in used]
    own = set(Timeslices.key_names())
    keys = [k for k in stored[0] if all(k in s for s in stored) and k not in own]
    means = CellSummary.from_dict({k: _mean_value([s[k] for s in stored]) for k in keys})
    return means.with_(used[0].slices, _merged_jobs(means.jobs, used))


def _merged_jobs(means: JobFigures | None, used: list[CellSummary]) -> JobFigures | None:
    """Repeats' jobs as one (None: not every repeat has jobs): counts and shares their means, as every figure;
    each statistic the mean of the repeats' with the interval of that mean; each job of every repeat, in
    repeat order."""
    parts = [s.jobs for s in used]
    if means is None or any(p is None for p in parts) or len(parts) < 2:
        return means
    jobs = [p for p in parts if p is not None]

    def each(name: str) -> list:
        return [v for p in jobs for v in (getattr(p, name) or [])]

    stats = {field: _job_stats_over([p.each(metric) for p in jobs])
             for field, metric in (("completion_ms", "job"), ("ttft_max_ms", "job_ttft"), ("tpot_max_ms", "job_tpot"))}
    lists = {name: each(name) for name in ("ids", "each_completion_ms", "each_server_ms", "each_tool_ms",
                                           "each_ttft_max_ms", "each_tpot_max_ms", "each_turns")}
    return means.model_copy(update={**stats, **lists})


def _with_marks(summary: CellSummary, used: list[CellSummary]) -> CellSummary:
    """A figure marked in any repeat is marked in their mean (with the largest bound)."""
    marks: dict[str, FigureMark] = {}
    for s in used:
        for key, m in ((s.figures and s.figures.client_marks) or {}).items():
            if key not in marks or m.bound > marks[key].bound:
                marks[key] = m
    if not marks:
        return summary
    figures = summary.figures or FigureHealth()
    return summary.with_(figures.model_copy(update={"client_marks": marks}))


def mean_of_repeats(used: list[CellSummary], every: list[CellSummary]) -> CellSummary:
    """Repeats of one cell as one summary: each figure given by every repeat that is ok (`used`) is its mean
    over them, a figure marked in any is marked in the mean; when none is ok, the counts of all (`every`)
    and no figure; the failures by kind of all, summed."""
    summary = _with_marks(_repeat_means(used), used) if used else _counts_only(every)
    failed = [s.failed_by_kind for s in every]
    return summary.model_copy(update={"failed_by_kind": _mean_value(failed) if any(failed) else {}})
