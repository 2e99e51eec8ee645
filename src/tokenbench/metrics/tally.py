"""A cell's measured requests reduced as they finish to what its summary needs: a few numbers per
request in compact arrays (8 bytes each) and the token-bearing chunks in a TokenLog (exact up to
FOLD_CHUNKS chunks, then folded into a histogram of stated error: metrics/token_log.py), never the
records themselves. `summary()` gives the same figures as
summarizing the records (metrics/summary.py delegates here), so a cell of any length is summarized
from memory that grows by well under 1 KB per request. Formulas: docs/metrics.md."""

from __future__ import annotations

from array import array
from collections import Counter

import numpy as np

from tokenbench.client.records import RequestRecord
from tokenbench.metrics import request as rm
from tokenbench.metrics.cell_summary import CellSummary
from tokenbench.metrics.coalesced import Coalesced
from tokenbench.metrics.early_ends import early_ends
from tokenbench.metrics.send_rates import SendTimes
from tokenbench.metrics.stats import describe
from tokenbench.metrics.stream_tail import stream_tail
from tokenbench.metrics.timeslices import Columns
from tokenbench.metrics.timeslices import compute as timeslices
from tokenbench.metrics.token_log import TokenLog
from tokenbench.spec.bench import SLO, Load

NS = 1e9
MS = 1e6


class _Columns:
    """One int64 column per name, appended together."""

    def __init__(self, *names: str) -> None:
        self.cols = {n: array("q") for n in names}

    def add(self, *values: int) -> None:
        for col, v in zip(self.cols.values(), values, strict=True):
            col.append(v)

    def np(self, name: str) -> np.ndarray:
        return np.frombuffer(self.cols[name], dtype=np.int64) if self.cols[name] else np.zeros(0, np.int64)

    def __len__(self) -> int:
        return len(next(iter(self.cols.values())))


