"""What tokenbench's monitoring costs a CPU server sharing the machine (issue 15): the server's own CPU
time per /metrics scrape (every process of the server, as the sweep's monitor scrapes it once per
`monitor_interval_s`, default 1 s), against the same time idle. A benchmark that prints a table.

    .venv/bin/python bench/scrape_cost.py --base-url http://127.0.0.1:8000 --pid SERVER_PID [--scrapes 200]
"""

import argparse
import time

import psutil

from tokenbench.client import api


def cpu_seconds(pid: int) -> float:
    leader = psutil.Process(pid)
    total = 0.0
    for proc in (leader, *leader.children(recursive=True)):
        try:
            t = proc.cpu_times()
            total += t.user + t.system
        except psutil.NoSuchProcess:
            pass
    return total


def measure(base_url: str, pid: int, scrapes: int) -> tuple[float, float, float, int]:
    """(idle CPU s per s, CPU s per scrape above idle, wall s per scrape, bytes per scrape)."""
    c0, t0 = cpu_seconds(pid), time.monotonic()
    time.sleep(10.0)
    idle = (cpu_seconds(pid) - c0) / (time.monotonic() - t0)
    size, c0, t0 = 0, cpu_seconds(pid), time.monotonic()
    for _ in range(scrapes):
        size = len(api.get_text(base_url, "/metrics") or "")
    wall = time.monotonic() - t0
    per = ((cpu_seconds(pid) - c0) - idle * wall) / scrapes
    return idle, per, wall / scrapes, size


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base-url", required=True)
    ap.add_argument("--pid", type=int, required=True, help="the server's leader process (tokenbench deploy ls)")
    ap.add_argument("--scrapes", type=int, default=200)
    ap.add_argument("--interval-s", type=float, default=1.0, help="the monitor's scrape interval")
    a = ap.parse_args()
    idle, per, wall, size = measure(a.base_url, a.pid, a.scrapes)
    print("| server idle CPU | CPU per scrape | wall per scrape | bytes | share of one core at the interval |")
    print("|---:|---:|---:|---:|---:|")
    print(f"| {idle:.1%} of a core | {per * 1000:.2f} ms | {wall * 1000:.2f} ms | {size:,} | "
          f"{per / a.interval_s:.2%} |")
