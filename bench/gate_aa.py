"""A/A on the real llama.cpp engine (the built-in `cpu-smollm2-llamacpp` profile): one config measured
RUNS times (64:32, c=1 and c=4, 24 requests, each run its own seed so no run hits what another left in the
prefix cache), the server relaunched every two runs (`deploy up` / `deploy down`); then
- the gate between SPLITS random halves (RUNS / 2 against RUNS / 2): how often it called a figure regressed
  or improved, per figure and per gate, against the false-alarm rate it states (--alpha over the gate);
- `compare` of every pair of single runs: how many of its verdicts name a faster side, against the 5 % its
  95 % intervals allow, and which noise it used (the floor learned from the database's other runs of the
  same target, config and cell, else the default);
- the between-run noise the runs show (relative standard deviation per figure): what the default floor of
  metrics/noise.py is set from;
- with --launches, how much of it is the launch's: a one-way analysis of variance of log(figure) by launch
  (each run's recorded launch, else every --per-launch runs in order), pooled over the cells: the within- and
  between-launch standard deviations and the intraclass correlation (docs/metrics.md, "Runs of one launch").
The host's load average is printed beside each run: the machine is shared. A benchmark, not a test.

    .venv/bin/python bench/gate_aa.py [--runs 8] [--splits 40] [--db PATH]     # measure, then judge
    .venv/bin/python bench/gate_aa.py --db PATH --no-measure                    # judge runs measured before
    .venv/bin/python bench/gate_aa.py --db A --db B --no-measure --launches     # the launch's share, pooled
"""

from __future__ import annotations

import argparse
import itertools
import math
import os
import random
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from tokenbench.judge.cells import launch_of
from tokenbench.judge.fairness import Column, common_cells
from tokenbench.judge.floors import Floors, observed
from tokenbench.judge.gate import GATE_METRICS, GateRun, Policy, judge
from tokenbench.judge.intervals import Book, Judging, default_floor, verdict
from tokenbench.judge.views import load_run
from tokenbench.metrics import noise
from tokenbench.report.verdicts import VERDICT_METRICS
from tokenbench.store.db import Store

PROFILE = "cpu-smollm2-llamacpp"
BENCH = ["--input-len", "64", "--output-len", "32", "--concurrency", "1,4", "--num-prompts", "24"]
TOKENBENCH = str(Path(sys.executable).with_name("tokenbench"))


def _tb(args: list[str], env: dict[str, str]) -> str:
    done = subprocess.run([TOKENBENCH, *args], env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"tokenbench {' '.join(args[:3])} exited {done.returncode}: {done.stderr.strip()[-400:]}")
    return done.stdout


def measure(db: str, runs: int, per_launch: int, first_seed: int) -> None:
    """`runs` bench runs of one config into `db`, the server relaunched every `per_launch` runs."""
    env = {**os.environ, "TOKENBENCH_STATE": str(Path(db).parent / "state")}
    for n in range(runs):
        if n % per_launch == 0:
            url = _tb(["deploy", "up", PROFILE], env).strip().splitlines()[-1]
        before = os.getloadavg()[0]
        started = time.monotonic()
        _tb(["bench", "--base-url", url, *BENCH, "--seed", str(first_seed + 100 * n), "--db", db,
             "--disable-tqdm"], env)
        print(f"run {n + 1}/{runs}: launch {n // per_launch + 1}, {time.monotonic() - started:.0f} s, "
              f"load average {before:.2f} -> {os.getloadavg()[0]:.2f}", flush=True)
        if n % per_launch == per_launch - 1 or n == runs - 1:
            _tb(["deploy", "down", PROFILE], env)


