"""Energy per output token end to end, simulated: `tokenbench bench` against the reference server over real
HTTP, with a stand-in nvidia-smi (a test double on PATH) or a stand-in NVML reporting a constant power per
GPU. The cell's energy per output token is power x GPUs x its measured window / its output tokens (within
2 % of power x the cell's duration), equal to 1 / the report's tokens per joule; the warmup before and the
idle time around the cell are left out. A stand-in nvidia-smi that stops answering for a good part of the
window marks the cell's power and energy; an energy counter (NVML) keeps them exact through the same gap.
With `--price-per-hour` the report's cost satisfies $/M = $/h / (tok/s x 3600) x 10^6."""

from __future__ import annotations

import json
import os
import sys
import threading
import time
import types

import pytest

from tokenbench.cli.main import main
from tokenbench.judge.cells import figure_state_of, label_of
from tokenbench.judge.frontier import point, run_members
from tokenbench.judge.intervals import Book
from tokenbench.judge.plausibility import check_run
from tokenbench.judge.views import load_run
from tokenbench.report import markdown
from tokenbench.report.build import build_report
from tokenbench.store.db import Store
from tokenbench.testing.reference_server import ReferenceConfig, ReferenceProcess

from .standins import standin_nvidia_smi, standin_pynvml

pytestmark = pytest.mark.slow       # a real server and bench runs
CONFIG = ReferenceConfig(ttft_ms=15, itl_ms=8)


def bench(url: str, tmp, *extra: str, interval: str = "0.25") -> tuple[Store, str]:
    db = tmp / "results.db"
    out = tmp / "run.json"
    code = main(["bench", "--base-url", url, "--input-len", "16", "--output-len", "24", "--concurrency", "2",
                 "--monitor-interval-s", interval, "--db", str(db), "--output", str(out), *extra])
    assert code == 0
    return Store(db), json.loads(out.read_text())["run_id"]


@pytest.fixture
def smi_on_path(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)          # the nvidia-smi CSV path, whatever is installed

    def put(**kw):
        smi = standin_nvidia_smi(tmp_path, **kw)
        monkeypatch.setenv("PATH", f"{smi.folder}{os.pathsep}{os.environ['PATH']}")
        return smi
    return put


def only_cell(store: Store, run_id: str):
    run = load_run(store, run_id)
    (cell,) = run.cells
    return run, cell


@pytest.mark.parametrize("gpus,watts", [(1, 400.0), (2, 250.0)])
def test_energy_per_output_token_is_power_times_the_measured_window(tmp_path, smi_on_path, gpus, watts):
    smi_on_path(gpus=gpus, watts=watts)
    with ReferenceProcess(CONFIG) as ref:
        time.sleep(0.5)                                        # idle before the cell: sampled, left out
        store, run_id = bench(ref.url, tmp_path, "--num-prompts", "24", "--warmup-requests", "4",
                              "--price-per-hour", "2.5")
    run, cell = only_cell(store, run_id)
    m, s = cell.summary.monitor, cell.summary
    assert m is not None and len(m.devices) == gpus and m.accel_energy_source == "power"
    tokens = s.total_output_tokens
    assert tokens == 24 * 24
    expected = gpus * watts * m.window_s / tokens
    assert m.accel_energy_per_output_token_j == pytest.approx(expected, rel=1e-9)
    assert m.accel_energy_per_output_token_j == pytest.approx(gpus * watts * s.duration / tokens, rel=0.02)
    (member,) = run_members(run, Book(run))
    found = point(member, cell)
    assert 1 / found.per_joule.value == pytest.approx(m.accel_energy_per_output_token_j, rel=1e-9)
    assert m.accel_power_mean_w == pytest.approx(gpus * watts)
    # marked exactly when the stored samples themselves show a gap or too little coverage (a busy host may
    # delay the monitor's thread; that is judged from this run's own samples, not from a wall-clock bound)
    assert m.power_sparse == _sparse_by_samples(store, cell, m)
    page = markdown.render(build_report(run, "en", check_run(run), "TEST"))
    assert f"| {label_of(cell)} | {'gpu 0' if gpus == 1 else f'all {gpus}'} |" in page
    assert f"{m.accel_energy_per_output_token_j:,.3f}" in page and f"{found.per_joule.value:,.3f}" in page
    cost = _cost_row(page, label_of(cell))
    hourly = 2.5 * gpus            # per device-hour x the devices the monitor sampled (no profile states them)
    assert cost[0] == hourly
    assert cost[1] == pytest.approx(hourly / (s.output_throughput * 3600) * 1e6, abs=5e-5)   # as printed


