"""A capacity search on the real llama.cpp engine, kept small (the timed 1-8-stream search is
bench/capacity_llamacpp.py): two bracket cells and a short sustain cell, stored as a search and shown
in the report with its timeslices."""

from __future__ import annotations

import pytest

from tokenbench.cli.main import main
from tokenbench.store.db import Store

pytestmark = pytest.mark.engine


def test_a_small_search_on_llamacpp_is_stored_and_reported(llamacpp_server, tmp_path):
    db = tmp_path / "db.sqlite"
    assert main(["sweep", "--base-url", llamacpp_server.base_url, "--pairs", "16:8", "--find-capacity",
                 "--slo", "ttft:p99<=120000", "--capacity-max", "2", "--capacity-budget", "3", "--num-prompts", "4",
                 "--sustain-s", "12", "--timeslice-s", "4", "--allow-client-lag", "--db", str(db)]) == 0
    store = Store(db)
    [run] = store.runs()
    [search] = store.searches(run.id)
    [a] = search.record.answers
    assert (a.capacity, a.reason) == (2, "above_max")
    assert [t.role for t in search.record.tried] == ["bracket", "bracket", "sustain"]
    sustain = search.record.sustain
    assert sustain is not None and sustain.load == 2 and sustain.verdicts[0].passes
    slices = next(c for c in store.cells(run.id) if c.repeat == sustain.repeat).summary.slices
    assert slices is not None and len(slices) >= 3 and sum(slices.completed or []) > 4
    assert main(["report", run.id, "--db", str(db), "-o", str(tmp_path / "r")]) == 0
    page = (tmp_path / "r" / "report.md").read_text()
    assert "every load up to the limit met it" in page and "| sustain | 2 |" in page
    assert "Per slice of 4 s: cell 16/8 c=2 #2" in page
