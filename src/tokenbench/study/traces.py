"""The server's own per-request timings in a run: the OTLP receiver for the run's duration (monitor/otlp_receiver.py),
the deployed engine pointed at it, and after each cell its spans joined to its records by the trace id each request
carried (monitor/otlp.py reads a trace's spans; metrics/server.py the clock offset, phases and ledger).

Engines batch their exports, so a cell's spans arrive after its last request: the join waits until every ok
request (warmup included) has its request span, at most WAIT_S (QUIET_WAIT_S once a cell of the run received no
request span at all: the server does not export them). Spans of another trace that arrive meanwhile are counted as
unjoined; a cell none of whose requests joined says once what did arrive."""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from tokenbench.client.records import RequestRecord
from tokenbench.deploy import state
from tokenbench.deploy.engines import traced, traces_address
from tokenbench.errors import TargetError
from tokenbench.metrics.health import claim_ms
from tokenbench.metrics.server import CellJoin, ClockOffset, ServerTiming, SpanCounts, apply_offset, attach
from tokenbench.metrics.summary_groups import PhaseLedger
from tokenbench.spec.deploy_profile import Profile
from tokenbench.spec.ports import PortRange
from tokenbench.spec.study import Target
from tokenbench.study.servers import Server

if TYPE_CHECKING:                    # the receiver and the spans' reading: imported once a run is traced
    from tokenbench.monitor.otlp import Span
    from tokenbench.monitor.otlp_receiver import Received, Receiver

WAIT_S = 10.0          # after a cell, its spans are awaited at most this long
QUIET_WAIT_S = 1.0     # ... once a cell of the run received none
POLL_S = 0.05          # the receiver is asked this often meanwhile
GRACE_S = 0.3          # a trace of several spans (SGLang's slices) gets this long after its request span


class JoinedRecords:
    """A cell's records with the server's timings of each (read again from the spool on every pass)."""

    def __init__(self, source: Iterable[RequestRecord], timings: dict[str, ServerTiming],
                 offset: ClockOffset | None) -> None:
        self.source, self.timings, self.offset = source, timings, offset

    def __iter__(self) -> Iterator[RequestRecord]:
        for r in self.source:
            t = self.timings.get(r.trace_id) if r.trace_id else None
            yield apply_offset(attach(r, t), self.offset) if t is not None else r


@dataclass
class Joined:
    """One cell's join: each request's timing by trace id, the clock offset, and the cell's ledger."""

    timings: dict[str, ServerTiming]
    offset: ClockOffset | None
    ledger: PhaseLedger

    def records(self, source: Iterable[RequestRecord]) -> JoinedRecords:
        return JoinedRecords(source, self.timings, self.offset)


def _received() -> Received:
    from tokenbench.monitor.otlp_receiver import Received
    return Received()


@dataclass
class _Gathered:
    """Spans taken from the receiver so far for one cell, grouped by trace."""

    traces: dict[str, list[Span]] = field(default_factory=lambda: defaultdict(list))
    received: Received = field(default_factory=lambda: _received())

    def add(self, got: Received) -> None:
        from tokenbench.monitor.otlp_receiver import Received
        for s in got.spans:
            self.traces[s.trace_id].append(s)
        self.received = self.received.merged(Received([], got.payloads, got.dropped_payloads, got.other_spans,
                                                      got.overflow))

    def has_request(self, trace_id: str) -> bool:
        return any(s.is_request for s in self.traces.get(trace_id, ()))

    @property
    def slices(self) -> bool:
        from tokenbench.monitor.otlp import QUEUE_SLICE
        return any(s.name == QUEUE_SLICE for spans in self.traces.values() for s in spans)


def _join(records: Iterable[RequestRecord], got: _Gathered) -> Joined:
    """One pass over the cell's records: each one's span attached, the offset's bounds and the phases gathered."""
    from tokenbench.monitor.otlp import timing_of
    timings = {tid: t for tid, spans in got.traces.items() if (t := timing_of(spans)) is not None}
    join, matched = CellJoin(), set()
    for r in records:
        t = timings.get(r.trace_id) if r.trace_id else None
        if t is not None and r.trace_id is not None:
            matched.add(r.trace_id)
            attach(r, t)
        join.add(r)
    requests = sum(1 for spans in got.traces.values() if any(s.is_request for s in spans))
    stray = sum(1 for tid, spans in got.traces.items() if tid not in matched for s in spans if not s.is_request)
    counts = SpanCounts(unjoined_spans=requests - len(matched), other_spans=got.received.other_spans + stray,
                        dropped_payloads=got.received.dropped_payloads)
    return Joined({t: timings[t] for t in matched}, join.bounds.offset(), join.ledger(counts, claim_ms))


def _deployment_exports_to(base_url: str) -> str | None:
    """Where the running deployment at `base_url` (started by `deploy up`) exports its spans, if it does."""
    st = state.serving(state.state_dir(), base_url)
    return traces_address(st.argv) if st is not None else None


