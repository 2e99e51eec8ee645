"""What each client of `tokenbench agree` really sends: a short run of the peer and of tokenbench through the
recording proxy (testing/recording_proxy.py) in front of the server, and the comparison of the captured
requests field by field: the prompt (token ids or text, and how many tokens the server counts), every
body field (min_tokens, stream_options, sampling fields), the requests sent before the measured ones
(warmup, readiness checks), connection reuse and headers. Each difference tokenbench can send the peer's
way names the variant (agreement/variants.py) that does; the rest is shown as it is."""

from __future__ import annotations

import json
import sys
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from tokenbench.agreement.peers import Cell, Peer, run_client, run_peer
from tokenbench.agreement.variants import Variant, study_spec, tokenbench_args
from tokenbench.client import api
from tokenbench.testing.recording_proxy import HOP, Captured, ProxyThread

CAPTURE_PROMPTS = 3        # measured requests per captured client: enough to see whether connections are reused
WORKLOAD_KEYS = ("max_tokens", "ignore_eos", "stream")   # the workload itself: must be equal, never varied
PROMPT_KEYS = ("model", "prompt", "messages")            # compared as the prompt row, not as fields
IGNORED_HEADERS = HOP | {"content-type", "accept-encoding"}
VARIANT_NAMES = ("text", "no-min-tokens", "final-usage", "sampling", "warmup", "connection",
                 "no-monitor")                                                     # all compare() names


@dataclass(frozen=True)
class ClientCapture:
    """One client's generation requests in order of arrival; the last `measured` are its measured ones."""

    tool: str
    requests: tuple[Captured, ...]
    measured: int
    summary: Mapping = field(default_factory=dict)      # the client's own figures for the captured run
    metrics: tuple[Captured, ...] = ()                  # the client's GET /metrics, at any time
    monitor_s: float = 0.0      # tokenbench's monitor interval for this arm (0: none; a peer's reads are only seen)

    @property
    def pre(self) -> tuple[Captured, ...]:
        """The requests before the measured ones (warmup, readiness checks, probes)."""
        return self.requests[:max(0, len(self.requests) - self.measured)]

    @property
    def measured_requests(self) -> tuple[Captured, ...]:
        return self.requests[len(self.pre):]

    def body(self) -> dict:
        """The first measured request's body (every measured body has the same fields)."""
        first = next((r.json() for r in self.measured_requests), None)
        return first if isinstance(first, dict) else {}

    def connections(self) -> int:
        return len({r.connection for r in self.requests})

    @property
    def scrapes(self) -> int:
        """GET /metrics that arrived while measured requests were in flight (vllm bench serve reads the
        counters before and after its measured requests; tokenbench's monitor also reads them between)."""
        measured = self.measured_requests
        if not measured:
            return 0
        start = measured[0].arrived_ns
        end = max(r.last_chunk_ns or r.arrived_ns for r in measured)
        return sum(start <= r.arrived_ns <= end for r in self.metrics)

    @property
    def monitors(self) -> bool:
        """Whether the client reads /metrics while its measured requests run: tokenbench whenever its monitor
        is on (whether one of its throttled scrapes lands inside a short capture is timing), a peer when the
        proxy saw it do so."""
        return self.monitor_s > 0 or self.scrapes > 0


@dataclass(frozen=True)
class Difference:
    """One row of the comparison: tokenbench's value, the peer's, and the variant that sends the peer's."""

    what: str
    ours: str
    theirs: str
    variant: Variant | None = None
    same: bool | None = None        # where the texts carry counts that may differ while the behaviour is the same

    @property
    def differs(self) -> bool:
        return not self.same if self.same is not None else self.ours != self.theirs


def generation(captured: Sequence[Captured]) -> tuple[Captured, ...]:
    """The completions and chat requests (not /v1/models, /tokenize, health checks)."""
    return tuple(r for r in captured if r.method == "POST" and r.route.endswith("completions"))


def metrics_reads(captured: Sequence[Captured]) -> tuple[Captured, ...]:
    """The client's reads of the server's Prometheus metrics."""
    return tuple(r for r in captured if r.method == "GET" and r.route == "/metrics")


