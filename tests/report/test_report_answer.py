"""What a report and the console say first, and how often (issue 43, item 6): a tune's report opens with its
answer (the recommendation, its confirmation, the configs whose engine died under load with the cause), an
all-failed run's with why nothing was measured and no section of dash-only tables; a mark whose reason repeats
across cells is said once with the cells it covers (report footnotes and the console alike), its evidence as
the cells' range; a cost split with no server phases says it is proportional by construction. In process, from
stored runs (the browser test checks the same openings in Chromium's first viewport)."""

from __future__ import annotations

from tokenbench.cli import console
from tokenbench.judge.views import load_run
from tokenbench.metrics.summary import summarize
from tokenbench.metrics.summary_groups import ClientHealth, FigureHealth, FigureMark
from tokenbench.report import markdown
from tokenbench.report.build import build_report
from tokenbench.spec.bench import Load

from .report_fixtures import build_failed_run, build_run, build_tune_run, records


def page(store, run_id: str, lang: str = "en") -> str:
    run = load_run(store, run_id)
    return markdown.render(build_report(run, lang, [], "T"))


def test_a_tune_report_opens_with_its_answer_and_names_the_death_with_its_cause(store):
    text = page(store, build_tune_run(store))
    table = text.index("| server config | cell |")
    for said in ("Recommended: slots=4 (best under tier slo: 4 streams", "Start it: tokenbench deploy up cpu-smollm2",
                 "Confirmed on a fresh launch: slots=4 met tier slo over a sustain cell at 4 streams for 60 s",
                 "slots=8 died under load (launch 2, cell 128:32/c=8: out of memory: ggml_aligned_malloc: "
                 "insufficient memory): never recommended"):
        assert text.index(said) < table, said
    assert text.index("Recommended:") < text.index("tune of cpu-smollm2")          # the answer before the rest
    assert text.count("Recommended: slots=4") == 1                                    # said once, not again below
    died = text[text.index("#### Configs whose engine died under load"):]
    assert "| slots=8 | 2 | 128:32/c=8 | out of memory | ggml_aligned_malloc: insufficient memory | 1 |" in died
    ranking = text[text.index("### 1.1 Tier slo"):]
    assert "| slots=8 | parallelism.slots=8 | 8 | \\[8, 9\\] | died under load: out of memory |" in ranking
    zh = page(store, "20260102-030405-tune", "zh")
    assert zh.index("推荐：slots=4") < zh.index("slots=8 在负载下崩溃") < zh.index("| 服务配置 | 测试点 |")


def test_an_all_failed_run_opens_with_why_and_shows_no_table_of_dashes(store):
    text = page(store, build_failed_run(store))
    assert text.index("Nothing was measured: none of the 4 cell(s) completed a request") < text.index("| cell |")
    for dashes in ("Single-request baseline", "Concurrency scaling", "95 % intervals", "Output throughput matrix",
                   "Frontier"):
        assert dashes not in text
    assert "Failures by kind" in text and "Cells that failed their checks" in text
    before_sections = text[:text.index("## 1.")]
    assert before_sections.count("HTTP 500: injected fault") == 4         # once per cell, in the answer only
    measured = page(store, build_run(store))
    assert "Nothing was measured" not in measured and "Concurrency scaling" in measured


def test_a_reason_shared_by_cells_is_one_footnote_naming_them(store):
    text = page(store, build_tune_run(store))
    headline = text[text.index("| server config | cell |"):text.index("## 1.")]
    [line] = [x for x in headline.splitlines() if x.startswith("- ✗")]
    assert line.startswith("- ✗ each of slots=4 128/32 c=8, slots=2 128/32 c=8, slots=8 128/32 c=8: more requests")


def _moved(c: int, wait: float):
    recs = records(c, 128, 32, 4)
    s = summarize(recs, Load(concurrency=c, num_prompts=len(recs)), 128, 32)
    mark = FigureMark(cause="host_contention", bound=10.0 + c, tolerance=1.0)
    return (f"128:32/c={c}", s.with_(ClientHealth(client_wait_percent=wait),
                                     FigureHealth(client_marks={"p99_ttft_ms": mark})), "ok", "")


def test_the_console_says_a_repeated_cause_once_with_its_cells_and_the_range_of_its_evidence():
    rows = [_moved(1, 3.6), _moved(2, 6.2), _moved(4, 5.0)]
    why = "6/6 requests failed (http_status=6); first: HTTP 500"
    notes = console.notes([*rows, ("128:32/c=8", rows[0][1], "failed", why), ("128:32/c=16", rows[0][1], "failed", why)])
    moved = [n for n in notes if n.startswith("~")]
    assert moved == ["~ 3 cells, one cause: 128:32/c=1: p99_ttft_ms ±11; 128:32/c=2: p99_ttft_ms ±12; 128:32/c=4: "
                     "p99_ttft_ms ±14 may each be off by more than its tolerance (± the most the delays measured "
                     "could have moved it); the cells' other figures are clean. Cause: host contention: the client "
                     "was ready to run while other processes had the CPU (it waited 3.6–6.2 % of the cell for a "
                     "CPU): give it a core of its own (--client-cpus) or quiet the host"]
    [bad] = [n for n in notes if n.startswith("✗")]
    assert bad == f"✗ each of 128:32/c=8, 128:32/c=16: more requests failed than the error budget allows: {why}"
    one = console.notes(rows[:1])
    assert one == [one[0]] and one[0].startswith("~ 128:32/c=1: p99_ttft_ms ±11 may be off") and "3.6 %" in one[0]


def test_a_cost_split_without_server_phases_says_it_is_proportional_by_construction(store):
    from .report_fixtures import build_accel_run
    text = page(store, build_accel_run(store, price=2.5))
    cost = text[text.index("Cost per million tokens"):]
    assert "token share, proportional by construction" in cost
    assert cost.count("their split is proportional by construction") == 1
