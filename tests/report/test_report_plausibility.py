"""The decode roofline: Study B's published figures are impossible, Study A's headline figures are not."""

from __future__ import annotations

import pytest
import yaml

from tokenbench.formats.importers import import_file
from tokenbench.judge import hardware
from tokenbench.judge.plausibility import ModelSize, Overrides, Roofline, check_run, flagged
from tokenbench.judge.views import load_run
from tokenbench.report.explain import latency_note

from .report_fixtures import FIXTURES


def test_roofline_arithmetic():
    dev = hardware.lookup("ascend-910b")
    r = Roofline(dev, 4, ModelSize(7, 2))
    assert r.per_stream == pytest.approx(4 * 1600 / 14)                  # 457 tok/s
    assert r.compute == pytest.approx(4 * 376e12 / 14e9)
    assert r.aggregate(1) == r.per_stream and r.aggregate(10_000) == r.compute and r.aggregate(None) == r.compute


@pytest.mark.parametrize("name, key", [
    ("Ascend 910B4", "ascend-910b4"), ("910B4-1", "ascend-910b4"), ("Ascend910B2C", "ascend-910b"),
    ("NVIDIA H100 80GB HBM3", "h100"), ("NVIDIA A100-SXM4-80GB", "a100"), ("h200", "h200"), ("cpu", "cpu"),
])
def test_hardware_lookup(name, key):
    assert hardware.lookup(name, cpu_count=2).key == key


def test_every_device_cites_its_source():
    rows = yaml.safe_load(hardware.TABLE.read_text())["devices"]
    assert {"ascend-910b", "ascend-910b4", "a100", "h100", "h200", "cpu"} <= set(rows)
    for key, row in rows.items():
        dev = hardware.lookup(key, cpu_count=4)
        assert dev.bandwidth_gbs > 0 and dev.bf16_tflops > 0 and len(row["source"]) > 40, key
    assert hardware.lookup("cpu", cpu_count=4).bf16_tflops == pytest.approx(4 * 0.45)


def test_user_hardware_file_overrides(tmp_path):
    f = tmp_path / "hw.yaml"
    f.write_text("devices:\n  cpu:\n    name: my box\n    bandwidth_gbs: 50\n    bf16_tflops: 1\n"
                 "    source: measured\n")
    assert hardware.lookup("cpu", f).bandwidth_gbs == 50


def test_study_b_is_flagged_impossible(store):
    run = load_run(store, import_file(store, FIXTURES / "study-b-published.csv"), requests=False)
    checks = check_run(run)
    assert flagged(checks) == 8                                       # every published cell
    c1 = next(f for chk in checks for f in chk.findings if chk.config.name == "sglang" and f.cell.concurrency == 1)
    assert c1.measured.value == pytest.approx(12.5 * 1024)            # 12,800 tok/s from one stream
    assert c1.measured.how == "derived" and c1.measured.rps == 12.5   # from the request rate
    assert c1.bound == pytest.approx(4 * 1600 / 14) and c1.times > 25
    roof = next(chk.roofline for chk in checks if chk.config.name == "sglang")
    assert c1.telling_latency and "80.0 ms per request" in latency_note(c1, roof, "en") and " 36 " in \
        latency_note(c1, roof, "en")


def test_study_a_is_not_flagged(store):
    run = load_run(store, import_file(store, FIXTURES / "study-a-headline.csv"), requests=False)
    checks = check_run(run)
    assert [c.roofline is not None for c in checks] == [True, True]
    assert flagged(checks) == 0
    assert sum(c.cells for c in checks) == 6


def test_missing_size_or_hardware_is_said(store, stored_run):
    run = load_run(store, stored_run, requests=False)
    assert flagged(check_run(run)) == 0
    store.db.execute("UPDATE server_configs SET profile_json='{}'")
    run = load_run(store, stored_run, requests=False)
    assert [c.skipped.reason for c in check_run(run)] == ["no_size", "no_size"]
    over = check_run(run, Overrides(params_b=0.135, bytes_per_param=0.56))
    assert [c.skipped.reason for c in over] == ["no_hw", "no_hw"]
    assert all(c.roofline for c in check_run(run, Overrides(hardware="cpu", hardware_file=None, params_b=0.135,
                                                            bytes_per_param=0.56)))


def test_fast_fake_results_are_caught(store, stored_run):
    """The fixture's CPU numbers (12 ms TPOT) claimed for a 7B BF16 model: one stream may decode at most
    204.8 GB/s / 14 GB = 14.6 tok/s, and 2 cores at most 0.9 TFLOP/s / 14 GFLOP = 64 tok/s in all."""
    run = load_run(store, stored_run, requests=False)
    checks = check_run(run, Overrides(params_b=7, bytes_per_param=2))
    assert flagged(checks) == 12
    bounds = {f.check: f.bound for c in checks for f in c.findings}
    assert bounds["compute"] == pytest.approx(0.9e12 / 14e9)
    c1 = check_run(run, Overrides(params_b=7, bytes_per_param=2, hardware="h100"))
    assert flagged(c1) == 0


def test_examples_are_the_test_fixtures():
    examples = FIXTURES.parents[2] / "examples"
    for name in ("study-a-headline.csv", "study-b-published.csv"):
        assert (examples / name).read_bytes() == (FIXTURES / name).read_bytes(), name
