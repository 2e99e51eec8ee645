"""The real engine (llama.cpp via xllamacpp, SmolLM2-135M, 1 thread) on loopback: deployed from the
built-in profile, facts read, smoke-tested, measured with lengths checked against its usage, stopped."""

from __future__ import annotations

import json
import os
import sqlite3

import psutil
import pytest

from tokenbench.cli.main import main
from tokenbench.deploy import facts_for, lifecycle, profiles, state
from tokenbench.deploy.ports import free_port
from tokenbench.deploy.smoke import smoke
from tokenbench.spec.study import StudySpec
from tokenbench.study.run import measure

from .helpers import gone, states

pytestmark = [pytest.mark.engine, pytest.mark.timeout(180)]


def test_facts_of_the_default_profile(llamacpp_server):
    f = llamacpp_server.facts
    assert (f.engine, f.model, f.slots, f.ctx_per_seq, f.kv_capacity_tokens) == \
        ("llamacpp", "smollm2-135m-instruct", 4, 1024, 4096)
    assert "xllamacpp 2026.10.11549" in f.version
    assert f.raw["meta"]["n_vocab"] == 49152 and f.raw["meta"]["n_ctx_train"] == 8192
    assert facts_for(llamacpp_server.base_url).to_dict() == f.to_dict()     # detection finds llama.cpp


def test_smoke(llamacpp_server):
    chat, completions = smoke(llamacpp_server.base_url)
    for r in (chat, completions):
        assert r.ok and r.text and r.prompt_tokens > 0 and 0 < r.completion_tokens <= 24, r
        assert r.server_timings.get("predicted_n") == r.completion_tokens
    assert chat.prompt_tokens > completions.prompt_tokens     # the chat template adds tokens


def test_measured_lengths_match_the_engine_usage(llamacpp_server):
    spec = StudySpec(target={"base_url": llamacpp_server.base_url}, pairs=[(48, 12)], concurrency=[2],
                     requests={"num_prompts": 4})
    [cell] = measure(spec).results
    assert cell.status == "ok", cell.message
    assert len(cell.records) == 4
    for rec in cell.records:
        assert rec.usage_source == "server" and not rec.length_error, rec
        assert (rec.prompt_tokens, rec.completion_tokens) == (48, 12), rec


def test_context_is_split_over_slots(tmp_path):
    p = profiles.load_profile("cpu-smollm2-llamacpp", ["parallelism.slots=2", "parallelism.ctx=1024"])
    with lifecycle.deployed(p, state_dir=tmp_path / "st") as dep:
        assert (dep.facts.slots, dep.facts.ctx_per_seq, dep.facts.kv_capacity_tokens) == (2, 512, 1024)
        [st] = state.load_all(tmp_path / "st")
        assert st.base_url == dep.base_url and st.pid == dep.state.pid
        pid = dep.state.pid
    assert gone(pid) and states(tmp_path / "st") == []


def test_cli_up_status_smoke_down(tmp_path, capsys):
    assert main(["deploy", "up", "cpu-smollm2-llamacpp", "--set", "parallelism.slots=2"]) == 0
    url = capsys.readouterr().out.strip().splitlines()[-1]
    [st] = states(tmp_path / "state")
    try:
        assert url == st["base_url"] and url.startswith("http://127.0.0.1:")
        assert main(["deploy", "up", "cpu-smollm2-llamacpp"]) == 2           # already deployed
        assert main(["deploy", "status"]) == 0
        assert "ready" in capsys.readouterr().out
        assert main(["smoke", url, "--api", "completions"]) == 0
        assert "completions" in capsys.readouterr().out
        assert main(["deploy", "logs", "cpu-smollm2-llamacpp", "-n", "3"]) == 0
    finally:
        assert main(["deploy", "down", "cpu-smollm2-llamacpp"]) == 0
    assert gone(st["pid"]) and states(tmp_path / "state") == []


def test_cli_smoke_of_a_profile(tmp_path, capsys):
    assert main(["smoke", "cpu-smollm2-llamacpp", "--set", "parallelism.slots=1"]) == 0
    out = capsys.readouterr().out
    assert "chat" in out and "completions" in out
    assert states(tmp_path / "state") == []


def test_demo_small_grid(tmp_path, capsys):
    db = tmp_path / "demo.db"
    assert main(["demo", "--pairs", "32:8,48:4", "--concurrency", "1,2", "--num-prompts", "2", "--db", str(db)]) == 0
    out, err = capsys.readouterr()
    for key in ("32:8/c=1", "32:8/c=2", "48:4/c=1", "48:4/c=2"):
        assert key in out
    assert "stopped" in err and str(db) in err
    con = sqlite3.connect(db)
    [(run_id, status)] = con.execute("SELECT id, status FROM runs").fetchall()   # the grid is one run
    assert status == "done"
    assert (tmp_path / "reports" / run_id / "report.md").is_file()
    assert (tmp_path / "reports" / run_id / "report.html").is_file()
    facts = [json.loads(r[0]) for r in con.execute("SELECT facts_json FROM server_configs")]
    assert all(f["engine"] == "llamacpp" and f["kv_capacity_tokens"] == 4096 for f in facts)
    assert con.execute("SELECT COUNT(*) FROM cells WHERE status='ok'").fetchone()[0] == 4
    assert states(tmp_path / "state") == []
    # the engine and the client on disjoint CPUs (one core: not isolated, said so), in the report too
    [(env,)] = con.execute("SELECT environment_json FROM runs").fetchall()
    iso = json.loads(env)["isolation"]
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) > 1:
        assert iso["client_cpus"] == str(cpus[-1]) and str(cpus[-1]) not in iso["engine_cpus"].split(",")
        assert iso["engine_cpus"] != "not pinned"
    else:
        assert "not isolated" in iso["note"]
    report = (tmp_path / "reports" / run_id / "report.md").read_text()
    assert f"client: CPUs {iso['client_cpus']}, nice " in report and "; engine: CPUs " in report   # tokenbench started it


def test_a_fixed_port_is_listened_on_again_at_once_after_down(tmp_path, capsys):
    """The stopped engine leaves TIME_WAIT sockets on its port after serving requests; the next `deploy up`
    on the same port starts anyway (engines bind with SO_REUSEADDR, and so does the pre-check)."""
    port = free_port("127.0.0.1")
    up = ["deploy", "up", "cpu-smollm2-llamacpp", "--set", f"port={port}", "--set", "parallelism.slots=1"]
    for _ in range(2):
        assert main(up) == 0, capsys.readouterr().err
        url = capsys.readouterr().out.strip().splitlines()[-1]
        try:
            assert url == f"http://127.0.0.1:{port}"
            assert main(["smoke", url, "--api", "completions"]) == 0
        finally:
            assert main(["deploy", "down", "cpu-smollm2-llamacpp"]) == 0
        assert any(c.status == psutil.CONN_TIME_WAIT and c.laddr.port == port
                   for c in psutil.net_connections(kind="tcp")), "the test needs TIME_WAIT sockets on the port"
    assert states(tmp_path / "state") == []
