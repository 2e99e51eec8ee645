"""`--find-capacity users` in concurrent agents under a job-level SLO (`job:p95<=X`: each agent's whole
trajectory from its first send to its last token) against the reference server's load model, whose answer has
a closed form: identical generated trajectories of K turns with no tool delay keep U agents in step, each turn
decoding alongside U - 1 others, so a job takes K x (TTFT + (n - 1) x itl(U)) with itl(U) = a + b x U. The
search's interval holds that boundary. The limit sits halfway between the boundary's job time and the next
agent's (27 ms from each; a turn's client overhead is about a millisecond, and the server's deadlines are
absolute, so a busy host moves a job by well under that)."""

from __future__ import annotations

import pytest

from tokenbench.cli.main import main
from tokenbench.judge.views import load_run
from tokenbench.report.build import build_report
from tokenbench.report.document import Table
from tokenbench.report.i18n import t
from tokenbench.store.db import Store
from tokenbench.testing.reference_server import ReferenceConfig, ReferenceProcess

pytestmark = pytest.mark.slow   # a reference server and a search of several cells: about a minute

CFG = ReferenceConfig(ttft_ms=20, itl_ms=10, itl_per_running_ms=2.0)
TURNS, OUT = 3, 10


def job_ms(agents: int) -> float:
    """The closed form: K turns, each its TTFT and n - 1 decode steps of a + b x U."""
    itl = CFG.itl_ms + CFG.itl_per_running_ms * agents
    return TURNS * (CFG.ttft_ms + (OUT - 1) * itl)


def test_a_search_in_concurrent_agents_under_a_job_slo_holds_the_closed_form_boundary(tmp_path, capsys):
    boundary = 5
    limit = (job_ms(boundary) + job_ms(boundary + 1)) / 2           # 600 and 654 ms: 627
    db = tmp_path / "db.sqlite"
    with ReferenceProcess(CFG) as ref:
        assert main(["sweep", "--base-url", ref.url, "--dataset-name", "trajectories", "--turns", str(TURNS),
                     "--pairs", f"48:{OUT}", "--num-trajectories", "64", "--find-capacity", "users",
                     "--slo", f"job:p95<={limit:g}", "--capacity-start", "4", "--capacity-max", "16",
                     "--capacity-budget", "10", "--sustain-s", "0", "--price-per-hour", "2", "--db", str(db)]) == 0
    store = Store(db)
    run = store.runs()[-1]
    [search] = store.searches(run.id)
    record, cells = search.record, store.cells(run.id)
    [a] = record.answers
    assert record.dimension == "users" and len(record.tried) <= 10
    assert a.lo is not None and a.hi is not None and a.lo <= boundary < a.hi and a.capacity == boundary, a
    assert a.binding is not None and a.binding.limit.text == f"job:p95<={limit:g}"
    at = {c.concurrency: c for c in cells}                  # a sessions cell stores its users as its concurrency
    for agents in (boundary, boundary + 1):
        jobs = at[agents].summary.jobs
        assert jobs is not None and jobs.completion_ms is not None and jobs.complete == 64
        measured = jobs.completion_ms["p95"].value              # above the closed form by the client's turn steps
        assert job_ms(agents) <= measured < limit if agents == boundary else measured > limit
    out = " ".join(capsys.readouterr().out.split())          # the console wraps its lines at spaces
    assert f"(tier slo: job:p95<={limit:g}): {boundary} users" in out
    assert f"; {boundary} users per device (1 device), {boundary / 2:g} per $/h" in out      # a $2/h device
    for lang in ("en", "zh"):                 # the report's capacity table says the same, and what the job limit read
        doc = build_report(load_run(store, run.id), lang, [], "T")
        [table] = [b for b in doc.blocks if isinstance(b, Table) and b.role == "capacity"]
        unit = t(lang, "unit.agents.users")
        assert table.headers[-2:] == [t(lang, "col.cap_per_device", unit=unit, devices=1),
                                      t(lang, "col.cap_per_usd_hour", unit=unit)]
        [row] = table.rows
        assert row[-2].startswith(f"{boundary:g} [{a.lo:.3g}, ") and row[-1].startswith(f"{boundary / 2:g} [")
        jobs = f"{a.fail_load:g}: {a.binding.n}, {a.capacity:g}: {a.headroom.n}"      # the jobs each end judged
        notes = [n for n in table.footnotes if f"job:p95<={limit:g}" in n]
        assert notes == [t(lang, "cap.job_limit", limit=f"job:p95<={limit:g}", tier="slo", jobs=jobs, tool="0.0%")]


def test_a_search_in_agents_started_per_second_is_stored_and_reported(tmp_path, capsys):
    """Open-loop agents (`--find-capacity session_rate`): the load is agents started per second, continuous; the
    search is stored with that dimension and the report names it. Jobs of 2 turns of 8 tokens at 20 ms each take
    about 2 x (20 + 7 x 10) = 180 ms alone, well within the limit at every load up to the search's maximum."""
    db = tmp_path / "db.sqlite"
    with ReferenceProcess(ReferenceConfig(ttft_ms=20, itl_ms=10, itl_per_running_ms=2.0)) as ref:
        assert main(["sweep", "--base-url", ref.url, "--dataset-name", "trajectories", "--turns", "2",
                     "--pairs", "32:8", "--num-trajectories", "24", "--find-capacity", "session_rate",
                     "--slo", "job:p50<=400", "--capacity-start", "4", "--capacity-max", "32",
                     "--capacity-budget", "4", "--sustain-s", "0", "--db", str(db)]) == 0
    store = Store(db)
    run = store.runs()[-1]
    [search] = store.searches(run.id)
    [a] = search.record.answers
    assert search.record.dimension == "session_rate" and all("/sessions=" in t.key for t in search.record.tried)
    assert [t.load for t in search.record.tried] == [4.0, 8.0, 16.0, 32.0] and a.capacity == 32   # all met it
    assert a.headroom is not None and a.headroom.limit.text == "job:p50<=400"
    assert "sessions/s" in capsys.readouterr().out
    assert main(["report", run.id, "--db", str(db), "-o", str(tmp_path / "r")]) == 0
    page = (tmp_path / "r" / "report.md").read_text()
    assert "agents started per second (agents/s" in page and "agents/s per device (1)" in page
