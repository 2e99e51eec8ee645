"""What receiving the server's spans costs the client (issue 36): tokenbench against a server exporting one
OpenTelemetry span per request, with tracing on and off, in alternating rounds on the same machine. A benchmark
that prints a table, not a test.

The clientbench yardstick scores a client against its Go oracle's send log, but the oracle exports no spans, so
the traced arm cannot run against it. This script keeps clientbench's setting (server on core 1 at
nice -10, client on core 0 under /usr/bin/time -v; 128 in / 256 out, TTFT 100 ms, 20 ms per token, 2 tokens per
chunk at 1,024 streams, 3 x C requests, no warmup) and its scoring (TTFT error against the server's own send log:
first write - arrival; CPU microseconds per streamed chunk: user + sys of the client's whole process tree, the
OTLP receiver's process included, / chunks), with the reference server in the oracle's place: it writes the same
send log and exports a span per request (`--otlp-endpoint`). `--clientbench SCRIPT` (clientbench's
bench-client.sh) also runs the yardstick itself once (Go oracle, goload and tokenbench untraced) for the
machine's baseline. Medians over the rounds.

    .venv/bin/python bench/traces_cost.py [--streams 1024] [--rounds 3] [--clientbench PATH/bench-client.sh]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from tokenbench.testing.reference_server import ReferenceConfig, ReferenceProcess

IN, OUT, TTFT_MS, ITL_MS = 128, 256, 100.0, 20.0
TB = Path(sys.executable).with_name("tokenbench")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def tokens_per_chunk(streams: int) -> int:
    return 4 if streams >= 2048 else 2 if streams >= 1024 else 1


def cpu_s(time_v: str) -> float:
    """user + sys seconds of /usr/bin/time -v (the process and every child it waited for)."""
    found = {k: float(v) for k, v in re.findall(r"(User|System) time \(seconds\): ([\d.]+)", time_v)}
    return found.get("User", 0.0) + found.get("System", 0.0)


def truth_ttft_ms(send_log: list[dict]) -> float:
    firsts = [(r["write_ns"][0] - r["recv_ns"]) / 1e6 for r in send_log if r["outcome"] == "ok" and r["write_ns"]]
    return statistics.fmean(firsts)


def one(streams: int, traced: bool, folder: Path) -> dict:
    """One arm: the reference server on core 1 exporting spans to the receiver's port (when traced), tokenbench
    on core 0; its CPU per chunk and TTFT error."""
    port, n = free_port(), 3 * streams
    cfg = ReferenceConfig(ttft_ms=TTFT_MS, itl_ms=ITL_MS, tokens_per_chunk=tokens_per_chunk(streams),
                          otlp_endpoint=f"http://127.0.0.1:{port}/v1/traces" if traced else None)
    out, timing = folder / f"{'on' if traced else 'off'}.json", folder / "time.txt"
    args = ["--input-len", str(IN), "--output-len", str(OUT), "--concurrency", str(streams), "--num-prompts", str(n),
            "--warmup-requests", "0", "--no-store", "--output", str(out),
            *(["--otlp-listen", f"127.0.0.1:{port}"] if traced else ["--server-traces", "off"])]
    with ReferenceProcess(cfg, cpu=1) as ref:
        if os.geteuid() == 0:                         # nice -10, as clientbench runs its server
            os.setpriority(os.PRIO_PROCESS, ref.proc.pid, -10)
        subprocess.run(["/usr/bin/time", "-v", "-o", str(timing), "taskset", "-c", "0", str(TB), "bench",
                        "--base-url", ref.url, *args], check=True, capture_output=True, cwd=folder)
        log = ref.send_log()
    cell = json.loads(out.read_text())["cells"][0]
    s = cell["summary"]
    chunks = (s["completed"] or 0) * math.ceil(OUT / tokens_per_chunk(streams))
    truth = truth_ttft_ms(log)
    loop_cpu_s = (s.get("client_cpu_percent") or 0.0) / 100 * (s.get("duration") or 0.0)   # the measured phase's
    return {"cpu_us_per_chunk": 1e6 * cpu_s(timing.read_text()) / chunks, "loop_us_per_chunk": 1e6 * loop_cpu_s / chunks,
            "ttft_err_pct": 100 * (s["mean_ttft_ms"] - truth) / truth, "ttft_ms": s["mean_ttft_ms"],
            "truth_ms": truth, "joined": s.get("phase_joined"), "completed": s["completed"]}


def table(streams: int, rounds: list[tuple[dict, dict]]) -> None:
    def med(arm: int, key: str) -> float:
        return statistics.median(r[arm][key] for r in rounds)
    print(f"| tracing | streams | CPU us/chunk, whole run, process tree | CPU us/chunk, client process, measured "
          f"phase | TTFT error vs send log | joined |  (medians of {len(rounds)})")
    print("|---|---:|---:|---:|---:|---:|")
    for arm, name in ((0, "off"), (1, "on")):
        joined = "-" if arm == 0 else f"{rounds[-1][1]['joined']} / {rounds[-1][1]['completed']}"
        print(f"| {name} | {streams:,} | {med(arm, 'cpu_us_per_chunk'):.2f} | {med(arm, 'loop_us_per_chunk'):.2f} | "
              f"{med(arm, 'ttft_err_pct'):+.2f} % | {joined} |")
    ratio = {k: statistics.median(on[k] / off[k] - 1 for off, on in rounds) for k in ("cpu_us_per_chunk", "loop_us_per_chunk")}
    err = statistics.median(on["ttft_err_pct"] - off["ttft_err_pct"] for off, on in rounds)
    print(f"\non / off, median of the rounds' own ratios: CPU per chunk {ratio['cpu_us_per_chunk']:+.1%} (tree), "
          f"{ratio['loop_us_per_chunk']:+.1%} (client process, measured phase); TTFT error {err:+.2f} points")
    for k, (off, on) in enumerate(rounds):
        print(f"round {k + 1}: off {off['cpu_us_per_chunk']:.2f} / {off['loop_us_per_chunk']:.2f} us, "
              f"{off['ttft_err_pct']:+.2f} %; on {on['cpu_us_per_chunk']:.2f} / {on['loop_us_per_chunk']:.2f} us, "
              f"{on['ttft_err_pct']:+.2f} %")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--streams", type=int, default=1024)
    ap.add_argument("--rounds", type=int, default=3, help="alternating off/on pairs (the machine is shared)")
    ap.add_argument("--clientbench", metavar="SCRIPT", help="clientbench's bench-client.sh: run it once too (untraced)")
    a = ap.parse_args()
    if a.clientbench:
        subprocess.run(["bash", a.clientbench, str(a.streams), "goload tokenbench"], check=False,
                       env={**os.environ, "TB": str(TB)})
    with tempfile.TemporaryDirectory(prefix="tokenbench-traces-cost-") as tmp:
        results = []
        for k in range(a.rounds):
            pair = []
            for traced in ((False, True) if k % 2 == 0 else (True, False)):
                folder = Path(tmp) / f"r{k}-{traced}"
                folder.mkdir()
                pair.append((traced, one(a.streams, traced, folder)))
            pair.sort(key=lambda p: p[0])
            results.append((pair[0][1], pair[1][1]))
        table(a.streams, results)
