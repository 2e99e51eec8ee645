"""Client error against ground truth: tokenbench's measured TTFT/TPOT vs the reference server's own
send log, at several concurrencies. A benchmark (prints a table), not a test.

    .venv/bin/python bench/client_overhead.py [--concurrency 1,64,256,1024] [--output-len 50]

Server and client are pinned to different cores when the machine has two or more.
Truth per request: TTFT = first chunk write - request receipt; TPOT = (last write - first write)/(n-1),
both from the server's send log (perf_counter_ns, the same CLOCK_MONOTONIC as the client).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics

from tokenbench.load.bench import run_bench
from tokenbench.load.target import resolve
from tokenbench.spec.bench import BenchSpec
from tokenbench.testing.reference_server import ReferenceConfig, ReferenceProcess


def truth(log: list[dict]) -> tuple[list[float], list[float]]:
    ttft, tpot = [], []
    for r in log:
        writes = r["write_ns"]
        ttft.append((writes[0] - r["recv_ns"]) / 1e6)
        n = r["completion_tokens"]
        if n > 1:
            tpot.append((writes[-1] - writes[0]) / (n - 1) / 1e6)
    return ttft, tpot


def run_one(conc: int, out_len: int, ttft_ms: float, itl_ms: float, tpc: int) -> dict:
    cfg = ReferenceConfig(ttft_ms=ttft_ms, itl_ms=itl_ms, tokens_per_chunk=tpc)
    cpus = sorted(os.sched_getaffinity(0))
    server_cpu, client_cpus = (cpus[-1], set(cpus[:-1])) if len(cpus) > 1 else (None, set(cpus))
    with ReferenceProcess(cfg, cpu=server_cpu) as ref:
        os.sched_setaffinity(0, client_cpus)
        try:
            spec = BenchSpec(target={"base_url": ref.url}, workload={"input_len": 32, "output_len": out_len},
                             cells=[{"concurrency": conc, "num_prompts": conc * 2, "warmup_requests": conc}])
            target = resolve(spec.target)
            [cell] = asyncio.run(run_bench(spec, target, lambda r: None))
        finally:
            os.sched_setaffinity(0, set(cpus))
        log = ref.send_log()
    measured_idx = len(log) - len(cell.records)
    t_ttft, t_tpot = truth(sorted(log, key=lambda r: r["recv_ns"])[measured_idx:])
    s = cell.summary
    return {"c": conc, "ttft": s["mean_ttft_ms"], "ttft_truth": statistics.mean(t_ttft),
            "p99_ttft": s["p99_ttft_ms"], "tpot": s["mean_tpot_ms"], "tpot_truth": statistics.mean(t_tpot),
            "out_tps": s["output_throughput"], "failed": s["failed"], "lag_p99": s["loop_lag_p99_ms"],
            "cpu": s["client_cpu_percent"], "ideal_tps": conc * out_len / ((ttft_ms + (out_len - 1) * itl_ms) / 1e3)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--concurrency", default="1,64,256,1024")
    ap.add_argument("--output-len", type=int, default=50)
    ap.add_argument("--ttft-ms", type=float, default=100.0)
    ap.add_argument("--itl-ms", type=float, default=20.0)
    ap.add_argument("--tokens-per-chunk", type=int, default=1)
    a = ap.parse_args()
    print(f"reference: TTFT {a.ttft_ms} ms, ITL {a.itl_ms} ms, {a.tokens_per_chunk} token(s)/chunk, "
          f"output {a.output_len} tokens; error = client - configured")
    head = ("conc", "TTFT ms", "err %", "TTFT truth", "p99 TTFT", "p99 err %", "TPOT ms", "err %",
            "out tok/s", "ideal", "loop lag p99", "client CPU %", "failed")
    print(" | ".join(head))
    for c in map(int, a.concurrency.split(",")):
        r = run_one(c, a.output_len, a.ttft_ms, a.itl_ms, a.tokens_per_chunk)
        row = (r["c"], f"{r['ttft']:.2f}", f"{100 * (r['ttft'] / a.ttft_ms - 1):+.2f}", f"{r['ttft_truth']:.2f}",
               f"{r['p99_ttft']:.2f}", f"{100 * (r['p99_ttft'] / a.ttft_ms - 1):+.2f}", f"{r['tpot']:.3f}",
               f"{100 * (r['tpot'] / a.itl_ms - 1):+.2f}", f"{r['out_tps']:.0f}", f"{r['ideal_tps']:.0f}",
               f"{r['lag_p99']:.2f}", f"{r['cpu']:.0f}", r["failed"])
        print(" | ".join(map(str, row)), flush=True)


if __name__ == "__main__":
    main()
