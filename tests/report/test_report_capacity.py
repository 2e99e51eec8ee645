"""The report's capacity section and `^` mark from a stored run built with the Store API: a search driven
through the real generator (study/capacity.py) over hand-made cells, stored as the runner stores it, then
rendered in both languages. In process, no server."""

from __future__ import annotations

from tokenbench.judge.plausibility import check_run
from tokenbench.judge.views import load_run
from tokenbench.metrics.capacity import CellSamples, metrics_of, samples_of
from tokenbench.metrics.summary import summarize
from tokenbench.report import markdown
from tokenbench.report.build import build_report
from tokenbench.spec.bench import SLO, Load
from tokenbench.spec.server_facts import GraphCapture
from tokenbench.spec.slo import Tier
from tokenbench.store.rows import CellRow, KvUse
from tokenbench.study.capacity import Settings, search

from .report_fixtures import ENV, facts, profile, records


class _Planned:
    def __init__(self, key: str, repeat: int, load: Load) -> None:
        self.key, self.repeat, self.load = key, repeat, load


class _Measured:
    def __init__(self, summary, status: str = "ok") -> None:
        from tokenbench.metrics.verdict import Verdict
        self.summary, self.verdict, self.started_ns = summary, Verdict(status), None


def _stored_search(store) -> str:
    """A concurrency search on a 2-slot server (TPOT grows with the streams) for tpot:p99<=25, its cells
    stored as they are asked, and the record stored; the config's facts say graphs up to 2 streams."""
    run_id = store.create_run("sweep", "http://x", {"find_capacity": "concurrency"}, ["tokenbench"], ENV)
    told = facts(65536)
    told.with_graphs(GraphCapture((1, 2), 2, "/server_info cuda_graph_config.decode"))
    config_id = store.upsert_config(run_id, "default", {}, profile(2), told, status="done")
    tiers = (Tier.model_validate({"name": "slo", "limits": "tpot:p99<=25"}),)
    gen = search(Settings(dimension="concurrency", tiers=tiers, maximum=8, budget=8, sustain_s=0, workload="128:32"))
    probe = next(gen)
    while True:
        c = int(probe.load)
        recs = records(c, 128, 32, 2)
        load = Load(concurrency=c, num_prompts=2 * c)
        summary = summarize(recs, load, 128, 32)
        key = f"128:32/c={c}"
        row = CellRow.from_result(_Planned(key, probe.repeat, load), _Measured(summary), KvUse())
        store.save_cell(run_id, config_id, row, recs)
        got = CellSamples(key=key, repeat=probe.repeat, status="ok", values=samples_of(recs, metrics_of(tiers), SLO()),
                          request_rate=summary.request_throughput, slices=summary.slices)
        try:
            probe = gen.send(got)
        except StopIteration as end:
            store.save_search(run_id, config_id, end.value)
            return run_id


def _page(store, run_id: str, lang: str) -> str:
    run = load_run(store, run_id)
    return markdown.render(build_report(run, lang, check_run(run), "test"))


def test_the_capacity_section_states_the_answer_its_interval_and_why(store):
    run_id = _stored_search(store)
    [row] = store.searches(run_id)
    [a] = row.record.answers
    # tpot = 10 + 2c ms: p99 <= 25 up to 7 streams
    assert (a.capacity, a.fail_load) == (7, 8) and a.binding is not None and a.binding.limit.text == "tpot:p99<=25"
    page = _page(store, run_id, "en")
    section = page.split("Capacity: the highest load meeting the SLOs", 1)[1].split("\n## ", 1)[0]
    assert "### 1.1 default: 128:32, concurrency (streams)" in section      # the first section after the headline
    line = next(x for x in section.splitlines() if x.startswith("| slo |"))
    assert a.lo_unreliable and a.hi_unreliable                 # a p99 of 14 and 16 requests: not 95 % bounds
    assert f"| 7 | \\[{a.lo:g}◊, {a.hi:g}◊\\] |" in line and "tpot:p99&lt;=25 at 8: " in line
    assert "◊ that end of the interval rests on a percentile from too few requests" in section
    assert "graph capture: decode batch 8 &gt; largest captured graph size 2: runs eager" in line
    assert "| bracket | 1 | 128:32/c=1 #1 | ok | pass +" in section   # one cell's ◊ p99: a pass, not a sure one
    assert section.count("| refine |") >= 1
    zh = _page(store, run_id, "zh")
    assert "容量：满足 SLO 的最高负载" in zh and "图捕获" in zh


def test_cells_above_the_captured_sizes_are_marked(store):
    run_id = _stored_search(store)
    page = _page(store, run_id, "en")
    scaling = page.split("Concurrency scaling", 1)[1].split("\n## ", 1)[0]
    marked = [x.split(" |")[0] for x in scaling.splitlines() if x.startswith("| c=") and x.split(" |")[0].endswith("^")]
    assert marked and all(int(m[4:-1]) > 2 for m in marked)
    assert "| c=2 |" in scaling or "| c=1 |" in scaling
    assert "^ = the cell's decode batch is above the largest captured graph size" in scaling


def test_a_drifted_sustain_cell_names_each_moved_figure_in_both_languages():
    """The sustain line of a cell whose throughput and TTFT moved names both, with first, last and change;
    the one that did not move is left out (a missing figure name ended a CI report)."""
    from types import SimpleNamespace

    from tokenbench.metrics.capacity import Sustain
    from tokenbench.metrics.timeslices import Drift
    from tokenbench.report.capacity import sustain_text
    drift = [Drift(figure="output_tps", first=30.0, last=36.3, change=0.211, lo=0.1, hi=0.3, slices=2, drifted=True),
             Drift(figure="ttft_mean_ms", first=300.0, last=210.0, change=-0.3, lo=-0.4, hi=-0.2, slices=2,
                   drifted=True),
             Drift(figure="tpot_mean_ms", first=31.0, last=31.5, change=0.016, lo=-0.1, hi=0.1, slices=2,
                   drifted=False)]
    s = Sustain(key="16:8", repeat=0, load=2, duration_s=12, status="ok", verdicts=[], drift=drift, steady=False)
    record = SimpleNamespace(tiers=[SimpleNamespace(name="slo")])
    en, zh = sustain_text(record, s, "en"), sustain_text(record, s, "zh")
    assert "output tok/s" in en and "mean TTFT" in en and "+21.1" in en and "mean TPOT" not in en
    assert "输出吞吐" in zh and "TTFT 均值" in zh and "TPOT 均值" not in zh


def test_a_sustain_cell_of_one_slice_says_its_drift_was_not_checked():
    """A sustain cell shorter than two timeslices has no first and last slices to compare: the line says the
    drift was not checked (it said "no drift" before, a claim nothing measured), in both languages."""
    from types import SimpleNamespace

    from tokenbench.metrics.capacity import Sustain
    from tokenbench.report.capacity import sustain_text
    s = Sustain(key="16:8", repeat=0, load=2, duration_s=4, status="ok", verdicts=[], drift=[], steady=None)
    record = SimpleNamespace(tiers=[SimpleNamespace(name="slo")])
    en, zh = sustain_text(record, s, "en"), sustain_text(record, s, "zh")
    assert "drift not checked" in en and "no drift" not in en and "--timeslice-s" in en
    assert "未检查漂移" in zh and "无漂移" not in zh