class Traces:
    """The run's tracing: decided per server launch (`traced_profile`, `on_for`), the receiver started when first
    needed and closed with the run (`close`), each cell joined (`join`)."""

    def __init__(self, target: Target, log: Callable[[str], None] = print) -> None:
        self.target, self.log = target, log
        self.receiver: Receiver | None = None
        self.quiet = False                  # a cell of this run received no request span at all
        self.warned = False                 # ... or joined none: said once

    @property
    def mode(self) -> str:
        return self.target.server_traces

    def address(self, listen: str | None = None) -> str:
        """HOST:PORT of the receiver, started now (at `listen`, else --otlp-listen) if it is not running yet."""
        if self.receiver is None:
            from tokenbench.monitor.otlp_receiver import start
            within = PortRange.parse(self.target.ports) if self.target.ports else None
            self.receiver = start(listen or self.target.otlp_listen, within)
            self.log(f"receiving the server's OpenTelemetry spans at {self.receiver.address} (HTTP/protobuf: "
                     f"{self.receiver.http_endpoint}, gRPC: {self.receiver.address})")
        return self.receiver.address

    def traced_profile(self, profile: Profile) -> Profile | None:
        """The profile exporting its spans to the receiver, when tracing is not off and its engine can; else None."""
        if self.mode == "off" or traced(profile, "127.0.0.1:0") is None:
            return None
        return traced(profile, self.address())

    def on_for(self, server: Server) -> bool:
        """Whether a server's requests carry a traceparent: one deployed with tracing (by this run, or by `deploy
        up --otlp-listen`: the receiver listens where it exports), or any when asked."""
        if self.mode == "off":
            return False
        exports_to = None if server.traced or self.target.otlp_listen else _deployment_exports_to(server.base_url)
        if server.traced or self.mode == "on" or self.target.otlp_listen or exports_to:
            self.address(exports_to)
            return True
        return False

    def close(self) -> None:
        if self.receiver is not None:
            self.receiver.close()
            self.receiver = None

    async def join(self, records: Iterable[RequestRecord], stopped: bool) -> Joined:
        """Wait for a cell's spans (not after a stopped cell), then join them to its records (warmup included;
        read again on each pass)."""
        expected = {r.trace_id for r in records if r.trace_id and r.ok}
        got = await self._gather(expected, 0.0 if stopped else (QUIET_WAIT_S if self.quiet else WAIT_S))
        if expected and not any(got.has_request(t) for t in expected):
            self._quiet_warning(got)
        return _join(records, got)

    async def _gather(self, expected: set[str], wait_s: float) -> _Gathered:
        got, deadline = _Gathered(), time.monotonic() + wait_s
        assert self.receiver is not None
        try:
            while True:
                got.add(self.receiver.take())
                if all(got.has_request(t) for t in expected) or time.monotonic() >= deadline:
                    break
                await asyncio.sleep(POLL_S)
            if got.slices and wait_s:
                await asyncio.sleep(GRACE_S)
                got.add(self.receiver.take())
        except asyncio.CancelledError:       # Ctrl-C while waiting: join what came (the run stops after the cell)
            task = asyncio.current_task()
            if task is None or not task.cancelling():
                raise
        except TargetError as gone:          # the receiver died: the cell is stored with what was joined
            self.log(f"{gone.one_line()}: this cell's requests are joined to the spans that came before")
        return got

    def _quiet_warning(self, got: _Gathered) -> None:
        """None of a cell's requests joined: what arrived says what is seen (once a run); a cell that received no
        request span at all makes the next ones wait QUIET_WAIT_S."""
        if not self.warned:
            self.log(f"{_nothing_joined(got, WAIT_S)}: this cell's requests are not joined ({_fix(self.receiver)})")
        self.warned = True
        self.quiet = self.quiet or not any(s.is_request for spans in got.traces.values() for s in spans)


def _fix(receiver: Receiver | None) -> str:
    address = receiver.address if receiver else "?"
    return (f"point its OTLP exporter at {address}, e.g. vLLM --otlp-traces-endpoint http://{address}/v1/traces; "
            "--server-traces off sends no traceparent")


def _nothing_joined(got: _Gathered, wait_s: float) -> str:
    """What came from the server in a cell none of whose requests joined a span: nothing, spans none of which is a
    request's, or request spans of other traces (a server or proxy that does not continue the `traceparent`)."""
    r = got.received
    requests = sum(1 for spans in got.traces.values() if any(s.is_request for s in spans))
    if requests:
        return (f"{requests} request spans arrived from the server, none with a trace id this cell's requests carried "
                "(an earlier cell's spans that came late, or a server or proxy that does not continue the W3C "
                "traceparent header's trace)")
    others = r.other_spans + sum(len(spans) for spans in got.traces.values())
    if others or r.dropped_payloads:
        return (f"{others} spans arrived from the server, none a request's (a request span carries "
                f"gen_ai.latency.time_to_first_token, as vLLM's llm_request and SGLang's Req do), "
                f"{r.dropped_payloads} export payloads could not be decoded")
    return f"no span arrived from the server within {wait_s:g} s"
