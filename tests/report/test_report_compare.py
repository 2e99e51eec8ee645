"""compare: what differs, ratios like Study B's table, and the fairness check (flag, or --strict refuses)."""

from __future__ import annotations

import re

import pytest

from tokenbench.cli.main import main
from tokenbench.errors import MeasurementError, UsageError
from tokenbench.formats.importers import import_file
from tokenbench.judge.plausibility import check_run
from tokenbench.judge.views import load_run
from tokenbench.report import render
from tokenbench.report.build import build_report
from tokenbench.report.compare import compare
from tokenbench.report.explain import issue_text

from .report_fixtures import FIXTURES, build_run


def _md(store, selectors, strict=False):
    doc, issues = compare(store, selectors, "en", "T", strict)
    return render.markdown.render(doc), issues


def test_two_runs_same_workload_are_fair(store, stored_run):
    other = build_run(store, "20260103-000000-other")
    store.db.execute("UPDATE server_configs SET facts_json = json_set(facts_json, '$.version', 'b7000') "
                     "WHERE run_id = ?", (other,))
    text, issues = _md(store, [f"{stored_run}:slots4", f"{other}:slots4"])
    assert issues == []
    assert "The effective workloads match" in text
    assert "| engine version | b6500 | b7000 |" in text          # what differs comes first
    assert text.index("What differs") < text.index("Fairness check") < text.index("Requests per second")
    assert "speed-up" in text and "1.00x" in text


def test_configs_of_one_run_with_ratios(store, stored_run):
    text, issues = _md(store, [stored_run])                    # every config of the run becomes a column
    assert issues == [] and f"speed-up {stored_run}:slots4/{stored_run}:slots2" in text    # run ids in headers
    iv = r" \\\[[\d.]+, [\d.]+\\\]"                                 # each figure with its interval
    assert re.search(rf"\| c=4 \| 3\.42{iv} \| 6\.83{iv} \| 2\.00x \|", text)   # requests/s, 128/32
    for metric in ("TTFT (ms) mean", "TTFT (ms) p50", "TTFT (ms) p99", "TPOT (ms) p99", "ITL (ms) mean",
                   "E2EL (ms) p99", "requests/s", "output tok/s", "bottleneck"):
        assert f"| c=4 | {metric} |" in text, metric


def test_different_output_tokens_are_flagged_and_strict_refuses(store, stored_run):
    other = build_run(store, "20260103-000000-short")
    store.db.execute("UPDATE cells SET summary_json = json_set(summary_json, '$.total_output_tokens', 3) "
                     "WHERE run_id = ? AND key = '128:32/c=1'", (other,))
    text, issues = _md(store, [f"{stored_run}:slots2", f"{other}:slots2"])
    assert [i.kind for i in issues] == ["differs"]
    assert "server-reported output tokens per request differ at 128/32 c=1" in issue_text(issues[0])
    assert "WARNING: the effective workloads differ" in text
    with pytest.raises(MeasurementError, match="compare --strict refused"):
        compare(store, [f"{stored_run}:slots2", f"{other}:slots2"], "en", "T", strict=True)


def _cached(store, run_id: str, divisor: int) -> None:
    """The run's server served 1 / divisor of every prompt from its cache: each request's usage says so, and the
    cells' summaries hold the share (as a run measured so stores them)."""
    store.db.execute("UPDATE requests SET cached_tokens = prompt_tokens / ? WHERE cell_id IN "
                     "(SELECT id FROM cells WHERE run_id = ?)", (divisor, run_id))
    store.db.execute("UPDATE cells SET summary_json = json_set(summary_json, '$.cache_hit_rate', ?) "
                     "WHERE run_id = ?", (1 / divisor, run_id))


def test_cached_prompts_are_a_difference(store, stored_run):
    other = build_run(store, "20260103-000000-cache")
    _cached(store, other, 1)
    text, issues = _md(store, [f"{stored_run}:slots2", f"{other}:slots2"])
    assert any("prefix cache state differ" in issue_text(i) for i in issues)
    # and no verdict is given on any figure of a cell whose cache states differ: each says why
    verdicts = text[text.index("Verdicts with 95 % intervals"):text.index("Requests per second")]
    assert verdicts.count("refused: prefix cache cold (0% from the cache) vs warm (100% from the cache)") >= 14
    assert "faster by" not in verdicts and "no difference detectable" not in verdicts


