"""The client ceiling (issue 46, item 3): `calibrate --ceiling` steps one client process up against the reference
server and stores the last step within tolerance for this machine ($TOKENBENCH_STATE/machine, a tmp dir here:
tests/conftest.py); a later bench here states it in its report's environment and warns, before anything is
sent, where a cell asks one client process for more. Real reference server over loopback; no wall-clock bound.

Where a test is about what is done with the verdict, not the verdict itself, the tolerance is widened (or made
impossible) so that a loaded test machine cannot move the outcome; the comparison with the send log still runs."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from tests.study.helpers import ceiling
from tokenbench import __version__
from tokenbench.agreement import calibrate as calibration
from tokenbench.cli.main import main
from tokenbench.host import ceiling as machine
from tokenbench.judge.views import load_run
from tokenbench.report import markdown
from tokenbench.report.build import build_report
from tokenbench.store.db import Store
from tokenbench.testing.reference_server import ReferenceConfig, ReferenceProcess

pytestmark = pytest.mark.slow

STEPS = ["--concurrency", "2,4", "--output-len", "6", "--ttft-ms", "20", "--itl-ms", "5"]


def test_calibrate_ceiling_states_and_stores_the_last_step_within_tolerance(monkeypatch, capsys):
    monkeypatch.setattr(calibration, "DELIVERY_LIMIT_MS", 1e6)     # widened: every step passes (see the docstring)
    monkeypatch.setattr(calibration, "TPOT_LIMIT", 1.0)
    machine.save(ceiling(streams=1))          # an earlier ceiling: calibrating beyond it is not warned of; replaced
    assert main(["calibrate", "--ceiling", *STEPS, "--tokens-per-chunk", "2"]) == 0
    out, err = capsys.readouterr()
    assert "warning" not in err
    assert "client ceiling: 4 streams" in out and "at least" in out
    stored = json.loads(machine.path().read_text())
    assert list(stored) == [machine.machine_key()]
    c = machine.load()
    assert c is not None and c.streams == 4 and not c.bounded and c.failed_at is None
    assert c.tool_version == __version__ and "ITL 5 ms, 6 output tokens, 2 per chunk" in c.load
    assert datetime.now(UTC) - datetime.fromisoformat(c.measured_at) < timedelta(hours=1)
    # chunks of two tokens: 4 streams of 3 chunks each, no faster than the server's schedule allows
    ideal = 4 * 3 / ((20 + 5 * 5) / 1e3)
    assert 0 < c.chunks_per_s <= ideal * 1.01
    assert f"{c.chunks_per_s:,.0f} chunks/s per client process" in out
    assert abs(c.ttft_error) < 1 and c.client_cpus and 0 < c.server_pace <= 1.01    # no faster than its schedule


def test_no_step_within_tolerance_stores_nothing(monkeypatch, capsys):
    monkeypatch.setattr(calibration, "TPOT_LIMIT", -1.0)            # impossible: no step passes (see the docstring)
    assert main(["calibrate", "--ceiling", *STEPS]) == 2
    err = capsys.readouterr().err
    assert "lowest step (2 streams): no ceiling is stored" in err
    assert machine.load() is None and not machine.path().exists()


def test_ceiling_is_per_client_process(capsys):
    assert main(["calibrate", "--ceiling", "--workers", "2"]) == 2
    assert "--ceiling measures one client process" in capsys.readouterr().err


def test_a_bench_within_it_is_quiet_and_its_report_states_the_ceiling(tmp_path, capsys):
    machine.save(ceiling(streams=16, bounded=False))
    db = tmp_path / "r.db"
    with ReferenceProcess(ReferenceConfig(ttft_ms=10, itl_ms=2)) as server:
        assert main(["bench", "--base-url", server.url, "--input-len", "8", "--output-len", "4", "--concurrency", "4",
                     "--num-prompts", "8", "--db", str(db), "--disable-tqdm"]) == 0
    assert "client ceiling" not in capsys.readouterr().err
    store = Store(db)
    [row] = store.runs()
    assert store.run(row.id).environment["client_ceiling"]["streams"] == 16
    text = markdown.render(build_report(load_run(store, row.id), "en", [], "T"))
    assert ("| client ceiling | 16 streams, 1,000 chunks/s per client process (CPU 1), TTFT error +1.2% there; "
            "measured 2026-01-02T03:04:05+00:00 by calibrate --ceiling (at least: every step measured kept within "
            "tolerance) |") in text
    zh = markdown.render(build_report(load_run(store, row.id), "zh", [], "T"))
    assert "客户端上限" in zh and "16 个流" in zh