def _sparse_by_samples(store: Store, cell, m) -> bool:
    """Whether the stored power samples leave a stretch of the measured window more than two intervals long
    without a sample (then the coverage falls short too)."""
    times = sorted({row.t_ns for row in store.samples(cell.id) if row.name == "power_w"})
    start = min(r.sent_ns for r in store.requests(cell.id))
    end = max(r.end_ns for r in store.requests(cell.id))
    points = [t for t in times if t <= start][-1:] + [t for t in times if start < t < end] + \
        [t for t in times if t >= end][:1]
    gaps = [b - a for a, b in zip(points, points[1:], strict=False)]
    return not points or points[0] > start or points[-1] < end or max(gaps, default=0) > 2 * m.interval_s * 1e9


def _cost_row(page: str, label: str) -> list[float]:
    """The cost table's numbers of the cell: $/h, $/M output (all cost), ..."""
    section = page[page.index("Cost per million tokens"):]
    row = next(line for line in section.splitlines() if line.startswith(f"| {label} |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    return [float(cells[2].replace(",", "")), float(cells[3].replace(",", ""))]


def _outage_after_start(ref: ReferenceProcess, smi, seconds: float, mode: str, box: dict) -> threading.Thread:
    """Once the measured phase is under way (the server has answered 3 requests, none of them warmup or probe:
    the cell has no warmup and the bench no probe), the stand-in stops answering for `seconds`."""
    def run() -> None:
        deadline = time.monotonic() + 60
        while len(ref.send_log()) < 3 and time.monotonic() < deadline:
            time.sleep(0.02)
        box["outage"] = smi.outage(seconds, mode)
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


@pytest.mark.parametrize("mode", ["fail", "hang"])
def test_a_stand_in_that_stops_answering_marks_the_cells_energy(tmp_path, smi_on_path, mode):
    smi = smi_on_path(gpus=1, watts=400.0)
    box: dict = {}
    with ReferenceProcess(CONFIG) as ref:
        waiter = _outage_after_start(ref, smi, 2.0, mode, box)
        store, run_id = bench(ref.url, tmp_path, "--duration", "4", "--warmup-requests", "0", "--no-probe",
                               interval="0.1")
        waiter.join(timeout=5)
    run, cell = only_cell(store, run_id)
    m = cell.summary.monitor
    start, end = box["outage"]
    assert (end - start) / 1e9 / m.window_s >= 0.3               # the outage took 30 % of the window or more
    assert m.power_sparse and m.accel_max_gap_s >= 1.5
    assert figure_state_of(cell, "monitor_accel_energy_j").kind == "sparse"
    assert figure_state_of(cell, "output_throughput").ok              # the cell's other figures stay clean
    page = markdown.render(build_report(run, "en", check_run(run), "TEST"))
    assert "◌" in page and "power and energy are not a measurement of the whole window" in page


def test_an_nvml_energy_counter_stays_exact_through_a_gap(tmp_path, monkeypatch):
    """NVML stops answering for 1.5 s inside the window: no power sample there, yet the counter's difference
    is the energy drawn; marked only if its readings around an edge of the window lie far apart (a busy host
    may delay the monitor's thread there: judged from this run's own samples)."""
    monkeypatch.setenv("PATH", str(tmp_path / "no-tools") + os.pathsep + os.environ["PATH"])
    outage: list[int] = []
    monkeypatch.setitem(sys.modules, "pynvml", standin_pynvml(gpus=2, watts=300.0, outage=outage))
    with ReferenceProcess(CONFIG) as ref:
        waiter = _outage_after_start(ref, types.SimpleNamespace(outage=lambda s, mode: _set(outage, s)), 1.5,
                                     "fail", {})
        store, run_id = bench(ref.url, tmp_path, "--duration", "4", "--warmup-requests", "0", "--no-probe",
                               interval="0.1")
        waiter.join(timeout=5)
    _, cell = only_cell(store, run_id)
    m = cell.summary.monitor
    power = sorted({row.t_ns for row in store.samples(cell.id) if row.name == "power_w"})
    assert power[0] < outage[0] < outage[1] < power[-1]                     # the gap is in the stored samples
    assert not any(outage[0] <= t < outage[1] for t in power)
    assert m.accel_energy_source == "counter"
    assert m.accel_energy_j == pytest.approx(2 * 300.0 * m.window_s, rel=1e-3)     # mJ resolution
    assert m.power_sparse == (m.accel_max_gap_s > 2 * m.interval_s)


def _set(outage: list[int], seconds: float) -> tuple[int, int]:
    start = time.monotonic_ns()
    outage[:] = [start, start + int(seconds * 1e9)]
    return start, outage[1]