def capture_peer(peer: Peer, python: str, cell: Cell, out: Path) -> ClientCapture:
    """The peer's requests of a short run through the proxy (its figures are not used)."""
    with ProxyThread(cell.base_url) as proxy:
        summary = run_peer(peer, python, replace(cell, base_url=proxy.url), out)
        return ClientCapture(peer.label, generation(proxy.captured), cell.num_prompts, summary,
                             metrics_reads(proxy.captured))


def capture_tokenbench(cell: Cell, variant: Variant, out: Path) -> ClientCapture:
    """tokenbench's requests for one variant: `tokenbench bench` with the arm's flags (variants.
    tokenbench_args), in a process of its own like the peer, so the proxy shares no interpreter with a client."""
    result = out / f"tokenbench-{variant.name}-{cell.tag}.json"
    with ProxyThread(cell.base_url) as proxy:
        argv = [sys.executable, "-m", "tokenbench.cli.main", "bench",
                *tokenbench_args(replace(cell, base_url=proxy.url), str(result), variant)]
        run_client(argv, out / f"tokenbench-{variant.name}-{cell.tag}.log", f"tokenbench ({variant.label})")
        return ClientCapture(variant.label, generation(proxy.captured), cell.num_prompts, read_summary(result),
                             metrics_reads(proxy.captured), monitor_interval(cell, variant))


def monitor_interval(cell: Cell, variant: Variant) -> float:
    """The monitor interval the arm runs with, read from the study it runs (its change, or the default)."""
    return study_spec(cell, variant).monitor_interval_s


def read_summary(path: Path) -> dict:
    """The one cell's summary in tokenbench's JSON result (`bench --output`)."""
    return json.loads(path.read_text())["cells"][0]["summary"]


# ---- the prompt ----

def server_tokens(base_url: str, model: str, req: Captured) -> int | None:
    """Prompt tokens by the server's count: its usage, else its /tokenize (special tokens added), else the ids."""
    if req.usage and isinstance(req.usage.get("prompt_tokens"), int):
        return req.usage["prompt_tokens"]
    prompt = (req.json() or {}).get("prompt")
    if isinstance(prompt, list) and all(isinstance(t, int) for t in prompt):
        return len(prompt)
    if not isinstance(prompt, str):
        return None
    status, data = api.post_json(base_url, "/tokenize", {"model": model, "prompt": prompt, "add_special_tokens": True})
    count = (data or {}).get("count") if status == 200 else None
    return count if isinstance(count, int) else None


def prompt_form(body: dict) -> str:
    prompt = body.get("prompt", body.get("messages"))
    if "messages" in body:
        return "chat messages"
    if isinstance(prompt, list) and prompt and all(isinstance(t, int) for t in prompt):
        return "token ids"
    return "text" if isinstance(prompt, str) else type(prompt).__name__


def _counts_text(counts: list[int]) -> str:
    if not counts:
        return "? tokens by the server"
    lo, hi, mean = min(counts), max(counts), sum(counts) / len(counts)
    return f"{lo} tokens by the server" if lo == hi else f"{lo}-{hi} tokens by the server (mean {mean:.1f})"


def _tokens(cap: ClientCapture, cell: Cell) -> list[int]:
    return [n for r in cap.measured_requests if (n := server_tokens(cell.base_url, cell.model, r)) is not None]


def prompt_row(ours: ClientCapture, theirs: ClientCapture, cell: Cell) -> Difference:
    """Ids or text, and the prompt length the server counts; the text variant takes the peer's length."""
    mine, peer = _tokens(ours, cell), _tokens(theirs, cell)
    form, peer_form = prompt_form(ours.body()), prompt_form(theirs.body())
    variant = None
    if form == "token ids" and peer_form == "text":
        length = round(sum(peer) / len(peer)) if peer else None
        variant = Variant("text", "prompt as text", {"workload.prompt_as_text": True},
                          length if length not in (None, cell.input_len) else None)
    return Difference("prompt", f"{form}, {_counts_text(mine)}", f"{peer_form}, {_counts_text(peer)}", variant)


# ---- body fields ----