def gate_splits(runs: list[GateRun], splits: int, alpha: float, seed: int) -> None:
    """The gate between random halves: how often each figure was flagged, and how many gates flagged any."""
    rng, flagged, gates_flagged, verdicts = random.Random(seed), Counter(), 0, Counter()
    for _ in range(splits):
        order = rng.sample(range(len(runs)), len(runs))
        half = len(runs) // 2
        for lag in (False, True):
            result = judge(([runs[i] for i in order[:half]], [runs[i] for i in order[half:]]),
                           Policy(alpha=alpha, allow_client_lag=lag), Floors(None))
            verdicts.update((lag, f.decision) for f in result.figures)
            hits = [f for f in result.figures if f.decision in ("regressed", "improved")]
            flagged.update((lag, f.cell, f.metric.key) for f in hits)
            gates_flagged += bool(hits) and lag
    figures = len(GATE_METRICS) * 2
    for lag in (False, True):
        n = sum(k for (lg, _), k in verdicts.items() if lg == lag)
        worst = max((k for (lg, *_), k in flagged.items() if lg == lag), default=0)
        print(f"gate {half} vs {len(runs) - half}, {splits} random splits, alpha {alpha:g} over the gate"
              f"{' (--allow-client-lag: every figure judged)' if lag else ''}: {n} figure verdicts "
              f"{dict(sorted((v, k) for (lg, v), k in verdicts.items() if lg == lag))}; "
              f"flagged regressed or improved: {sum(k for (lg, *_), k in flagged.items() if lg == lag)}; "
              f"the most flagged figure {worst} of {splits} splits (its alpha allows {alpha * splits:.1f})")
    print(f"gates with any flag (every figure judged): {gates_flagged} of {splits} (alpha {alpha:g}: "
          f"{alpha * splits:.1f} expected at most); figures per gate {figures}")


def compare_pairs(store: Store, ids: list[str], learned: bool) -> None:
    """`compare`'s judgement of every pair of single runs: verdicts naming a faster side, of all given."""
    runs = [load_run(store, i, requests=False) for i in ids]
    books = {r.id: Book(r) for r in runs}
    judging = Judging(floor=Floors(store) if learned else default_floor)
    named = total = 0
    sources: Counter = Counter()
    for a, b in itertools.combinations(runs, 2):
        cols = [Column(r, r.config("default"), r.id) for r in (a, b)]
        for pair, load in common_cells(cols):
            ca, cb = a.cell_at("default", pair, load), b.cell_at("default", pair, load)
            for m in VERDICT_METRICS:
                v = verdict(books[a.id], ca, books[b.id], cb, m, judging) if ca and cb else None
                if v is not None:
                    total += 1
                    named += v.winner is not None
                    sources[v.noise] += 1
    within = Judging(floor=lambda *a: noise.Noise(0.0, float("inf"), "default"))
    old = sum(1 for a, b in itertools.combinations(runs, 2)
              for pair, load in common_cells([Column(r, r.config("default"), r.id) for r in (a, b)])
              for m in VERDICT_METRICS
              if (v := verdict(books[a.id], a.cell_at("default", pair, load), books[b.id],
                               b.cell_at("default", pair, load), m, within)) is not None and v.winner is not None)
    print(f"compare, {len(runs) * (len(runs) - 1) // 2} pairs of single runs, noise {dict(sources)}: "
          f"{named} of {total} verdicts name a faster side ({100 * named / max(total, 1):.1f} %; its 95 % "
          f"intervals allow 5 %); with within-run intervals only: {old} of {total} "
          f"({100 * old / max(total, 1):.1f} %)")


def floor_table(runs: list[GateRun]) -> None:
    """Each figure's spread over the runs (pooled over the cells): what metrics/noise.DEFAULT_FLOOR holds."""
    cells = sorted({(c.input_len, c.output_len, c.concurrency) for r in runs for c in r.run.cells_of(r.config)})
    out = {}
    for m in GATE_METRICS:
        groups = [[f for r in runs if (f := observed(r.run, r.run.cell_at(r.config, (i, o), c), m, r.book))]
                  for i, o, c in cells]
        est = noise.spread(groups, "default")
        out[m.key] = round(est.tau, 3) if est else None
    print(f"between-run spread of log(figure), pooled over {len(cells)} cells (df {2 * (len(runs) - 1)}): {out}")