def test_a_warm_side_is_refused_at_any_share_past_the_threshold_and_unknown_is_not(store, stored_run):
    other = build_run(store, "20260103-000000-cache5")
    _cached(store, other, 10)
    text, _ = _md(store, [f"{stored_run}:slots2", f"{other}:slots2"])
    assert "refused: prefix cache cold (0% from the cache) vs warm (10% from the cache)" in text
    _cached(store, other, 50)
    text, _ = _md(store, [f"{stored_run}:slots2", f"{other}:slots2"])
    assert "refused: prefix cache" not in text          # 2 % of prompt tokens: still cold


def test_zero_cached_equals_fresh_prompts_unreported(store, stored_run):
    """An engine that reports 0 cached tokens and one that reports nothing, both fed fresh random
    prompts: the same cache state, not a difference."""
    other = build_run(store, "20260103-000000-noreport")
    store.db.execute("UPDATE requests SET cached_tokens = NULL WHERE cell_id IN "
                     "(SELECT id FROM cells WHERE run_id = ?)", (other,))
    text, issues = _md(store, [f"{stored_run}:slots2", f"{other}:slots2"])
    assert issues == [] and "The effective workloads match" in text


def test_study_b_engines_side_by_side(store):
    run_id = import_file(store, FIXTURES / "study-b-published.csv")
    text, issues = _md(store, [f"{run_id}:sglang", f"{run_id}:vllm"])
    assert "| c=1 | 12.50 | 15.20 | 1.22x |" in text and "| c=16 | 28.10 | 298.70 | 10.63x |" in text
    assert {i.kind for i in issues} == {"unknown"}             # a CSV of figures says nothing of sampling
    assert "IMPOSSIBLE" in text


def test_bad_selectors(store, stored_run):
    with pytest.raises(UsageError, match="no server config 'tp9'"):
        compare(store, [f"{stored_run}:tp9", stored_run], "en", "T")
    with pytest.raises(UsageError, match="at least two columns"):
        compare(store, [f"{stored_run}:slots2"], "en", "T")


def test_compare_cli_strict_exit_code(stored_run, db_path, store, tmp_path, capsys):
    other = build_run(store, "20260103-000000-cli")
    store.db.execute("UPDATE cells SET summary_json = json_set(summary_json, '$.total_input_tokens', 1) "
                     "WHERE run_id = ?", (other,))
    argv = ["compare", f"{stored_run}:slots2", f"{other}:slots2", "--db", str(db_path), "-o", str(tmp_path)]
    assert main(argv) == 0 and (tmp_path / "compare.md").is_file() and (tmp_path / "compare.html").is_file()
    assert "fairness (differs)" in capsys.readouterr().err
    assert main([*argv, "--strict"]) == 5
    assert "compare --strict refused" in capsys.readouterr().err


def test_headers_name_the_study_and_its_run_id():
    from types import SimpleNamespace

    from tokenbench.report.compare import column_label, column_name
    named = SimpleNamespace(id="20261201-152412-b6b5ba", spec={"name": "llamacpp-study"})
    assert column_label(named, "default") == "llamacpp-study (20261201-152412-b6b5ba)"
    assert column_label(named, "slots=4") == "llamacpp-study:slots=4 (20261201-152412-b6b5ba)"
    assert column_label(SimpleNamespace(id="R1", spec={}), "default") == "R1:default"
    # verdict sentences name the column without the run id, and a name with " (" in it stays whole
    odd = SimpleNamespace(id="R2", spec={"name": "gemma (bf16) study"})
    assert column_name(odd, "default") == "gemma (bf16) study"
    assert column_label(odd, "default") == "gemma (bf16) study (R2)"


def test_a_rate_is_never_paired_with_a_closed_loop(store):
    """vLLM at --request-rate 4 --max-concurrency 4 beside vLLM at --max-concurrency 4 (rate inf, a closed
    loop c=4): the same figure 4, different loads; the cells are not paired (each on its own load axis: no
    ratio, no verdict) and the fairness check says why, in both languages; --strict refuses."""
    rate = import_file(store, FIXTURES / "vllm-bench-serve-rate.json")
    closed = import_file(store, FIXTURES / "vllm-bench-serve.json")
    text, issues = _md(store, [rate, closed])
    [load] = [i for i in issues if i.check == "load"]
    assert (load.kind, load.detail, load.values) == ("differs", "mode", ("4/s max 4 in flight", "c=4"))
    assert "128/4 4/s cap 4 is not paired" in issue_text(load) and "different loads" in issue_text(load)
    assert "不配对" in issue_text(load, "zh")
    # on their own load axes (a rate row, a concurrency row): never one row, no ratio, no verdict
    assert "128/4 4/s cap 4 is not paired" in text and "faster by" not in text and "x |" not in text
    assert "| c=4 | - |" in text and re.search(r"\| 4/s cap 4 \| [0-9.]+ .*\| - \| - \| - \|", text)
    with pytest.raises(MeasurementError, match="is not paired"):
        compare(store, [rate, closed], "en", "T", strict=True)


