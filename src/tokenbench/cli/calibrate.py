"""`tokenbench calibrate`: the client's own error against the reference server at a planned load."""

from __future__ import annotations

import click

from tokenbench.agreement.calibrate import DELIVERY_LIMIT_MS, TPOT_LIMIT, TTFT_LIMIT, calibrate
from tokenbench.cli import console, flags, options
from tokenbench.testing.reference_server import ReferenceConfig

HEAD = ("conc", "workers", "TTFT ms", "truth", "err", "intake", "delivery", "p99 TTFT", "TPOT ms", "truth", "err",
        "out tok/s", "truth", "err", "in flight / C", "loop lag p99", "client CPU %", "verdict")


@click.command("calibrate")
@click.option("--concurrency", default="1,64,256", show_default=True, help="levels to test, e.g. 64,256,1024")
@click.option("--output-len", type=click.IntRange(min=2), default=50, show_default=True)
@click.option("--ttft-ms", type=click.FloatRange(min=0), default=100.0, show_default=True)
@click.option("--itl-ms", type=click.FloatRange(min=0, min_open=True), default=20.0, show_default=True)
@click.option("--tokens-per-chunk", type=click.IntRange(min=1), default=1, show_default=True)
@click.option("--workers", type=click.IntRange(min=1), default=1, show_default=True)
@flags.apply((flags.CLIENT_CPUS,))
def command(concurrency, output_len, ttft_ms, itl_ms, tokens_per_chunk, workers, client__cpus) -> None:  # noqa: PLR0913 (a click command)
    """Measure the reference server (known truth) at the planned load; show where the client breaks down.
    With --client-cpus the client runs on those CPUs (as it would beside a local engine) and the server on
    the others: the client's own error there."""
    table = console.Table(title=f"client calibration: reference TTFT {ttft_ms:g} ms, ITL {itl_ms:g} ms, "
                                f"{output_len} output tokens (client limits: delivery {DELIVERY_LIMIT_MS:g} ms, "
                                f"TPOT and tok/s {TPOT_LIMIT:.0%}; issue-2 TTFT bound {TTFT_LIMIT:.0%})")
    for name in HEAD:
        table.add_column(name, justify="right")
    broke = None
    reference = ReferenceConfig(ttft_ms=ttft_ms, itl_ms=itl_ms, tokens_per_chunk=tokens_per_chunk)
    for c in options.int_list("--concurrency", concurrency):
        r = calibrate(c, reference, output_len, workers, client_cpus=client__cpus)
        verdict = "ok" if r.ok() else (f"cell {r.status}" if r.status != "ok" else "client error > limit")
        broke = broke or (None if r.ok() else c)
        table.add_row(str(c), str(workers), f"{r.ttft_ms:.2f}", f"{r.ttft_truth_ms:.2f}", f"{r.ttft_error():+.1%}",
                      f"{r.ingest_ms:.2f}", f"{r.delivery_ms:.2f}", f"{r.p99_ttft_ms:.2f}", f"{r.tpot_ms:.3f}", f"{r.tpot_truth_ms:.3f}", f"{r.tpot_error():+.1%}",
                      f"{r.output_throughput:,.0f}", f"{r.throughput_truth:,.0f}", f"{r.throughput_error():+.1%}", f"{r.in_flight:.1f} / {r.in_flight / c:.3f}",
                      console.fmt(r.loop_lag_p99_ms), f"{r.client_cpu_percent:.0f}", verdict)
    console.out.print(table)
    console.out.print("intake = mean server receipt - mean client send (the server's request parsing queue); "
                      "delivery = mean client first-token stamp - mean server first write (the client's read); "
                      "in flight = sustained_concurrency (docs/metrics.md)")
    console.out.print(f"client breaks down at concurrency {broke}" if broke else
                      "the client kept within the limit at every level tested")
