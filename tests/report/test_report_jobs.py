"""Agents in reports and comparisons, from runs stored against the reference server with its prefix cache on
(real loopback HTTP): trajectories at 1 and 2 concurrent agents and at 2 and 4 agents started per second. The job
table's numbers are the stored summary's (each figure with its 95 % interval, or its mark), the theoretical hit
by turn the stored one with its block size, the window and the corpus said; the job completion plot is drawn
against concurrent agents and against agents started per second, a session-rate cell sitting on its own axis;
both languages. `compare` judges job figures like any other: matched by their load (the session-rate cell by its
own key), each with its interval and a verdict, refused where the two runs' prefix-cache states differ (a salted
run is cold; a seeded run against a server tokenbench neither launched nor reset is unknown)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tokenbench.cli.main import main
from tokenbench.judge.cells import label_of, load_label_of, load_of
from tokenbench.judge.intervals import Book, Judging, verdict
from tokenbench.judge.plausibility import check_run
from tokenbench.judge.views import load_run
from tokenbench.metrics.cell_summary import Metric
from tokenbench.report import render
from tokenbench.report.build import build_report
from tokenbench.report.compare import compare
from tokenbench.report.document import Cell, Document, Figure, Heading, Para, Table, num, pct
from tokenbench.report.i18n import t
from tokenbench.store.db import Store
from tokenbench.testing.reference_server import ReferenceConfig, ReferenceProcess

pytestmark = pytest.mark.slow   # a reference server and three stored runs: about 30 s

BLOCK = 16
SHOWN = (Metric("job", "p50"), Metric("job", "p95"), Metric("job_ttft", "p95"), Metric("job_tpot", "p95"))


@dataclass(frozen=True)
class Runs:
    db: Path
    cold: str           # salted prompts (no --seed): cold
    again: str          # the same: cold, its own salt
    seeded: str         # --seed 7 on a server tokenbench did not launch: unknown


def _sweep(url: str, db: Path, name: str, *extra: str) -> str:
    assert main(["sweep", "--base-url", url, "--dataset-name", "trajectories", "--turns", "3", "--pairs", "48:8",
                 "--num-trajectories", "8", "--num-sessions", "8", "--users", "1,2", "--session-rates", "2,4",
                 "--cache-block-size", str(BLOCK), "--name", name, "--db", str(db), *extra]) == 0
    return next(r.id for r in Store(db).runs() if r.spec.get("name") == name)


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> Iterator[Runs]:
    db = tmp_path_factory.mktemp("agents") / "db.sqlite"
    with ReferenceProcess(ReferenceConfig(ttft_ms=20, itl_ms=5, prefix_cache_blocks=8192, block_size=BLOCK)) as ref:
        yield Runs(db, _sweep(ref.url, db, "cold"), _sweep(ref.url, db, "again"), _sweep(ref.url, db, "seeded", "--seed", "7"))


def _tables(doc: Document, role: str) -> list[Table]:
    return [b for b in doc.blocks if isinstance(b, Table) and b.role == role]


def _report(runs: Runs, run_id: str, lang: str) -> Document:
    run = load_run(Store(runs.db), run_id)
    return build_report(run, lang, check_run(run), "TEST")


def _shown(cell: Cell, summary_stat) -> None:
    """A figure the table shows is the stored one: with its interval where clean, alone with its mark else."""
    assert cell.text == num(summary_stat.value)
    if cell.mark:
        assert cell.mark == "~" and cell.interval == ""
    else:
        assert cell.interval == f"[{num(summary_stat.lo)}, {num(summary_stat.hi)}]" + "◊" * summary_stat.unreliable


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_job_table_shows_the_stored_jobs_of_every_cell(runs, lang):
    doc = _report(runs, runs.cold, lang)
    cells = load_run(Store(runs.db), runs.cold).cells_of("default")
    [table] = _tables(doc, "jobs")
    assert table.headers[2:6] == [t(lang, k) for k in ("col.jct_p50", "col.jct_p95", "col.job_ttft_p95",
                                                       "col.job_tpot_p95")]
    assert [load_of(c).dimension for c in cells] == ["users", "users", "session_rate", "session_rate"]
    assert len(table.rows) == len(cells) == 4
    for row, c in zip(table.rows, cells, strict=True):
        j = c.summary.jobs
        assert j is not None and j.complete == 8 and j.started == 8 and j.turns_max == 3
        assert row[0].text == load_label_of(c) and row[1].text == "8/8"
        for cell, m in zip(row[2:6], SHOWN, strict=True):
            _shown(cell, j.stat(m.name, m.stat))
        assert row[6].text == f"{pct(j.server_share)} / {pct(j.tool_share)} / {pct(j.client_share)}"
        assert row[7].text == f"{num(j.turns_mean)} (3)"
        s = c.summary.sessions
        assert row[8].text == t(lang, "job.window", rule=s.window, end=f"{s.window_end_s:.1f}",
                                after=num(s.outside_requests, 0))
    assert [load_label_of(c) for c in cells[2:]] == ["2 sessions/s", "4 sessions/s"]
    facts = cells[0].summary.facts
    said = [b.text for b in doc.blocks if isinstance(b, Para)]
    assert t(lang, "job.corpus_all", corpus=t(lang, "job.corpus", format="generated", sha=facts.corpus_sha256[:16],
                                              replayed="8", read="8", turns="24")
             + t(lang, "job.passes", passes="1")) in said


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_turn_tables_set_the_theoretical_hit_beside_the_achieved(runs, lang):
    doc = _report(runs, runs.cold, lang)
    cells = load_run(Store(runs.db), runs.cold).all_cells_of("default")
    tables = _tables(doc, "turns")
    assert len(tables) == len(cells)
    for table, c in zip(tables, cells, strict=True):
        f = c.summary.sessions
        at = table.headers.index(t(lang, "col.turn_theory", block=str(BLOCK)))
        assert table.headers[at - 1] == t(lang, "col.turn_hit_rate")
        assert [r[at] for r in table.rows] == [pct(v) for v in f.turn_theory_hit_rate]
        assert [r[at - 1] for r in table.rows] == [pct(v) for v in f.turn_hit_rate]
        assert f.turn_theory_hit_rate == pytest.approx(f.turn_hit_rate)     # room for every block: the theory holds
        assert f.turn_hit_rate[0] == 0 and f.turn_hit_rate[2] > f.turn_hit_rate[1] > 0
        assert any(t(lang, "sess.theory", block=str(BLOCK), theory=pct(f.theory_hit_rate),
                     achieved=pct(c.summary.cache_hit_rate)) == n for n in table.footnotes)


def _points(fig: Figure) -> int:
    return fig.svg.count("<circle")


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_job_completion_is_plotted_against_concurrent_agents_and_agents_started_per_second(runs, lang, tmp_path):
    doc = _report(runs, runs.cold, lang)
    figs = {f.name: f for f in doc.figures()}
    agents, rate = figs["jct-users"], figs["jct-session_rate"]
    assert agents.title == t(lang, "plot.dim.jct", dim=t(lang, "dim.agents.users"))
    assert t(lang, "axis.agents.users") in agents.svg and t(lang, "axis.jct_ms") in agents.svg
    assert "48/8 p50" in agents.svg and "48/8 p95" in agents.svg
    assert _points(agents) == _points(rate) == 4     # two statistics at two loads each
    assert t(lang, "axis.agents.session_rate") in rate.svg
    # the session-rate cell has a load axis of its own in every load plot, never the request rate's
    assert {"throughput-users", "throughput-session_rate"} <= set(figs) and "throughput-rate" not in figs
    written = render.write(doc, tmp_path, ["md", "html"])
    page = written[0].read_text(encoding="utf-8")
    assert t(lang, "h.jobs") in page and "jct-users" in page


def test_compare_judges_job_figures_and_refuses_them_across_cache_states(runs):
    store = Store(runs.db)
    doc, issues = compare(store, [runs.cold, runs.again], "en", "T")
    verdicts = [r for tb in _tables(doc, "verdicts") for r in tb.rows]
    loads = {r[0] for r in verdicts}
    assert loads == {"users=1", "users=2", "2 sessions/s", "4 sessions/s"}             # matched by load, session rate on its own key
    names = {f"{t('en', f'vm.{m.name}')} {m.stat}" for m in SHOWN}
    job_rows = [r for r in verdicts if r[1] in names]
    assert len(job_rows) == 4 * 4
    cold = {load_label_of(c): c for c in load_run(store, runs.cold).cells_of("default")}
    for r in job_rows:
        m = next(m for m in SHOWN if f"{t('en', f'vm.{m.name}')} {m.stat}" == r[1])
        _shown(r[2], cold[r[0]].summary.jobs.stat(m.name, m.stat))
        assert "prefix cache" not in _text(r[4])                          # cold vs cold: judged
    a_run, b_run = load_run(store, runs.cold), load_run(store, runs.again)
    for a, b in zip(a_run.cells_of("default"), b_run.cells_of("default"), strict=True):
        for m in SHOWN:             # each job figure's verdict, from the jobs' intervals, whatever the host did
            v = verdict(Book(a_run), a, Book(b_run), b, m, Judging(allow_client_lag=True))
            assert v is not None and v.lo <= v.change <= v.hi, (label_of(a), m)
    jobs = _after(doc, t("en", "h.cmp_jobs"))
    assert [r[0] for r in jobs.rows] == ["users=1", "users=2", "2 sessions/s", "4 sessions/s"]
    for r in jobs.rows:                                                     # each side's p95 with its interval
        _shown(r[1], cold[r[0]].summary.jobs.stat("job", "p95"))
    assert any(f.name.startswith("cmp-jct") for f in doc.figures())
    other = compare(store, [runs.cold, runs.seeded], "en", "T")[0]
    states = {c.summary.cache.state for c in load_run(store, runs.seeded).cells_of("default")}
    assert states == {"unknown"}
    judged = [r for tb in _tables(other, "verdicts") for r in tb.rows if r[1] in names]
    refused = [r for r in judged if isinstance(r[4], Cell) and r[4].why == "refused"]
    # the seeded run's state stays unknown: its turns hold their history, so the server's share (the same on both
    # sides) cannot tell a cache the run found warm from the run's own reuse
    said = re.compile(r"refused: prefix cache cold \((\d+)% from the cache\) vs unknown \((\d+)% from the cache\)")
    assert refused and all(said.fullmatch(_text(r[4])) for r in refused), {_text(r[4]) for r in refused}
    assert all(r in refused or (isinstance(r[4], Cell) and r[4].why == "moved") for r in judged)


def _text(x) -> str:
    return x.text if isinstance(x, Cell) else str(x)


def _after(doc: Document, heading: str) -> Table:
    """The first table after the heading that holds `heading`."""
    at = next(i for i, b in enumerate(doc.blocks) if isinstance(b, Heading) and heading in b.text)
    return next(b for b in doc.blocks[at:] if isinstance(b, Table))


def test_session_shapes_of_trajectories_name_the_corpus(runs):
    """`compare` states the corpus as the session shape: two runs of one generated corpus are the same workload."""
    doc, issues = compare(Store(runs.db), [runs.cold, runs.seeded], "en", "T")
    assert not [i for i in issues if i.check == "session_shape"]
    cold = load_run(Store(runs.db), runs.cold).cells_of("default")[0]
    same = " ".join(b.text for b in doc.blocks if isinstance(b, Para))
    assert f"corpus generated sha256 {cold.summary.facts.corpus_sha256[:16]}" in same
    assert label_of(cold).endswith("users=1")


def _page_check():
    import importlib.util
    path = Path(__file__).parents[2] / "scripts" / "page_check.py"
    spec = importlib.util.spec_from_file_location("page_check", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.browser
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_jobs_section_and_its_plots_render_in_headless_chromium(runs, lang, tmp_path):
    """The HTML report opened at 1,280 px: the jobs table fits the page, every character has a glyph, and the job
    completion plots are drawn with their points (two statistics at two loads on each axis); a screenshot of the
    section is kept (TOKENBENCH_SHOT_DIR when set)."""
    import os
    check = _page_check()
    if check.CHROMIUM is None:
        pytest.skip("no chromium/chromium-browser binary: run scripts/test-deps.sh")
    [page] = render.write(_report(runs, runs.cold, lang), tmp_path, ["html"])
    assert 'class="jobs"' in page.read_text(encoding="utf-8")
    found = check.probe(page, 1280)
    assert found["missing"] == [] and found["cut"] == [], found
    figs = check.figures(page, 1280)
    for name, axis in (("fig-jct-users", "axis.agents.users"), ("fig-jct-session_rate", "axis.agents.session_rate")):
        box = figs[name]
        assert box["w"] > 400 and box["h"] > 250 and box["x"] + box["w"] <= 1280, (name, box)
        assert box["points"] == 4 and t(lang, axis) in box["text"] and "p95" in box["text"], (name, box)
    shot = Path(os.environ.get("TOKENBENCH_SHOT_DIR", tmp_path)) / f"jobs-1280.{lang}.png"
    check.shoot(page, shot, 1280, 2400, section=t(lang, "h.jobs"))
    assert shot.stat().st_size > 40_000


def test_the_gate_judges_job_figures_as_any_other(runs, tmp_path, capsys):
    """`gate --figures job:p95,...` between two salted runs of one server: each job figure of every cell is
    judged from the runs' jobs (no change, inconclusive or a verdict, never 'no data'), and against the seeded
    run (its cache state unknown) refused for the cache, as compare does."""
    out = tmp_path / "g.json"
    figures = "job:p95,job:p50,job_ttft:p95,job_tpot:p95"
    code = main(["gate", "--db", str(runs.db), "--baseline", runs.cold, "--candidate", runs.again,
                 "--figures", figures, "--allow-client-lag", "--json", str(out)])
    doc = json.loads(out.read_text())
    assert {f["figure"] for f in doc["figures"]} == {"p95_job_ms", "median_job_ms", "p95_job_ttft_ms",
                                                     "p95_job_tpot_ms"}
    assert len(doc["figures"]) == 4 * 4 and code in (0, 10, 11, 12)
    assert not [f for f in doc["figures"] if f["why"] in ("no_data", "not_ok")]
    main(["gate", "--db", str(runs.db), "--baseline", runs.cold, "--candidate", runs.seeded, "--figures", figures,
          "--allow-client-lag", "--json", str(out)])
    doc = json.loads(out.read_text())
    assert {(f["decision"], f["why"]) for f in doc["figures"]} == {("refused", "cache_differs")}
    capsys.readouterr()