@pytest.mark.parametrize("other, detail", [("vllm-bench-serve-constant.json", "cap")])
def test_rates_with_another_cap_or_arrival_are_not_paired(store, tmp_path, other, detail):
    import json
    rate = import_file(store, FIXTURES / "vllm-bench-serve-rate.json")
    _, issues = _md(store, [rate, import_file(store, FIXTURES / other)])
    assert [i.detail for i in issues if i.check == "load"] == [detail]
    doc = json.loads((FIXTURES / "vllm-bench-serve-rate.json").read_text())
    (tmp_path / "c.json").write_text(json.dumps({**doc, "burstiness": float("inf")}))      # constant, same cap
    _, issues = _md(store, [rate, import_file(store, tmp_path / "c.json")])
    assert [i.detail for i in issues if i.check == "load"] == ["arrival"]
    (tmp_path / "same.json").write_text(json.dumps({**doc, "date": "other"}))              # the same load
    same = import_file(store, tmp_path / "same.json")
    _, issues = _md(store, [rate, same])
    assert not [i for i in issues if i.check == "load"]
    # the same rate and cap, the cap a gate (AIPerf's --rate-cap gate) against vLLM's queue: not the same load
    store.db.execute("UPDATE cells SET summary_json = json_set(summary_json, '$.send_cap', 'gate') "
                     "WHERE run_id = ?", (same,))
    _, issues = _md(store, [rate, same])
    [load] = [i for i in issues if i.check == "load"]
    assert load.detail == "cap" and load.values == ("4/s max 4 in flight", "4/s max 4 in flight (gate)")


def test_drawn_lengths_are_not_the_same_workload_as_exact_ones(store, stored_run):
    """A run whose requests drew their lengths (e.g. vLLM's --random-range-ratio 0.5) is not paired as equal
    with one of exact lengths, even at the same nominal pair and the same mean tokens per request."""
    other = build_run(store, "20260103-000000-drawn")
    drawn = "vLLM range ratio 0.5: input uniform 64..192, output uniform 16..48"
    store.db.execute("UPDATE cells SET summary_json = json_set(summary_json, '$.length_distribution', ?, "
                     "'$.length_draws', 'r0.5') WHERE run_id = ?", (drawn, other))
    text, issues = _md(store, [f"{stored_run}:slots2", f"{other}:slots2"])
    assert [i.kind for i in issues] == ["differs"] and "length distribution differ" in issue_text(issues[0])
    assert "exact" in issue_text(issues[0]) and drawn in issue_text(issues[0])
    assert "128/32" in text and "r0.5" not in text                    # compare pairs cells by their nominal pair
    run = load_run(store, other)
    report = render.markdown.render(build_report(run, "en", check_run(run), "T"))
    assert f"Each request's lengths were drawn (and asked and verified exactly): {drawn}." in report
    _, same = _md(store, [f"{other}:slots2", f"{other}:slots4"])
    assert same == []


def test_sampling_each_run_asked_is_compared(store, stored_run):
    """tokenbench runs send the sampling their spec asked (greedy by default): two runs that asked different
    sampling fields are not the same workload, and the issue names each run's fields."""
    other = build_run(store, "20260103-000000-sampled")
    store.db.execute("UPDATE runs SET spec_json = json_set(spec_json, '$.sampling', json(?)) WHERE id = ?",
                     ('{"temperature": 0.7, "top_k": 5}', other))
    _, issues = _md(store, [f"{stored_run}:slots2", f"{other}:slots2"])
    (issue,) = [i for i in issues if i.check == "sampling"]
    assert issue.kind == "differs" and issue.values == ("temperature=0", "temperature=0.7,top_k=5")
    assert "sampling differ" in issue_text(issue) and "=temperature=0.7,top_k=5" in issue_text(issue)
