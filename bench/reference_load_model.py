"""The reference server's load model against its closed forms (docs/reference-server.md, "Load model"):
closed-loop users, constant and Poisson rates, each figure taken from the server's own send log (its
schedule, `due_ns`, and its writes, `write_ns`) beside `tokenbench.testing.expect`. A minimal aiohttp
client drives the load, so the figures are the server's, not any benchmark client's. Prints a markdown
table; the schedule columns hold on a busy host, the write columns show what lateness adds.

    .venv/bin/python bench/reference_load_model.py [--requests 64] [--seed 1]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import time

import aiohttp

from tokenbench.testing import expect as X
from tokenbench.testing.reference_server import ReferenceConfig, ReferenceProcess

CFG = ReferenceConfig(ttft_ms=20, itl_ms=10, itl_per_running_ms=1.0, prefill_ms_per_token=0.05, max_running=8,
                      captured_batch_sizes=(1, 2, 4, 8), eager_itl_factor=1.5)
SHAPE = X.Shape(prompt_tokens=200, output_tokens=30)


def body(i: int) -> dict:
    prompt = [3 + (i * 7919 + j) % 30000 for j in range(SHAPE.prompt_tokens)]
    return {"prompt": prompt, "max_tokens": SHAPE.output_tokens, "ignore_eos": True, "stream": True}


async def one(s: aiohttp.ClientSession, url: str, i: int) -> None:
    async with s.post(f"{url}/v1/completions", json=body(i)) as resp:
        async for _ in resp.content.iter_any():
            pass


async def closed(url: str, users: int, total: int) -> None:
    left = iter(range(total))

    async def user(s):
        for i in left:
            await one(s, url, i)

    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as s:
        await asyncio.gather(*[user(s) for _ in range(users)])


async def opened(url: str, gaps_s: list[float]) -> None:
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as s:
        t0, due, tasks = time.perf_counter(), 0.0, []
        for i, gap in enumerate(gaps_s):
            due += gap
            await asyncio.sleep(max(0.0, t0 + due - time.perf_counter()))    # absolute schedule
            tasks.append(asyncio.create_task(one(s, url, i)))
        await asyncio.gather(*tasks)


def measured(log: list[dict], skip: int) -> dict[str, float]:
    """Means and p99 over the send log, the first `skip` requests (warm-up) left out."""
    recs = sorted(log, key=lambda r: r["recv_ns"])[skip:]
    n = SHAPE.output_tokens
    ttft = sorted((r["due_ns"][0] - r["recv_ns"]) / 1e6 for r in recs)
    tpot = [(r["due_ns"][-1] - r["due_ns"][0]) / 1e6 / (n - 1) for r in recs]
    ttft_w = [(r["write_ns"][0] - r["recv_ns"]) / 1e6 for r in recs]
    return {"ttft": statistics.fmean(ttft), "ttft_p99": ttft[min(len(ttft) - 1, int(0.99 * len(ttft)))],
            "tpot": statistics.fmean(tpot), "ttft_w": statistics.fmean(ttft_w)}


def cell(label: str, got: dict[str, float], want: X.Expected) -> str:
    p99 = "-" if want.ttft_p99_ms is None else f"{want.ttft_p99_ms:.1f}"
    return (f"| {label} | {got['ttft']:.1f} | {want.ttft_mean_ms:.1f} | {got['ttft_p99']:.1f} | {p99} | "
            f"{got['tpot']:.2f} | {want.tpot_mean_ms:.2f} | {got['ttft_w']:.1f} |")


def run(load, requests: int) -> dict[str, float]:
    with ReferenceProcess(CFG) as ref:
        asyncio.run(load(ref.url))
    return measured(ref.send_log(), skip=requests // 4)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=64)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    n, rng = args.requests, random.Random(args.seed)
    print("| load | TTFT mean (log) | closed form | TTFT p99 (log) | closed form | TPOT mean (log) | "
          "closed form | TTFT mean (writes) |\n|---|---|---|---|---|---|---|---|")
    for users in (1, 4, 8, 12, 16):
        got = run(lambda url, u=users: closed(url, u, n), n)
        print(cell(f"closed loop, {users} users", got, X.closed_loop(CFG, users, SHAPE)))
    for rate in (4.0, 8.0):
        got = run(lambda url, r=rate: opened(url, [1 / r] * n), n)
        print(cell(f"constant {rate:g}/s", got, X.constant_rate(CFG, rate, SHAPE)))
        gaps = [rng.expovariate(rate) for _ in range(n)]
        got = run(lambda url, g=gaps: opened(url, g), n)
        print(cell(f"Poisson {rate:g}/s", got, X.poisson_rate(CFG, rate, SHAPE)))


if __name__ == "__main__":
    main()
