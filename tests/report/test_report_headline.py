"""The report opens with the figures a reader came for (issue 39): a line saying what was run, then the
headline table of every cell with its marks; the numbered sections follow, each only where the run has
something to show (a plain single-cell bench has no empty section and no plot of one point), environment
and definitions last; the environment states only what tokenbench knows. The browser test that the
headline is above the fold is in test_report_browser.py."""

from __future__ import annotations

import re

import pytest

from tokenbench.judge.plausibility import check_run
from tokenbench.judge.views import load_run
from tokenbench.report import build, html_page, markdown
from tokenbench.report.build import Section, build_report
from tokenbench.report.document import Para, Table
from tokenbench.report.i18n import t

from .report_fixtures import build_bench_run, build_run

NOTHING = ("No cell with concurrency 1", "nothing to compare", "No request failed", "No stored requests",
           "No cell ran a full timeslice", "not checked", "Hollow points")


def _doc(store, run_id: str, lang: str = "en"):
    run = load_run(store, run_id)
    return build_report(run, lang, check_run(run), "T")


def _sections(text: str) -> list[str]:
    return re.findall(r"^## \d+\. (.+)$", text, re.M)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_plain_single_cell_bench_has_no_empty_section_and_no_one_point_plot(store, lang):
    doc = _doc(store, build_bench_run(store), lang)
    text = markdown.render(doc)
    assert _sections(text) == [t(lang, k) for k in ("h.scaling", "h.intervals", "h.timeline", "h.environment",
                                                    "h.definitions")]
    assert [f.name for f in doc.figures()] == ["timeline"]              # a request timeline, not a one-point curve
    assert not any(n in text for n in NOTHING)
    numbers = [int(n) for n in re.findall(r"^## (\d+)\.", text, re.M)]
    assert numbers == list(range(1, len(numbers) + 1))


def test_the_headline_comes_first_with_every_cell_and_its_marks(store, stored_run):
    doc = _doc(store, stored_run)
    first = next(i for i, b in enumerate(doc.blocks) if getattr(b, "level", None) == 2)
    lead = doc.blocks[:first]
    assert isinstance(lead[0], Para) and lead[0].text.startswith("sweep of http://127.0.0.1:8000, 2026-01-02 03:04 UTC")
    [table] = [b for b in lead if isinstance(b, Table)]
    assert table.role == "headline" and len(table.rows) == len(load_run(store, stored_run).cells) == 12
    labels = [(row[0], row[1].text) for row in table.rows]
    assert labels[:3] == [("slots2", "128/32 c=1"), ("slots2", "128/32 c=2"), ("slots2", "128/32 c=4")]
    over = [f"{r[0]} {r[1].text}" for r in table.rows if r[1].over]
    assert over == ["slots2 512/64 c=2", "slots2 512/64 c=4", "slots4 512/64 c=4"]
    assert any("KV demand" in n for n in table.footnotes)
    assert table.headers[:3] == ["server config", "cell", "requests ok/sent"] and "ITL p99 (ms)" in table.headers


def test_a_failed_or_moved_figure_is_marked_in_the_headline_and_said_why(store):
    run_id = build_bench_run(store, cells=(2, 4))
    store.db.execute("UPDATE cells SET status='failed', message='server gone' WHERE key='128:32/c=4'")
    doc = _doc(store, run_id)
    [table] = [b for b in doc.blocks if isinstance(b, Table) and b.role == "headline"]
    ok, bad = table.rows
    assert ok[0].mark == "" and bad[0].mark == "✗"
    assert all(cell.mark == "✗" for cell in bad[1:])
    assert any("128/32 c=4" in n and "server gone" in n for n in table.footnotes)


def test_the_html_puts_the_headline_before_the_contents(store, stored_run):
    page = html_page.render(_doc(store, stored_run))
    assert page.index('<table class="headline">') < page.index("<nav>") < page.index("<h2")
    assert page.index("<h1>") < page.index('<table class="headline">')


def test_only_what_tokenbench_knows_is_stated_of_the_engine(store):
    other = markdown.render(_doc(store, build_bench_run(store)))
    assert "client: CPUs not pinned, nice 0" in other and "engine: CPUs" not in other
    ours = markdown.render(_doc(store, build_bench_run(store, "20260102-030405-ours", local_engine=True)))
    assert "client: CPUs not pinned, nice 0; engine: CPUs not pinned, nice 0" in ours


def test_a_section_with_nothing_to_show_is_left_out_with_its_number(store, monkeypatch):
    """Adding a section is one line in SECTIONS; one that returns no blocks leaves no heading and no gap."""
    run_id = build_bench_run(store)
    extra = (Section("h.monitor", lambda x: []), Section("h.repeats", lambda x: [Para("shown")]))
    at = [s.heading for s in build.SECTIONS].index("h.scaling") + 1            # right after the scaling
    monkeypatch.setattr(build, "SECTIONS", build.SECTIONS[:at] + extra + build.SECTIONS[at:])
    text = markdown.render(_doc(store, run_id))
    assert _sections(text)[:3] == ["Concurrency scaling", "Repeatability", "95 % intervals"]
    assert "## 2. Repeatability\n\nshown" in text and "Monitor timelines" not in text


def test_a_run_without_cells_says_so_under_the_headline(store):
    store.create_run("bench", "http://127.0.0.1:8000", {}, ["tokenbench", "bench"], {}, run_id="empty")
    text = markdown.render(_doc(store, "empty"))
    assert "No cell of this run was stored." in text.split("\n## ", 1)[0]
    assert _sections(text) == ["Environment and provenance", "Metric definitions"]


def test_the_full_study_keeps_its_sections_in_reading_order(store, stored_run):
    text = markdown.render(_doc(store, build_run(store, "20260102-030405-other")))
    found = _sections(text)
    assert found.index("Concurrency scaling") < found.index("Environment and provenance") < found.index(
        "Metric definitions") == len(found) - 1
