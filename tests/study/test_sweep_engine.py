"""Issue 4 acceptance on the real llama.cpp engine: 12 cells over 2 relaunched server configs,
SIGKILL mid-sweep then --resume, and `*` on exactly the cells whose KV demand exceeds capacity."""

import os
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

from tokenbench.cli.main import main
from tokenbench.store.db import Store
from tokenbench.testing.reference_server import ReferenceConfig, ReferenceProcess

from .helpers import engines

pytestmark = pytest.mark.engine

SPEC = """\
name: acceptance
target:
  profile: cpu-smollm2-llamacpp
pairs: [[16, 4], [32, 4]]
concurrency: [1, 2, 4]
vary:
  slots: [2, 4]
requests: {per_concurrency: 1, min: 2}
warmup_requests: 1
monitor_interval_s: 0.5
allow_client_lag: true      # the sweep's first half runs in a subprocess, beyond conftest's reach
"""


def cells(db):
    """Stored cells; none while the sweep is still creating the database."""
    con = sqlite3.connect(db)
    if not con.execute("SELECT 1 FROM sqlite_master WHERE name='cells'").fetchone():
        con.close()
        return []
    rows = con.execute("SELECT c.id, s.name, c.key, c.repeat, c.finished_at, c.status FROM cells c "
                       "JOIN server_configs s ON s.id = c.config_id").fetchall()
    con.close()
    return rows


def check_complete(db, run_id):
    store = Store(db)
    got = store.cells(run_id)
    keys = [(c.config, c.key, c.repeat) for c in got]
    assert len(got) == 12 and len(set(keys)) == 12
    assert {c.config for c in got} == {"slots=2", "slots=4"}
    for c in got:
        assert c.status == "ok", c.message
        reqs = store.requests(c.id)
        assert len(reqs) == c.summary.num_prompts
        assert all(r.prompt_tokens == c.input_len and r.output_tokens == c.output_len for r in reqs)
    assert store.db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    return store


def test_sweep_runs_twelve_cells_relaunching_per_config(tmp_path):
    before = engines()
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC)
    db = tmp_path / "db.sqlite"
    assert main(["sweep", str(spec), "--db", str(db)]) == 0
    [run] = Store(db).runs()
    store = check_complete(db, run.id)
    configs = {c.name: c for c in store.configs(run.id)}
    assert configs["slots=2"].facts.slots == 2 and configs["slots=4"].facts.slots == 4
    samples = store.samples(store.cells(run.id)[0].id)
    assert {s.source for s in samples} >= {"server", "host"}
    assert engines() <= before


def test_sigkill_mid_sweep_then_resume(tmp_path):
    already = engines()
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC)
    db = tmp_path / "db.sqlite"
    proc = subprocess.Popen([sys.executable, "-m", "tokenbench.cli.main", "sweep", str(spec), "--db", str(db)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and (not db.exists() or len(cells(db)) < 4):
        time.sleep(0.2)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    before = {(name, key, rep): (cid, fin) for cid, name, key, rep, fin, _ in cells(db)}
    assert 4 <= len(before) < 12
    deadline = time.monotonic() + 30                      # a deadline for a broken test, not a timing bound
    while not engines() <= already and time.monotonic() < deadline:
        time.sleep(0.1)
    assert engines() <= already, "the engine must die with the killed sweep (PR_SET_PDEATHSIG)"
    [run] = Store(db).runs()
    assert main(["sweep", "--resume", run.id, "--db", str(db)]) == 0
    check_complete(db, run.id)
    after = {(name, key, rep): (cid, fin) for cid, name, key, rep, fin, _ in cells(db)}
    assert all(after[k] == v for k, v in before.items()), "finished cells must be untouched"


def test_star_exactly_on_cells_over_kv_capacity(tmp_path):
    with ReferenceProcess(ReferenceConfig(ttft_ms=5, itl_ms=2, kv_capacity_tokens=100)) as ref:
        spec = tmp_path / "spec.yaml"
        spec.write_text(f"target: {{base_url: '{ref.url}'}}\npairs: [[16, 4], [40, 10]]\n"
                        "concurrency: [1, 2, 4, 8]\nrequests: {per_concurrency: 1, min: 2}\n")
        db = tmp_path / "db.sqlite"
        assert main(["sweep", str(spec), "--db", str(db)]) == 0
    [run] = Store(db).runs()
    got = {c.key: c.over_capacity for c in Store(db).cells(run.id)}
    # demand = c x (in + out): 20/40/80/160 for 16:4, 50/100/200/400 for 40:10; capacity 100 from the server
    assert got == {"16:4/c=1": False, "16:4/c=2": False, "16:4/c=4": False, "16:4/c=8": True,
                   "40:10/c=1": False, "40:10/c=2": False, "40:10/c=4": True, "40:10/c=8": True}


def test_a_vary_sweep_on_a_fixed_port_relaunches_on_it(tmp_path):
    """Users behind firewalls pin the port: each config's engine starts on it right after the previous one
    served requests there and stopped (its TIME_WAIT sockets do not block the next)."""
    from tokenbench.deploy.ports import free_port

    port = free_port("127.0.0.1")
    spec = tmp_path / "spec.yaml"
    spec.write_text(f"target: {{profile: cpu-smollm2-llamacpp, set: ['port={port}']}}\n"
                    "pairs: [[16, 4]]\nconcurrency: [2]\nvary: {slots: [1, 2]}\n"
                    "requests: {per_concurrency: 1, min: 2}\nallow_client_lag: true\n")
    db = tmp_path / "db.sqlite"
    assert main(["sweep", str(spec), "--db", str(db)]) == 0
    store = Store(db)
    [run] = store.runs()
    got = store.cells(run.id)
    assert sorted(c.config or "" for c in got) == ["slots=1", "slots=2"]
    assert all(c.status == "ok" for c in got), [c.message for c in got]
    assert [c.profile.port if c.profile else None for c in store.configs(run.id)] == [port, port]