def _launch_groups(runs: list[GateRun], per_launch: int) -> list[list[int]]:
    """Run indexes by launch: each cell's recorded launch id, else every `per_launch` runs in order."""
    ids = [launch_of(r.run.cells_of(r.config)[0]) for r in runs]
    keys = ids if all(ids) else [str(k // per_launch) for k in range(len(runs))]
    groups: dict[str, list[int]] = {}
    for k, key in enumerate(keys):
        groups.setdefault(str(key), []).append(k)
    return list(groups.values())


def launch_table(sets: list[list[GateRun]], per_launch: int) -> None:
    """Within- and between-launch spread of log(figure), pooled over the cells of every set: mean squares,
    sigma_within^2 = MS_within, sigma_launch^2 = (MS_between - MS_within) / n0 (n0: runs per launch), ICC."""
    for m in GATE_METRICS:
        ss_w = ss_b = df_w = df_b = 0.0
        sizes = []
        for runs in sets:
            cells = sorted({(c.input_len, c.output_len, c.concurrency) for r in runs for c in r.run.cells_of(r.config)})
            for i, o, c in cells:
                logs = [math.log(f.value) if (f := observed(r.run, r.run.cell_at(r.config, (i, o), c), m, r.book))
                        else None for r in runs]
                groups = [[logs[k] for k in g] for g in _launch_groups(runs, per_launch)]
                if any(None in g for g in groups) or len(groups) < 2:
                    continue
                means = [sum(g) / len(g) for g in groups]
                grand = sum(sum(g) for g in groups) / sum(len(g) for g in groups)
                ss_w += sum((y - mu) ** 2 for g, mu in zip(groups, means, strict=True) for y in g)
                ss_b += sum(len(g) * (mu - grand) ** 2 for g, mu in zip(groups, means, strict=True))
                df_w += sum(len(g) - 1 for g in groups)
                df_b += len(groups) - 1
                sizes += [len(g) for g in groups]
        if not df_w or not df_b:
            print(f"{m.key}: no launch with two runs")
            continue
        ms_w, ms_b = ss_w / df_w, ss_b / df_b
        launch = max(0.0, (ms_b - ms_w) / (sum(sizes) / len(sizes)))
        print(f"{m.key:20s} within-launch sd {math.sqrt(ms_w):.3f} (df {df_w:.0f}), between-launch sd "
              f"{math.sqrt(launch):.3f} (df {df_b:.0f}), mean squares' ratio {ms_b / ms_w:.2f}, "
              f"intraclass correlation {launch / (launch + ms_w):.2f}")


def judge_all(db: str, args: argparse.Namespace) -> None:
    store = Store(db)
    ids = [r.id for r in store.runs()]
    runs = [GateRun.of(load_run(store, i, requests=False), "default") for i in ids]
    print(f"{len(runs)} runs of one config in {db}")
    floor_table(runs)
    gate_splits(runs, args.splits, args.alpha, args.seed)
    compare_pairs(store, ids, learned=False)
    compare_pairs(store, ids, learned=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=8)
    ap.add_argument("--per-launch", type=int, default=2)
    ap.add_argument("--splits", type=int, default=40)
    ap.add_argument("--alpha", type=float, default=0.05)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--db", action="append", default=None, help="a results database (repeat: --launches pools them)")
    ap.add_argument("--no-measure", action="store_true", help="judge the runs already in --db")
    ap.add_argument("--launches", action="store_true", help="only the launch's share of the noise (pooled)")
    args = ap.parse_args()
    if args.launches:
        stores = [Store(d) for d in args.db or []]
        launch_table([[GateRun.of(load_run(s, r.id, requests=False), "default") for r in s.runs()] for s in stores],
                     args.per_launch)
        return 0
    db = (args.db or [None])[0] or str(Path(tempfile.mkdtemp(prefix="tokenbench-aa-")) / "results.db")
    if not args.no_measure:
        measure(db, args.runs, args.per_launch, args.seed)
    judge_all(db, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
