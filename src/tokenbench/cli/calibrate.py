"""`tokenbench calibrate`: the client's own error against the reference server at a planned load."""

from __future__ import annotations

import click
from click.core import ParameterSource

from tokenbench.agreement.calibrate import (
    DELIVERY_LIMIT_MS,
    TPOT_LIMIT,
    TTFT_LIMIT,
    Calibration,
    calibrate,
    ceiling_steps,
    find_ceiling,
)
from tokenbench.cli import console, flags, options
from tokenbench.errors import UsageError
from tokenbench.host import ceiling as stored
from tokenbench.host.ceiling import Ceiling
from tokenbench.testing.reference_server import ReferenceConfig

SERVER_BEHIND = 0.9     # the reference server's tok/s below this share of its schedule: it set the pace

HEAD = ("conc", "workers", "TTFT ms", "truth", "err", "intake", "delivery", "p99 TTFT", "TPOT ms", "truth", "err",
        "out tok/s", "truth", "err", "in flight / C", "loop lag p99", "client CPU %", "verdict")


@click.command("calibrate")
@click.option("--concurrency", default="1,64,256", show_default=True, help="levels to test, e.g. 64,256,1024")
@click.option("--output-len", type=click.IntRange(min=2), default=50, show_default=True,
              help="output tokens of every request")
@click.option("--ttft-ms", type=click.FloatRange(min=0), default=100.0, show_default=True,
              help="the reference server's time to first token")
@click.option("--itl-ms", type=click.FloatRange(min=0, min_open=True), default=20.0, show_default=True,
              help="the reference server's interval between tokens")
@click.option("--tokens-per-chunk", type=click.IntRange(min=1), default=1, show_default=True,
              help="tokens the reference server sends in each SSE chunk")
@click.option("--workers", type=click.IntRange(min=1), default=1, show_default=True,
              help="client processes the load is split over")
@click.option("--ceiling", is_flag=True,
              help="find this machine's client ceiling (one client process; concurrency doubling from 16 to 4096 "
                   "unless --concurrency is given) and store it: later runs here state it and warn beyond it")
@flags.apply((flags.CLIENT_CPUS,))
def command(concurrency, output_len, ttft_ms, itl_ms, tokens_per_chunk, workers, ceiling, client__cpus) -> None:  # noqa: PLR0913 (a click command)
    """Measure the reference server (known truth) at the planned load; show where the client breaks down.
    With --client-cpus the client runs on those CPUs (as it would beside a local engine) and the server on
    the others: the client's own error there. With --ceiling: the highest load one client process keeps
    within tolerance on this machine, stored for later runs (docs/metrics.md, "Client ceiling")."""
    reference = ReferenceConfig(ttft_ms=ttft_ms, itl_ms=itl_ms, tokens_per_chunk=tokens_per_chunk)
    if ceiling:
        return _ceiling(concurrency, output_len, reference, workers, client__cpus)
    table = _table(ttft_ms, itl_ms, output_len)
    broke = None
    for c in options.int_list("--concurrency", concurrency):
        r = calibrate(c, reference, output_len, workers, client_cpus=client__cpus)
        broke = broke or (None if r.ok() else c)
        _row(table, r)
    console.out.print(table)
    _legend()
    console.out.print(f"client breaks down at concurrency {broke}" if broke else
                      "the client kept within the limit at every level tested")


def _ceiling(concurrency: str, output_len: int, reference: ReferenceConfig, workers: int,
             client_cpus: str | None) -> None:
    if workers != 1:
        raise UsageError("--ceiling measures one client process, and --workers asks for more",
                         "drop --workers (the ceiling is per client process; a bench spreads beyond it with --workers)")
    given = click.get_current_context().get_parameter_source("concurrency") != ParameterSource.DEFAULT
    levels = options.int_list("--concurrency", concurrency) if given else ceiling_steps()
    table = _table(reference.ttft_ms, reference.itl_ms, output_len)
    steps, found = find_ceiling(sorted(levels), reference, output_len, client_cpus,
                                seen=lambda r: console.err.print(f"step {r.concurrency}: {_verdict(r)}"))
    for r in steps:
        _row(table, r)
    console.out.print(table)
    _legend()
    if found is None:
        raise UsageError(f"the client left its tolerance at the lowest step ({steps[0].concurrency} streams): no "
                         "ceiling is stored", "start lower (--concurrency 1,2,4,8) or run it on a quieter machine")
    console.out.print(ceiling_line(found))
    console.out.print(f"stored for this machine ({stored.machine_key()}) in {stored.save(found)}: later runs here "
                      "state it in their report's environment and warn before a cell asks one client process for more")


def ceiling_line(c: Ceiling) -> str:
    bound = (f"(the client left its tolerance at {c.failed_at:,} streams)" if c.bounded else
             "(at least: every step kept within tolerance; give higher --concurrency steps to find the limit)")
    behind = (f"; the reference server wrote {c.server_pace:.0%} of the tokens its TTFT and ITL allow at that step "
              "(it, not the client, set the pace: the client may sustain more chunks/s than measured here)"
              if c.server_pace < SERVER_BEHIND else "")
    return (f"client ceiling: {c.streams:,} streams, {c.chunks_per_s:,.0f} chunks/s per client process on CPU "
            f"{c.client_cpus} {bound}; TTFT error {c.ttft_error:+.1%}, the client's share {c.delivery_ms:.2f} ms; "
            f"{c.load}{behind}")


def _verdict(r: Calibration) -> str:
    return "ok" if r.ok() else (f"cell {r.status}" if r.status != "ok" else "client error > limit")


def _table(ttft_ms: float, itl_ms: float, output_len: int) -> console.Table:
    table = console.Table(title=f"client calibration: reference TTFT {ttft_ms:g} ms, ITL {itl_ms:g} ms, "
                                f"{output_len} output tokens (client limits: delivery {DELIVERY_LIMIT_MS:g} ms, "
                                f"TPOT and tok/s {TPOT_LIMIT:.0%}; issue-2 TTFT bound {TTFT_LIMIT:.0%})")
    for name in HEAD:
        table.add_column(name, justify="right")
    return table


def _row(table: console.Table, r: Calibration) -> None:
    table.add_row(str(r.concurrency), str(r.workers), f"{r.ttft_ms:.2f}", f"{r.ttft_truth_ms:.2f}", f"{r.ttft_error():+.1%}",
                      f"{r.ingest_ms:.2f}", f"{r.delivery_ms:.2f}", f"{r.p99_ttft_ms:.2f}", f"{r.tpot_ms:.3f}", f"{r.tpot_truth_ms:.3f}", f"{r.tpot_error():+.1%}",
                      f"{r.output_throughput:,.0f}", f"{r.throughput_truth:,.0f}", f"{r.throughput_error():+.1%}", f"{r.in_flight:.1f} / {r.in_flight / r.concurrency:.3f}",
                      console.fmt(r.loop_lag_p99_ms), f"{r.client_cpu_percent:.0f}", _verdict(r))


def _legend() -> None:
    console.out.print("intake = mean server receipt - mean client send (the server's request parsing queue); "
                      "delivery = mean client first-token stamp - mean server first write (the client's read); "
                      "in flight = sustained_concurrency (docs/metrics.md)")