def shown(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


ABSENT = "-"


def _field(body: dict, key: str) -> str:
    return shown(body[key]) if key in body else ABSENT


def _field_variant(key: str, ours: dict, theirs: dict) -> Variant | None:
    """min_tokens and continuous usage can be left out; other fields the peer sets go into the sampling variant."""
    if key == "min_tokens" and key not in theirs:
        return Variant("no-min-tokens", "no min_tokens", {"target.no_min_tokens": True})
    if key == "stream_options" and "continuous_usage_stats" in (ours.get(key) or {}) \
            and "continuous_usage_stats" not in (theirs.get(key) or {}):
        return Variant("final-usage", "final usage only", {"target.final_usage_only": True})
    return None


def sampling_fields(ours: dict, theirs: dict) -> dict[str, Any]:
    """The peer's fields that tokenbench does not send, or sends with another value (extra_body can set them)."""
    fixed = {*PROMPT_KEYS, *WORKLOAD_KEYS, "min_tokens", "stream_options"}
    return {k: v for k, v in theirs.items() if k not in fixed and (k not in ours or ours[k] != v)}


def field_rows(ours: ClientCapture, theirs: ClientCapture) -> list[Difference]:
    mine, peer = ours.body(), theirs.body()
    keys = [k for k in dict.fromkeys([*mine, *peer]) if k not in PROMPT_KEYS]
    extra = sampling_fields(mine, peer)
    sampling = Variant("sampling", "the peer's sampling fields", {"target.extra_body": extra}) if extra else None
    rows = []
    for key in keys:
        variant = sampling if key in extra else _field_variant(key, mine, peer)
        same = (key in mine) == (key in peer) and mine.get(key) == peer.get(key)     # 0 and 0.0 are the same
        rows.append(Difference(key, _field(mine, key), _field(peer, key), variant, same))
    return rows


# ---- before the measured requests, connections, headers ----

def _pre_kinds(cap: ClientCapture) -> Counter:
    """The requests before the measured ones by (which prompt, max_tokens)."""
    measured = {shown((r.json() or {}).get("prompt")) for r in cap.measured_requests}
    groups: Counter = Counter()
    for r in cap.pre:
        body = r.json() or {}
        kind = "a measured prompt" if shown(body.get("prompt")) in measured else "a fresh prompt"
        groups[(kind, body.get("max_tokens"))] += 1
    return groups


def _pre_text(groups: Counter) -> str:
    parts = [f"{n} x {kind} (max_tokens {m})" for (kind, m), n in groups.items()]
    return ", ".join(parts) if parts else "none"


def _repeated(groups: Counter) -> int:
    return sum(n for (kind, _), n in groups.items() if kind == "a measured prompt")


def warmup_row(ours: ClientCapture, theirs: ClientCapture, cell: Cell) -> Difference:
    """The peer's warmup as tokenbench can send it: as many requests, repeating the first measured prompt
    when the peer's repeat a measured prompt (readiness checks included: they load the server the same way)."""
    mine, peer = _pre_kinds(ours), _pre_kinds(theirs)
    repeats = _repeated(peer)
    variant = None
    if mine != peer:
        count = repeats or sum(peer.values())
        variant = Variant("warmup", "the peer's warmup", {"warmup_first_prompt": True} if repeats else {},
                          warmup_extra=count - cell.concurrency)
    return Difference("before the measured requests", _pre_text(mine), _pre_text(peer), variant)


def _reuse(cap: ClientCapture) -> str:
    n = len(cap.requests)
    return "a new connection per request" if n > 1 and cap.connections() == n else "connections reused"


def _connections_text(cap: ClientCapture) -> str:
    n, m = len(cap.requests), cap.connections()
    return f"{_reuse(cap)} ({n} request{'s' * (n != 1)} on {m} connection{'s' * (m != 1)})"


def connection_row(ours: ClientCapture, theirs: ClientCapture) -> Difference:
    variant = None
    if _reuse(theirs) == "a new connection per request" and _reuse(ours) != _reuse(theirs):
        variant = Variant("connection", "a new connection per request",
                          {"target.new_connection_per_request": True, "target.connect_in_ttft": True})
    return Difference("connections", _connections_text(ours), _connections_text(theirs), variant,
                      same=_reuse(ours) == _reuse(theirs))


def _scrapes_text(cap: ClientCapture) -> str:
    seen = f"{cap.scrapes} scrape{'s' * (cap.scrapes != 1)}" if cap.scrapes else "none"
    return f"monitor every {cap.monitor_s:g} s ({seen} in this capture)" if cap.monitor_s > 0 else seen


def monitor_row(ours: ClientCapture, theirs: ClientCapture) -> Difference:
    """tokenbench's monitor reads the server's /metrics during the run (work the server does beside the
    requests); a peer that reads none among its measured requests gets the variant without the monitor.
    tokenbench's side is its setting, not the capture's count: a scrape is throttled to a small share of the
    server's time, so a capture of a few requests may or may not hold one while a measured round does."""
    variant = None
    if ours.monitors and not theirs.monitors:
        variant = Variant("no-monitor", "no /metrics scrapes", {"monitor_interval_s": 0})
    return Difference("GET /metrics while measured requests run", _scrapes_text(ours), _scrapes_text(theirs), variant,
                      same=ours.monitors == theirs.monitors)


def _header_names(cap: ClientCapture) -> set[str]:
    return {n for r in cap.measured_requests for n in r.header_names()} - IGNORED_HEADERS


def header_row(ours: ClientCapture, theirs: ClientCapture) -> Difference:
    mine, peer = _header_names(ours), _header_names(theirs)
    return Difference("other headers", ", ".join(sorted(mine - peer)) or ABSENT,
                      ", ".join(sorted(peer - mine)) or ABSENT)


def path_row(ours: ClientCapture, theirs: ClientCapture) -> Difference:
    def path(cap: ClientCapture) -> str:
        return ", ".join(sorted({r.path for r in cap.measured_requests})) or ABSENT
    return Difference("endpoint", path(ours), path(theirs))


# ---- the clients' own clocks against the proxy's ----

# (row, the client's figure, the proxy's per-request time): the client's mean minus the proxy's mean over the
# same measured requests is what the client adds to the server's time (its clock, its parsing, two hops)
OVERHEADS = (("client TTFT - proxy's first bytes", "mean_ttft_ms", "ttfb_ms"),
             ("client E2EL - proxy's last bytes", "mean_e2el_ms", "total_ms"))


def client_overhead(cap: ClientCapture, key: str, attr: str) -> float | None:
    mine = cap.summary.get(key)
    seen = [v for r in cap.measured_requests if (v := getattr(r, attr)) is not None]
    if not isinstance(mine, (int, float)) or not seen:
        return None
    return float(mine) - sum(seen) / len(seen)


@dataclass(frozen=True)
class Clock:
    """What each client's own clock and parsing add to the proxy's view of the same requests, at one
    concurrency (ms; the client's mean minus the proxy's mean over the captured measured requests)."""

    concurrency: int
    ours_ttft: float | None
    theirs_ttft: float | None
    ours_e2el: float | None
    theirs_e2el: float | None


def clock(ours: ClientCapture, theirs: ClientCapture, concurrency: int) -> Clock:
    (ttft_key, ttft_attr), (e2el_key, e2el_attr) = ((k, a) for _, k, a in OVERHEADS)
    return Clock(concurrency, client_overhead(ours, ttft_key, ttft_attr), client_overhead(theirs, ttft_key, ttft_attr),
                 client_overhead(ours, e2el_key, e2el_attr), client_overhead(theirs, e2el_key, e2el_attr))


def _ms(x: float | None) -> str:
    return "?" if x is None else f"{x:+.1f} ms"


def overhead_rows(ours: ClientCapture, theirs: ClientCapture) -> list[Difference]:
    """Measured, not sent: how much each client's own TTFT and E2EL exceed what the proxy saw."""
    return [Difference(label, _ms(client_overhead(ours, key, attr)), _ms(client_overhead(theirs, key, attr)))
            for label, key, attr in OVERHEADS]


def compare(ours: ClientCapture, theirs: ClientCapture, cell: Cell) -> list[Difference]:
    """Every row of the comparison, in the order tables show them."""
    return [path_row(ours, theirs), prompt_row(ours, theirs, cell), *field_rows(ours, theirs),
            warmup_row(ours, theirs, cell), connection_row(ours, theirs), monitor_row(ours, theirs),
            header_row(ours, theirs),
            *overhead_rows(ours, theirs)]


def variants(rows: Sequence[Difference]) -> list[Variant]:
    """The distinct variants the differences name, in row order."""
    seen: dict[str, Variant] = {}
    for row in rows:
        if row.variant is not None and row.differs:
            seen.setdefault(row.variant.name, row.variant)
    return list(seen.values())
