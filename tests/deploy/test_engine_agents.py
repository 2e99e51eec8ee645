"""The embedded engine (llama.cpp via xllamacpp, SmolLM2-135M) under agent trajectories, end to end through
`tokenbench demo --agents` (`make demo-agents`): deployed, smoke-tested, 8 generated trajectories replayed by
2 concurrent agents, every turn's prompt and output checked against the server's usage, the jobs measured
whole, stored as one run with its report, the server stopped."""

from __future__ import annotations

import sqlite3

import pytest

from tokenbench.cli.main import main
from tokenbench.store.db import Store

from .helpers import states

pytestmark = [pytest.mark.engine, pytest.mark.timeout(300)]


def test_demo_agents_replays_a_small_trajectory_set_end_to_end(tmp_path, capsys):
    db = tmp_path / "demo.db"
    assert main(["demo", "--agents", "--pairs", "32:8", "--concurrency", "2", "--db", str(db)]) == 0
    out, err = capsys.readouterr()
    assert "trajectories(8x3t-uni,sys32-shared,think0.2s-exp):32:8/users=2" in out and "stopped" in err
    store = Store(db)
    [run] = store.runs()
    [cell] = store.cells(run.id)
    assert cell.status in ("ok", "invalid"), cell.message       # invalid: the shared machine lagged the client
    s = cell.summary
    assert s.facts is not None and s.facts.corpus_format == "generated" and s.facts.corpus_replayed == 8
    assert s.jobs is not None and (s.jobs.started, s.jobs.complete) == (8, 8)
    assert sum(s.jobs.each_turns or []) == s.facts.corpus_turns
    measured = store.requests(cell.id or 0, "measure")
    assert len(measured) == s.facts.corpus_turns and len({r.session_id for r in measured}) == 8
    for r in measured:           # every turn exact: the history's ids and the new ones, the trace's output
        assert r.ok and not r.length_error and r.prompt_tokens == r.expected_prompt_tokens and r.output_tokens == 8
    assert s.sessions is not None and s.sessions.turn_theory_hit_rate is not None
    assert "jobs 8 of 8 complete" in out and "corpus generated sha256" in out
    con = sqlite3.connect(db)
    [(status,)] = con.execute("SELECT status FROM runs").fetchall()
    assert status == "done" and (tmp_path / "reports" / run.id / "report.md").is_file()
    assert states(tmp_path / "state") == []