class CellTally:
    """Feed every measured record once (`add`, in any order), then read `summary(...)`."""

    def __init__(self, slo: SLO | None = None, slice_s: float = 10.0) -> None:
        self.slo = slo if slo is not None and not slo.is_empty() else None
        self.slice_s = slice_s                         # width of the cell's timeslices (metrics/timeslices.py)
        self.all = _Columns("sent", "end", "intended", "wrote", "connect")
        self.ok = _Columns("sent", "end", "first", "last", "ttfc", "out", "prompt", "queue", "connect")
        self.tokens = TokenLog()                       # chunk times and counts (bounded: metrics/token_log.py)
        self.coalesced = Coalesced()                   # reads of several chunks (metrics/figure_bounds.py)
        self.zero_token = 0                            # ok requests without a token-bearing chunk
        self.kinds, self.usage_source, self.count_source = Counter[str](), Counter[str](), Counter[str]()
        self.length_mismatches = self.reasoning_tokens = self.reasoning_requests = self.good = 0
        self.cache = [0, 0, 0]                         # cached tokens, their prompts' tokens, requests telling
        self.prompt_diff: list[int] = [0, 0, 0]        # disagreeing, sum of differences, largest |difference|
        self.prompt_told = 0
        self.images = [0, 0, 0, 0]                     # any sent (all requests), sent by ok, their bytes, counted
        self.images_counted = False
        self.early = array("q")                        # output lengths of requests ended early (early_ends.py)

    def __len__(self) -> int:
        return len(self.all)

    def add(self, r: RequestRecord) -> None:
        self.all.add(r.sent_ns, r.end_ns, r.intended_ns, r.sent_ns + (r.connect_ns if r.connect_in_ttft else 0),
                     r.connect_ns)
        self.length_mismatches += bool(r.length_error)
        self.images[0] += r.images
        if not r.ok:
            self.kinds[r.error_kind or ""] += 1
            return
        self._add_ok(r)

    def _add_ok(self, r: RequestRecord) -> None:
        first, last = (r.token_times_ns[0], r.token_times_ns[-1]) if r.token_times_ns else (-1, -1)
        self.ok.add(r.sent_ns, r.end_ns, first, last, -1 if r.first_content_ns is None else r.first_content_ns,
                    r.output_tokens, r.prompt_tokens or r.input_len, r.queue_ns, r.connect_ns)
        self.tokens.add(r.token_times_ns, r.token_counts)
        self.coalesced.add(r.token_times_ns, r.sent_ns)
        self.zero_token += not r.token_times_ns
        if r.output_tokens < r.output_len and not r.length_error:
            self.early.append(r.output_tokens)
        self.usage_source[r.usage_source] += 1
        self.count_source[r.count_source] += 1
        self.reasoning_tokens += r.reasoning_tokens
        self.reasoning_requests += bool(r.reasoning_tokens)
        if self.slo is not None:
            self.good += rm.meets_slo(r, self.slo)
        if r.cached_tokens is not None and r.prompt_tokens:
            self.cache[0] += r.cached_tokens
            self.cache[1] += r.prompt_tokens
            self.cache[2] += 1
        if r.prompt_tokens is not None and r.expected_prompt_tokens is not None:
            d = r.prompt_tokens - r.expected_prompt_tokens
            self.prompt_told += 1
            self.prompt_diff[0] += bool(d)
            self.prompt_diff[1] += d
            self.prompt_diff[2] = d if abs(d) > abs(self.prompt_diff[2]) else self.prompt_diff[2]
        self.images[1] += r.images
        self.images[2] += r.image_bytes
        if r.image_count is not None:
            self.images[3] += r.image_count
            self.images_counted = True

    # ---- the summary ----

    def send_times(self) -> SendTimes:
        """Every measured send's due, write and connect times (metrics/send_rates.py)."""
        return SendTimes(self.all.np("intended"), self.all.np("wrote"), self.all.np("connect"))

    def summary(self, load: Load, input_len: int, output_len: int) -> CellSummary:
        return CellSummary.model_validate(self._figures(load, input_len, output_len))

    def _figures(self, load: Load, input_len: int, output_len: int) -> dict:
        out = _load_keys(load, input_len, output_len)
        out.update(self._counts())
        if not len(self):
            return out
        out.update(self._extras())
        sent, end = self.all.np("sent"), self.all.np("end")
        dur = (int(end.max()) - int(self.all.np("intended").min())) / NS
        tokens_in, tokens_out = int(self.ok.np("prompt").sum()), int(self.ok.np("out").sum())
        out.update(duration=dur, request_throughput=len(self.ok) / dur, output_throughput=tokens_out / dur,
                   total_token_throughput=(tokens_in + tokens_out) / dur,
                   achieved_concurrency=int((end - sent).sum()) / NS / dur,
                   sustained_concurrency=sustained_concurrency(sent, end, load))
        if self.slo is not None:
            out.update(request_goodput=self.good / dur, goodput_fraction=self.good / len(self))
        out.update(self._latencies())
        out.update(self.steady(steady_window(sent, end, load)))
        out["slices"] = timeslices(self.columns(), self.tokens.tokens_between, self.slice_s)
        return out

    def columns(self) -> Columns:
        ok = self.ok
        return Columns(self.all.np("sent"), self.all.np("end"), self.all.np("intended"), ok.np("sent"),
                       ok.np("end"), ok.np("first"), ok.np("out"))

    def _counts(self) -> dict:
        n_ok = len(self.ok)
        return {
            "num_prompts": len(self), "completed": n_ok, "failed": len(self) - n_ok,
            "failed_by_kind": dict(sorted(self.kinds.items())),
            "total_input_tokens": int(self.ok.np("prompt").sum()), "total_output_tokens": int(self.ok.np("out").sum()),
            "usage_source": dict(self.usage_source), "count_source": dict(self.count_source),
            "length_mismatches": self.length_mismatches, "total_reasoning_tokens": self.reasoning_tokens,
            "reasoning_requests": self.reasoning_requests,
            "zero_token_requests": self.zero_token,
        }

    def _extras(self) -> dict:
        out: dict = {}
        cached, prompt, told = self.cache
        if told:
            out.update(total_cached_tokens=cached, cache_hit_rate=cached / prompt, cache_reported_requests=told)
        if self.prompt_told:
            out.update(prompt_tokens_disagreeing=self.prompt_diff[0],
                       prompt_tokens_diff_mean=self.prompt_diff[1] / self.prompt_told,
                       prompt_tokens_diff_max=self.prompt_diff[2])
        if self.images[0]:
            out.update(total_images=self.images[1], total_image_bytes=self.images[2],
                       server_counted_images=self.images[3] if self.images_counted else None)
        return out

    def _latencies(self) -> dict:
        ok = self.ok
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
        out.update(self.tokens.itl("itl"))
        for name, vals in (("e2el", e2el / MS), ("ntpot", e2el[has_out] / outs[has_out] / MS),
                           ("queue", ok.np("queue") / MS)):
            out.update(describe(vals, name))
        tail = stream_tail(end[has_first] - last[has_first])
        early = early_ends(np.frombuffer(self.early, dtype=np.int64) if self.early else np.zeros(0, np.int64),
                           len(ok))
        return {**out, **({} if tail is None else {"tail": tail}), **({} if early is None else {"early": early})}

    def steady(self, window: tuple[int, int] | None) -> dict:
        keys = ("steady_duration", "steady_request_throughput", "steady_output_throughput",
                "steady_total_token_throughput")
        if window is None or not len(self.ok):
            return dict.fromkeys(keys)
        a, b = window
        dur = (b - a) / NS
        out_tok = self.tokens.tokens_between(a, b)
        first, end = self.ok.np("first"), self.ok.np("end")
        in_tok = int(self.ok.np("prompt")[(first >= 0) & (first >= a) & (first <= b)].sum())
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


def sustained_concurrency(sent: np.ndarray, end: np.ndarray, load: Load) -> float | None:
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


def steady_window(sent: np.ndarray, end: np.ndarray, load: Load) -> tuple[int, int] | None:
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
