"""The client ceiling stored for this machine (host/ceiling.py; issue 46, item 3) as the preflight reads it: a
cell that asks one client process for more streams or chunks per second than the ceiling gets one warning
before anything is sent, naming the ceiling and the --workers that keep each process within it; none within
it, none where no ceiling was measured here. The state folder is a tmp dir (tests/conftest.py)."""

from __future__ import annotations

import json

import pytest

from tests.study.helpers import ceiling
from tokenbench.cli.main import main
from tokenbench.host import ceiling as machine
from tokenbench.spec.study import StudySpec
from tokenbench.study.plan import plan
from tokenbench.study.preflight import client_load


def test_a_record_of_another_machine_is_not_this_ones():
    machine.save(ceiling())
    data = json.loads(machine.path().read_text())
    other = {"elsewhere | Some CPU | 64": data.pop(machine.machine_key())}
    machine.path().write_text(json.dumps(other))
    assert machine.load() is None
    machine.save(ceiling(streams=8))
    assert machine.load().streams == 8 and "elsewhere | Some CPU | 64" in json.loads(machine.path().read_text())


def spec(**load) -> StudySpec:
    return StudySpec.model_validate({"name": "x", "target": {"base_url": "http://127.0.0.1:9"}, "pairs": [(16, 50)],
                                     "requests": {"num_prompts": 256}, **load})


@pytest.mark.parametrize(("load", "workers", "advice"), [
    ({"concurrency": [64]}, 1, "--workers 4"),            # 64 streams / 16 per process
    ({"concurrency": [64]}, 2, "--workers 4"),            # 32 per process: still twice the ceiling
    ({"concurrency": [17]}, 1, "--workers 2"),
    ({"rates": [50.0]}, 1, "--workers 3"),                # 50/s x 50 tokens = 2,500 chunks/s / 1,000
])
def test_preflight_warns_beyond_the_ceiling(load, workers, advice):
    said = client_load(plan(spec(**load, client={"workers": workers})), ceiling())
    assert said is not None and advice in said
    assert "16 streams and 1,000 chunks/s" in said and "2026-01-02" in said


@pytest.mark.parametrize(("load", "workers"), [
    ({"concurrency": [16]}, 1), ({"concurrency": [64]}, 4), ({"rates": [20.0]}, 1), ({"concurrency": [8, 16]}, 1)])
def test_preflight_is_quiet_within_the_ceiling(load, workers):
    assert client_load(plan(spec(**load, client={"workers": workers})), ceiling()) is None


def test_preflight_is_quiet_without_a_ceiling():
    assert client_load(plan(spec(concurrency=[4096])), None) is None


def test_a_bench_beyond_the_ceiling_warns_before_anything_is_sent(tmp_path, capsys):
    machine.save(ceiling(streams=2))
    # nothing listens on the target: the bench stops at its first request, after the preflight
    assert main(["bench", "--base-url", "http://127.0.0.1:9", "--input-len", "8", "--output-len", "4",
                 "--concurrency", "6", "--num-prompts", "12", "--db", str(tmp_path / "r.db"), "--disable-tqdm"]) != 0
    err = capsys.readouterr().err
    assert "warning: cell(s)" in err and "client ceiling, 2 streams" in err and "--workers 3" in err
