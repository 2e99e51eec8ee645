"""What varies between runs, recorded per cell and judged by `compare` (issue 42, items 2 and 4): the prefix
cache's state (fresh prompts by default, `--seed` reproducible and then warm the second time), the server's
launch, and who used the host's CPUs; a verdict a busier host could explain is refused. Against the reference
server (a child process, real loopback HTTP) with its prefix cache on; the busy host is made explicit (a busy
process started by the test) and judged by the shares the runs recorded, never by how quiet the machine is."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from tests.study.helpers import added, ids
from tokenbench.cli.main import main
from tokenbench.judge import bottleneck
from tokenbench.judge.fingerprint import refusals, summaries
from tokenbench.judge.views import load_run
from tokenbench.report.compare import compare
from tokenbench.report.document import Cell, Table
from tokenbench.store.db import Store
from tokenbench.testing.reference_server import ReferenceConfig, ReferenceProcess

pytestmark = pytest.mark.slow   # a reference server and several runs: seconds per test

BLOCK = 16
BENCH = ["--input-len", "64", "--output-len", "8", "--concurrency", "2", "--num-prompts", "12"]


def _bench(url: str, db: Path, *more: str) -> str:
    before = ids(db)
    assert main(["bench", "--base-url", url, *BENCH, "--db", str(db), *more]) == 0
    return added(db, before)


def _cell(db: Path, run_id: str):
    [cell] = Store(db).cells(run_id)
    return cell


def _verdicts(doc) -> list[Cell | str]:
    """Every verdict cell of the comparison's verdict tables (the last column)."""
    return [row[-1] for b in doc.blocks if isinstance(b, Table) and b.role == "verdicts" for row in b.rows
            if row[1] not in ("bottleneck", "SLO attainment")]


