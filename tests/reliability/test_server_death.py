"""Server death mid-sweep: the engine process is SIGKILLed while a cell runs.

What the sweep does (study/launch.py, study/cells.py): the cell in progress stops sending after a few consecutive `connect`
failures (every request sent is recorded), it is marked failed with the engine's exit code and log
tail in its message and the errors in `failed_by_kind`; the server is relaunched (at most
MAX_LAUNCHES launches per config) for the config's remaining cells, the next server config is launched
as a fresh process, and the run ends `failed` with exit code 5 and no engine left running.

The fast test deploys a stand-in engine (tests/reliability/fake_engine.py: the reference server behind
the llama.cpp launcher's command line) through the real deploy lifecycle; the engine test does the same
with the built-in `cpu-smollm2-llamacpp` profile.
"""

from __future__ import annotations

import json
import sqlite3
import urllib.request
from pathlib import Path

import pytest
import yaml

from tokenbench.cli.main import main

from .helpers import EngineKiller, db_problems, error_lines, fake_profile, gone, logged

pytestmark = pytest.mark.slow   # subprocesses, real servers or hypothesis: seconds per test


def write_spec(tmp: Path, profile: str, pair: list[int], requests: int) -> Path:
    spec = {"target": {"profile": profile}, "pairs": [pair], "concurrency": [2], "vary": {"slots": [1, 2]},
            "warmup_requests": 0, "requests": {"per_concurrency": 1, "min": requests}, "monitor_interval_s": 0.2}
    path = tmp / "sweep.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def stored(db: Path) -> tuple[dict, list[dict], list[dict]]:
    con = sqlite3.connect(db)
    con.row_factory = sqlite3.Row
    [run] = [dict(r) for r in con.execute("SELECT * FROM runs")]
    configs = [dict(r) for r in con.execute("SELECT * FROM server_configs ORDER BY id")]
    cells = [dict(r) for r in con.execute(
        "SELECT c.*, s.name AS config FROM cells c JOIN server_configs s ON s.id=c.config_id ORDER BY c.id")]
    for c in cells:
        c["summary"] = json.loads(c["summary_json"])
    return run, configs, cells


def check_sweep_survived(db: Path, killer: EngineKiller, code: int, err: str, requests: int) -> None:
    assert killer.killed is not None and len(killer.seen) == 2, killer.seen
    first, second = killer.seen
    assert first["pid"] != second["pid"] and gone(first["pid"]) and gone(second["pid"])   # nothing left running
    run, configs, cells = stored(db)
    assert db_problems(db) == []
    assert [c["name"] for c in configs] == ["slots=1", "slots=2"]
    killed, after = cells
    # the cell in progress: completed with every request recorded, failed, the cause in its message
    assert (killed["config"], killed["status"]) == ("slots=1", "failed")
    s = killed["summary"]
    # once connections are refused the cell stops sending (the rest would fail the same way)
    assert s["num_prompts"] <= requests and s["completed"] >= 1 and s["failed"] >= 1
    assert set(s["failed_by_kind"]) <= {"connect", "reset"} and s["failed_by_kind"].get("connect")
    assert "server unreachable at" in killed["message"] and "consecutive connection failures" in killed["message"]
    assert "server died during the cell: the engine process exited with code" in killed["message"]
    assert "server died during cell" in configs[0]["message"]
    # the next config ran on a freshly launched server
    assert (after["config"], after["status"]) == ("slots=2", "ok") and after["summary"]["failed"] == 0
    # the run says it failed, and the CLI says why in one line with exit code 5
    assert run["status"] == "failed" and code == 5
    [line] = error_lines(err)
    assert "1 cell(s) failed" in line and "server unreachable" in line


@pytest.mark.timeout(120)
def test_engine_killed_mid_cell_fake_engine(tmp_path, monkeypatch, capsys):
    profile = fake_profile(tmp_path, monkeypatch)
    spec = write_spec(tmp_path, str(profile), [8, 8], requests=24)
    with EngineKiller(tmp_path / "state", lambda st: logged(tmp_path, st["port"]) >= 3) as killer:
        code = main(["sweep", str(spec), "--db", str(tmp_path / "sweep.db")])
    check_sweep_survived(tmp_path / "sweep.db", killer, code, capsys.readouterr().err, 24)
    second = killer.seen[1]
    assert logged(tmp_path, second["port"]) == 24       # the relaunched server served the whole next cell


class SlotWatcher:
    """True once llama.cpp's /slots has shown 3 different tasks in processing: the cell runs and at
    least two of its requests have completed."""

    def __init__(self) -> None:
        self.tasks: set[int] = set()

    def __call__(self, st: dict) -> bool:
        try:
            with urllib.request.urlopen(f"{st['base_url']}/slots", timeout=1) as resp:
                slots = json.loads(resp.read())
        except (OSError, ValueError):
            return False
        if isinstance(slots, list):
            self.tasks |= {s.get("id_task") for s in slots if isinstance(s, dict) and s.get("is_processing")}
        return len(self.tasks) >= 3


@pytest.mark.engine
@pytest.mark.timeout(300)
def test_engine_killed_mid_cell_llamacpp(tmp_path, capsys):
    spec = write_spec(tmp_path, "cpu-smollm2-llamacpp", [32, 8], requests=24)
    with EngineKiller(tmp_path / "state", SlotWatcher(), timeout_s=240) as killer:
        code = main(["sweep", str(spec), "--db", str(tmp_path / "sweep.db")])
    check_sweep_survived(tmp_path / "sweep.db", killer, code, capsys.readouterr().err, 24)


@pytest.mark.timeout(180)
def test_server_relaunched_within_a_config_after_death(tmp_path, monkeypatch, capsys):
    """Two cells in one config: the engine dies in the first, the second runs on a relaunched server."""
    profile = fake_profile(tmp_path, monkeypatch)
    spec = {"target": {"profile": str(profile)}, "pairs": [[8, 8]], "concurrency": [2, 1], "warmup_requests": 0,
            "requests": {"per_concurrency": 1, "min": 24}, "monitor_interval_s": 0.2}
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(spec))
    with EngineKiller(tmp_path / "state", lambda st: logged(tmp_path, st["port"]) >= 3) as killer:
        code = main(["sweep", str(path), "--db", str(tmp_path / "sweep.db")])
    assert code == 5 and len(killer.seen) == 2 and all(gone(st["pid"]) for st in killer.seen)
    run, configs, cells = stored(tmp_path / "sweep.db")
    assert [(c["key"], c["status"]) for c in cells] == [("8:8/c=2", "failed"), ("8:8/c=1", "ok")]
    assert configs[0]["status"] == "done" and "launch 1" in configs[0]["message"]
    assert db_problems(tmp_path / "sweep.db") == []