def test_fresh_prompts_hit_nothing_and_a_seed_sent_twice_is_warm_and_compare_refuses(tmp_path):
    db = tmp_path / "runs.db"
    with ReferenceProcess(ReferenceConfig(ttft_ms=5, itl_ms=2, prefix_cache_blocks=4096, block_size=BLOCK)) as ref:
        first, second = _bench(ref.url, db), _bench(ref.url, db)
        seeded, again = _bench(ref.url, db, "--seed", "7"), _bench(ref.url, db, "--seed", "7")
        pid = ref.proc.pid
    a, b, c, d = (_cell(db, r).summary for r in (first, second, seeded, again))
    # the default: each run salts its prompts; the second one hits nothing the first left in the cache
    for s in (a, b):
        assert (s.cache.state, s.cache.reason, s.cache.prompts) == ("cold", "fresh_prompts", "salted")
    assert b.cache.hit_rate == 0.0 and b.counters.server_prefix_cache_hits == 0 and b.cache_hit_rate == 0.0
    # --seed 7: reproducible; the first time nothing tells, the second time the same prompts were sent before
    assert (c.cache.state, c.cache.reason, c.cache.prompts) == ("unknown", "no_evidence", "seeded")
    assert (d.cache.state, d.cache.reason, d.cache.sent_by) == ("warm", "sent_before", seeded)
    assert d.cache.hit_rate == pytest.approx((64 - 1) // BLOCK * BLOCK / 64)      # every prompt's full blocks
    # one server process, not launched by tokenbench: the same launch for all four
    ids = {s.launch.id for s in (a, b, c, d)}
    assert len(ids) == 1 and f" {pid} " in ids.pop() and not d.launch.ours and d.launch.number is None
    assert d.cpu is not None and d.cpu.server_seen == "local" and d.cpu.server_pct is not None
    # compare refuses every verdict between the two seeded runs, saying why, and the fairness line says it
    store = Store(db)
    doc, issues = compare(store, [seeded, again], "en", "T")
    verdicts = [v for v in _verdicts(doc) if not str(v).startswith("no verdict")]
    # the first seeded run's state is unknown before it ran, but its server served none of it from its cache:
    # cold, by the server's own counters (judge/fingerprint.cache_state), against the second's warm
    said = f"refused: prefix cache cold (0% from the cache) vs warm ({100 * d.cache_hit_rate:.0f}% from the cache)"
    assert verdicts and all(isinstance(v, Cell) and v.why == "refused" and v.text == said for v in verdicts)
    assert [i.check for i in issues if i.kind == "differs"] == ["cache"]
    # two fresh runs: the same state, no refusal for the cache
    doc, issues = compare(store, [first, second], "en", "T")
    assert not [i for i in issues if i.check == "cache"]
    assert not any(isinstance(v, Cell) and "prefix cache" in v.text for v in _verdicts(doc))


CLIENT = [sys.executable, "-m", "tokenbench.cli.main", "bench"]


def _hogs(n: int) -> subprocess.Popen:
    """`n` busy processes for as long as they are left running: stress-ng --cpu N where it is installed, else
    the same in Python."""
    if shutil.which("stress-ng"):
        return subprocess.Popen(["stress-ng", "--cpu", str(n), "--quiet"], stdin=subprocess.DEVNULL)
    loop = "import multiprocessing as m\nm.set_start_method('fork')\n" \
           f"ps=[m.Process(target=lambda: [None for _ in iter(int, 1)]) for _ in range({n})]\n" \
           "[p.start() for p in ps]\n[p.join() for p in ps]\n"
    return subprocess.Popen([sys.executable, "-c", loop], stdin=subprocess.DEVNULL)


def _tree_cpu(proc: subprocess.Popen) -> float:
    try:
        p = psutil.Process(proc.pid)
        return sum(t.user + t.system for x in [p, *p.children(recursive=True)] for t in [x.cpu_times()])
    except psutil.Error:
        return 0.0


def _client(url: str, db: Path, *more: str) -> str:
    """`bench` in a process of its own: the busy processes are then neither the client's nor the server's."""
    before = ids(db)
    done = subprocess.run([*CLIENT, "--base-url", url, *more, "--db", str(db)], stdin=subprocess.DEVNULL,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    return added(db, before)


def _busy_run(url: str, db: Path, hogs: int, *more: str) -> tuple[str, float]:
    """A run whose whole duration other processes kept busy: its id and their CPU, % of one core."""
    hog = _hogs(hogs)
    try:
        time.sleep(0.5)                                  # started before the run's first request
        before, t0 = _tree_cpu(hog), time.monotonic()
        run_id = _client(url, db, *more)
        used = 100 * (_tree_cpu(hog) - before) / (time.monotonic() - t0)
    finally:
        hog.terminate()
        hog.wait()
    return run_id, used


LOAD = ["--input-len", "32", "--output-len", "32", "--concurrency", "4", "--num-prompts", "40"]


def test_a_host_made_busy_for_a_whole_run_is_not_a_regression_of_the_server(tmp_path):
    """The baseline, then the same bench while `stress-ng --cpu 2` holds the host for the whole run. The
    busy run records the stress as other work (at least half of what the stress processes used by their own
    accounting: the window is part of the run), and compare calls no figure of it a regression a busier host
    could explain by those recorded shares: each such verdict is refused, and says so."""
    db = tmp_path / "runs.db"
    with ReferenceProcess(ReferenceConfig(ttft_ms=50, itl_ms=10)) as ref:
        base = _client(ref.url, db, *LOAD)
        busy, used = _busy_run(ref.url, db, 2, *LOAD)
    quiet_cell, busy_cell = _cell(db, base), _cell(db, busy)
    shares = busy_cell.summary.cpu
    assert shares is not None and shares.other_pct is not None and shares.server_seen == "local"
    assert shares.other_pct >= 0.5 * used, (shares, used)
    doc, _ = compare(Store(db), [base, busy], "en", "T")
    verdicts = [str(v.text if isinstance(v, Cell) else v) for v in _verdicts(doc)]
    regressed = [v for v in verdicts if " faster by" in v and base in v.split(" faster by")[0]]   # A faster
    if any(r.refuses for r in refusals(summaries([quiet_cell]), summaries([busy_cell]), "b")):
        assert not regressed, regressed
        assert any(v.startswith("refused: a busier host could explain it") for v in verdicts)
    host = next(b for b in doc.blocks if isinstance(b, Table) and b.role == "host_load")
    assert host.rows[0][2] != "-"                                # the busy run's other work is stated


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs a core left for the client and the server")
def test_a_process_holding_a_core_is_not_named_the_servers_bottleneck(tmp_path):
    """Issue 43, item 6: a busy process holds a core while the reference server (timer-driven) is measured:
    the bottleneck column says what the shares measured, never "host CPU-bound" when other work held the CPU."""
    db = tmp_path / "runs.db"
    with ReferenceProcess(ReferenceConfig(ttft_ms=50, itl_ms=10)) as ref:
        run_id, used = _busy_run(ref.url, db, 1, *LOAD)
    run = load_run(Store(db), run_id, requests=False)
    [cell] = run.cells
    shares = cell.summary.cpu
    assert shares is not None and shares.other_pct is not None and shares.other_pct >= 0.5 * used
    label = bottleneck.label(run, cell, None)
    if shares.other_pct >= bottleneck.OTHERS_HELD:
        assert label.kind != "host"
    if label.kind == "contention":
        assert label.values["other"] == pytest.approx(shares.other_pct)
