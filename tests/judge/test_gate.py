"""The gate's judgement on recorded runs (stored with the Store API from generated request records whose run
level varies like a relaunch would): a candidate 10 % slower in its token interval is regressed in the
figures that move and no other; A/A runs flag nothing; one baseline run takes a floor (learned from the
database's earlier runs, else the default) and says so; cache states that differ refuse; sequential looks
spend alpha; the CLI's exit codes, JUnit XML, JSON and summary."""

from __future__ import annotations

import json
import math
import random
import xml.etree.ElementTree as ET

import pytest
import scipy.stats as st

from tests.report.report_fixtures import ENV, facts, profile
from tokenbench.cli.main import main
from tokenbench.client.records import RequestRecord
from tokenbench.formats.junit import junit_xml
from tokenbench.judge.cells import load_of
from tokenbench.judge.floors import Floors, observed
from tokenbench.judge.gate import GATE_METRICS, GateRun, Look, Policy, judge, result_dict
from tokenbench.judge.views import load_run
from tokenbench.metrics.cell_summary import Metric
from tokenbench.metrics.summary import summarize
from tokenbench.spec.bench import Load
from tokenbench.store.db import Store
from tokenbench.store.rows import CellRow
from tokenbench.study.gate import Budget

MS = 1_000_000
N, OUT = 60, 16
LOADS = (1, 4)
TTFT_MS = 50.0


def records(itl_ms: float, ttft_ms: float, level: float, seed: int, c: int, cached: bool) -> list[RequestRecord]:
    """A closed loop of c streams; `level` scales the whole run (what a relaunch or a busy host moves), and
    every TTFT and gap is jittered by 3 %."""
    rng, out, free = random.Random(seed), [], [1_000 * MS] * c
    for i in range(N):
        slot = min(range(c), key=lambda k: free[k])
        start = free[slot]
        t = start + 20_000 + int(level * rng.gauss(ttft_ms, 0.03 * ttft_ms) * MS)
        times = [t]
        for _ in range(OUT - 1):
            t += int(level * rng.gauss(itl_ms, 0.03 * itl_ms) * MS)
            times.append(t)
        out.append(RequestRecord(index=i, phase="measure", input_len=64, output_len=OUT, intended_ns=start,
                                 sent_ns=start + 20_000, end_ns=t + 50_000, status=200, token_times_ns=times,
                                 token_counts=[1] * OUT, prompt_tokens=64, completion_tokens=OUT,
                                 cached_tokens=64 if cached else 0, usage_source="server", finish_reason="length"))
        free[slot] = t + 60_000
    return out


def stored(store: Store, run_id: str, itl_ms: float = 10.0, seed: int = 0, *, level: float = 1.0,
           cached: bool = False) -> str:
    store.create_run("bench", "http://127.0.0.1:8000", {}, ["tokenbench", "bench"], ENV, run_id=run_id)
    cid = store.upsert_config(run_id, "default", overrides={}, profile=profile(4), facts=facts(1 << 20),
                              status="done")
    for c in LOADS:
        recs = records(itl_ms, TTFT_MS, level, seed * 10 + c, c, cached)
        summary = summarize(recs, Load(concurrency=c, num_prompts=N), 64, OUT)
        store.save_cell(run_id, cid, CellRow(key=f"64:{OUT}/c={c}", input_len=64, output_len=OUT, status="ok", summary=summary, concurrency=c,
                                             kv_demand=c * 80, kv_capacity=1 << 20), recs)
    store.set_run_status(run_id, "done")
    return run_id


LEVELS = (1.0, 1.012, 0.991, 1.006, 0.995, 1.009, 0.987, 1.003)     # runs differ by about 1 %


def side(store: Store, name: str, k: int, first: int = 0, **kw) -> list[str]:
    return [stored(store, f"{name}{j}", seed=first + j, level=LEVELS[(first + j) % len(LEVELS)], **kw)
            for j in range(k)]


def runs(store: Store, ids: list[str]) -> list[GateRun]:
    return [GateRun.of(load_run(store, i, requests=False), "default") for i in ids]


@pytest.fixture
def store(tmp_path):
    s = Store(tmp_path / "results.db")
    yield s
    s.close()


def by_figure(result) -> dict[tuple[str, str], str]:
    return {(f.cell, f.metric.key): f.decision for f in result.figures}


# the judgement ----------------------------------------------------------------------------------
def test_a_10_percent_slower_token_interval_regresses_what_it_moves_and_nothing_else(store):
    base, cand = side(store, "B", 4), side(store, "C", 4, first=4, itl_ms=11.0)
    result = judge((runs(store, base), runs(store, cand)), Policy(), Floors(store))
    verdicts = by_figure(result)
    assert len(verdicts) == 2 * len(GATE_METRICS)
    for (cell, key), v in verdicts.items():
        if any(n in key for n in ("tpot", "itl", "e2el", "throughput")) and "p99" not in key:
            assert v == "regressed", (cell, key, v)
        if "ttft" in key:
            assert v not in ("regressed", "improved"), (cell, key, v)
    assert result.outcome == "regressed" and result.alpha_look == 0.05
    assert result.look.number == 1 and {f.look for f in result.figures} == {1}
    tpot = next(f for f in result.figures if f.metric.key == "mean_tpot_ms")
    assert 0.08 < tpot.change < 0.12 and tpot.lo < 0.1 < tpot.hi and tpot.detectable < 0.1
    # the interval and the detectable change at Holm's strictest level, alpha / m (m = 28 figures), df 6
    t_level = st.t.ppf(1 - 0.05 / (2 * 28), 6)
    se = (math.log1p(tpot.hi) - math.log1p(tpot.lo)) / (2 * t_level)
    assert math.log1p(tpot.change) == pytest.approx((math.log1p(tpot.hi) + math.log1p(tpot.lo)) / 2)
    assert tpot.detectable == pytest.approx(math.expm1((t_level + st.t.ppf(0.8, 6)) * se), rel=1e-9)
    assert tpot.noise is not None and tpot.noise.source == "repeats" and tpot.noise.df == 6
    assert tpot.p_holm >= tpot.p and len(tpot.base) == len(tpot.cand) == 4


def test_a_faster_candidate_is_improved_not_regressed(store):
    base, cand = side(store, "B", 4), side(store, "C", 4, first=4, itl_ms=9.0)
    result = judge((runs(store, base), runs(store, cand)), Policy(), Floors(store))
    assert result.count("regressed") == 0 and result.count("improved") >= 8
    assert by_figure(result)[("64/16 c=1", "mean_tpot_ms")] == "improved"
    assert result.outcome in ("pass", "inconclusive")


def test_aa_runs_flag_nothing_and_unchanged_figures_are_shown_equivalent(store):
    base, cand = side(store, "B", 4), side(store, "C", 4, first=4)
    result = judge((runs(store, base), runs(store, cand)), Policy(min_effect=0.05), Floors(store))
    assert result.count("regressed") == result.count("improved") == 0
    assert by_figure(result)[("64/16 c=4", "mean_tpot_ms")] == "no change"
    assert result.count("no change") >= 10


def test_min_effect_holds_back_a_change_smaller_than_it(store):
    base, cand = side(store, "B", 4), side(store, "C", 4, first=4, itl_ms=11.0)
    result = judge((runs(store, base), runs(store, cand)), Policy(min_effect=0.2), Floors(store))
    assert result.count("regressed") == 0
    assert by_figure(result)[("64/16 c=1", "mean_tpot_ms")] == "no change"      # 10 % is within 20 %
    result = judge((runs(store, base), runs(store, cand)), Policy(min_effect=0.1), Floors(store))
    assert by_figure(result)[("64/16 c=1", "mean_tpot_ms")] in ("regressed", "inconclusive")


def test_one_baseline_run_takes_the_default_floor_and_then_a_learned_one(store):
    base, cand = side(store, "B", 1), side(store, "C", 3, first=4, itl_ms=11.0)
    result = judge((runs(store, base), runs(store, cand)), Policy(), Floors(store))
    sources = {f.noise.source for f in result.figures if f.noise is not None}
    assert sources == {"default"} and result.count("regressed") == 0          # a 25 % floor hides 10 %
    side(store, "E", 8, first=1)                                                # earlier runs of the same build
    result = judge((runs(store, base), runs(store, cand)), Policy(), Floors(store))
    tpot = next(f for f in result.figures if f.metric.key == "mean_tpot_ms")
    assert tpot.noise is not None and (tpot.noise.source, tpot.noise.units, tpot.noise.df) == ("learned", 8, 7)
    assert tpot.decision == "regressed"


def test_two_baseline_runs_are_repeats_enough(store):
    base, cand = side(store, "B", 2), side(store, "C", 1, first=4)
    result = judge((runs(store, base), runs(store, cand)), Policy(), Floors(store))
    assert {(f.noise.source, f.noise.df, f.noise.units) for f in result.figures if f.noise} == {("repeats", 1, 2)}   # the lone candidate run adds no spread


def test_a_floor_is_learned_from_three_earlier_runs_and_not_two(store):
    base, cand = side(store, "B", 1), side(store, "C", 1, first=4)
    side(store, "E", 2, first=1)
    result = judge((runs(store, base), runs(store, cand)), Policy(), Floors(store))
    assert {f.noise.source for f in result.figures if f.noise is not None} == {"default"}
    side(store, "F", 1, first=3)
    result = judge((runs(store, base), runs(store, cand)), Policy(), Floors(store))
    assert {(f.noise.source, f.noise.units) for f in result.figures if f.noise is not None} == {("learned", 3)}
    assert {f.noise.source for f in judge((runs(store, base), runs(store, cand)), Policy(), Floors(None)).figures
            if f.noise is not None} == {"default"}


def test_a_figure_of_zero_is_not_an_observation(store):
    side(store, "B", 3)
    store.db.execute("UPDATE cells SET summary_json = json_set(summary_json, '$.mean_ttft_ms', 0.0) "
                     "WHERE run_id = 'B1'")
    member = runs(store, ["B1"])[0]
    cell = member.cell((64, 16), load_of(member.run.cells_of("default")[0]))
    assert observed(member.run, cell, Metric("ttft", "mean"), member.book) is None
    tpot = observed(member.run, cell, Metric("tpot", "mean"), member.book)
    iv = member.book.interval(cell, Metric("tpot", "mean"))
    assert tpot is not None and iv is not None and tpot.se == iv.se > 0 and tpot.value == iv.value


def test_a_floor_reads_the_most_recent_30_earlier_runs(store):
    """docs/metrics.md: 'the most recent 30, at least 3'."""
    base, cand = side(store, "B", 1), side(store, "C", 1, first=4)
    for j in range(31):
        stored(store, f"E{j:02d}", seed=100 + j, level=LEVELS[j % len(LEVELS)])
    result = judge((runs(store, base), runs(store, cand)), Policy(metrics=(Metric("tpot", "mean"),)), Floors(store))
    assert {(f.noise.source, f.noise.units) for f in result.figures if f.noise} == {("learned", 30)}


def test_the_floor_is_the_baselines_build_not_the_candidates(store):
    base, cand = side(store, "B", 1), side(store, "C", 1, first=4)
    store.db.execute("UPDATE server_configs SET facts_json = json_set(facts_json, '$.version', 'b7000') "
                     "WHERE run_id = 'C0'")
    side(store, "E", 3, first=1)                      # earlier runs of the baseline's build
    result = judge((runs(store, base), runs(store, cand)), Policy(), Floors(store))
    assert {f.noise.source for f in result.figures if f.noise is not None} == {"learned"}
    assert [(d.fact, d.b) for d in result.differences] == [("version", "b7000")]      # stated, never refused
    from tokenbench.report.gate import summary_lines
    said = [line for line in summary_lines(result, "en") if line.startswith("the sides differ")]
    assert len(said) == 1 and "engine version: " in said[0] and " against b7000 (" in said[0]
    assert "refused" not in {f.decision for f in result.figures}
    swapped = judge((runs(store, cand), runs(store, base)), Policy(), Floors(store))
    assert {f.noise.source for f in swapped.figures if f.noise is not None} == {"default"}


def test_undecided_are_the_inconclusive_figures(store):
    base, cand = side(store, "B", 4), side(store, "C", 4, first=4, itl_ms=11.0)
    result = judge((runs(store, base), runs(store, cand)), Policy(), Floors(store))
    undecided = result.undecided()
    assert all(f.decision == "inconclusive" for f in undecided) and len(undecided) == result.count("inconclusive")
    assert result.count("regressed") > 0 and len(undecided) < len(result.figures)


def test_a_floor_is_learned_from_the_same_build_only(store):
    base, cand = side(store, "B", 1), side(store, "C", 1, first=4)
    for j in range(4):                               # earlier runs of another engine version
        stored(store, f"X{j}", seed=20 + j)
        store.db.execute("UPDATE server_configs SET facts_json = json_set(facts_json, '$.version', 'b7000') "
                         "WHERE run_id = ?", (f"X{j}",))
    result = judge((runs(store, base), runs(store, cand)), Policy(), Floors(store))
    assert {f.noise.source for f in result.figures if f.noise is not None} == {"default"}


def test_cache_states_that_differ_refuse_every_figure_with_the_reason(store):
    base, cand = side(store, "B", 3), side(store, "C", 3, first=4, cached=True)
    result = judge((runs(store, base), runs(store, cand)), Policy(), Floors(store))
    assert {f.decision for f in result.figures} == {"refused"} and result.outcome == "refused"
    assert result.look.number == 1 and {f.look for f in result.figures} == {1}       # one look: the first
    f = result.figures[0]
    assert f.why == "cache_differs" and f.p is None                # refused before any test: not in Holm's m
    assert (f.units, f.left_out, f.base, f.cand, f.rejected) == ((0, 0), (0, 0), (), (), False)
    (r,) = f.reasons
    assert (r.code, r.refuses, r.a, r.b, r.shares) == ("cache_differs", True, "cold", "warm", (0.0, 1.0))


def test_a_cell_that_failed_in_one_run_refuses_its_figures(store):
    base, cand = side(store, "B", 3), side(store, "C", 3, first=4)
    store.db.execute("UPDATE cells SET status = 'failed', message = '3/60 requests failed' "
                     "WHERE run_id = 'C1' AND key = '64:16/c=4'")
    result = judge((runs(store, base), runs(store, cand)), Policy(), Floors(store))
    refused = {f.cell for f in result.figures if f.decision == "refused" and f.why == "not_ok"}
    assert refused == {"64/16 c=4"} and result.outcome == "refused"


def test_a_cell_only_one_side_measured_is_not_judged(store):
    base = side(store, "B", 3)
    cand = side(store, "C", 3, first=4)
    store.db.execute("DELETE FROM cells WHERE run_id LIKE 'C%' AND key = '64:16/c=4'")
    result = judge((runs(store, base), runs(store, cand)), Policy(), Floors(store))
    assert {f.cell for f in result.figures} == {"64/16 c=1"} and result.cells == ["64/16 c=1"]


def test_holm_runs_over_every_tested_figure_and_figures_can_be_chosen(store):
    base, cand = side(store, "B", 4), side(store, "C", 4, first=4, itl_ms=11.0)
    chosen = (Metric("tpot", "mean"), Metric("ttft", "p50"))
    result = judge((runs(store, base), runs(store, cand)), Policy(metrics=chosen), Floors(store))
    assert [f.metric for f in result.figures] == [*chosen, *chosen]
    tpot = result.figures[0]
    assert tpot.p_holm == pytest.approx(min(1.0, 4 * tpot.p)) or tpot.p_holm >= tpot.p   # the smallest p: x m


def test_holms_steps_and_the_equivalence_level_of_a_look():
    """Holm's i-th step (0: the smallest p) is held to alpha / (left - i), never past alpha itself; no change is
    shown by two one-sided tests at alpha (one look), at the look's boundary for 2 alpha halved (a later look)."""
    from tokenbench.judge.gate import _Level
    one = _Level(Look(), 0.05, 4)
    assert [one.step(i) for i in range(6)] == pytest.approx([0.05 / 4, 0.05 / 3, 0.05 / 2, 0.05, 0.05, 0.05])
    assert one.equivalence() == pytest.approx(0.05)
    later = _Level(Look((0.5, 1.0)), 0.05, 2)
    assert later.step(0) == pytest.approx(noise_level(0.025, (0.5, 1.0)))
    assert later.equivalence() == pytest.approx(noise_level(0.1, (0.5, 1.0)) / 2) and later.equivalence() < 0.05


def noise_level(alpha: float, fractions: tuple[float, ...]) -> float:
    from tokenbench.metrics.noise import nominal_level
    return nominal_level(alpha, fractions)


# sequential looks -------------------------------------------------------------------------------
def test_a_later_look_keeps_earlier_decisions_and_spends_only_its_share(store):
    base, cand = side(store, "B", 3), side(store, "C", 3, first=4, itl_ms=11.0)
    sides = (runs(store, base), runs(store, cand))
    first = judge(sides, Policy(), Floors(store), Look((0.5,)))
    assert first.alpha_look == pytest.approx(0.0056, abs=2e-4)      # O'Brien-Fleming at half: 2 - 2 Phi(2.77)
    more = (sides[0] + runs(store, side(store, "B+", 1, first=3)),
            sides[1] + runs(store, side(store, "C+", 1, first=7, itl_ms=11.0)))
    second = judge(more, Policy(), Floors(store), Look((0.5, 1.0)), first.figures)
    # the last look's boundary: what the first left of alpha, crossed only by paths that did not cross then
    c1, c2 = (st.norm.isf(a / 2) for a in (first.alpha_look, second.alpha_look))
    both = st.multivariate_normal(mean=[0, 0], cov=[[1, math.sqrt(0.5)], [math.sqrt(0.5), 1]])
    assert 1 - both.cdf([c1, c2], lower_limit=[-c1, -c2]) == pytest.approx(0.05, abs=2e-5)
    assert second.alpha_look > 0.05 - first.alpha_look + 0.003     # the union bound would leave it 0.0444
    kept = {f.key for f in first.figures if f.decided}
    assert all(f.look == 1 for f in second.figures if f.key in kept)
    assert any(f.look == 2 for f in second.figures)


def test_the_budget_counts_runs_and_ends_at_the_most_allowed():
    s = (["b"] * 3, ["c"] * 3)
    b = Budget(6, (True, True))
    assert b.most(s) == 12 and b.fraction(s, 12) == 0.5 and b.left(s)
    fixed = Budget(6, (False, True))
    assert fixed.most(s) == 9 and fixed.fraction(s, 9) == pytest.approx(2 / 3) and fixed.left(s)
    assert not fixed.left((["b"] * 3, ["c"] * 6)) and Budget(4, (True, True)).left((["b"] * 3, ["c"] * 4))
    assert Budget(6, (True, False)).most(s) == 9 and not Budget(6, (True, False)).left((["b"] * 6, ["c"] * 3))


# the command ------------------------------------------------------------------------------------
def _gate(db, base, cand, tmp_path, *more) -> tuple[int, dict, ET.Element]:
    code = main(["gate", "--db", str(db), "--baseline", ",".join(base), "--candidate", ",".join(cand),
                 "--json", str(tmp_path / "g.json"), "--junit", str(tmp_path / "g.xml"), *more])
    return code, json.loads((tmp_path / "g.json").read_text()), ET.parse(tmp_path / "g.xml").getroot()


def test_cli_exit_codes_json_junit_and_summary(store, tmp_path, capsys):
    db = store.path
    base, slow = side(store, "B", 4), side(store, "S", 4, first=4, itl_ms=11.0)
    same = side(store, "A", 4, first=4)
    code, doc, suite = _gate(db, base, slow, tmp_path, "-o", str(tmp_path / "rep"))
    out = capsys.readouterr()
    assert code == 10 and doc["outcome"] == "regressed"
    assert "gate: REGRESSED" in out.out and "regressed" in out.out and "error: gate regressed" in out.err
    assert len(suite.findall("testcase")) == len(doc["figures"]) == 2 * len(GATE_METRICS)
    failed = {(c.get("classname"), c.get("name")) for c in suite.findall("testcase") if c.find("failure") is not None}
    assert len(failed) == doc["counts"]["regressed"] == int(suite.get("failures")) > 0
    assert ("tokenbench.gate.64/16 c=1", "tpot mean") in failed
    props = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert props["outcome"] == "regressed" and props["alpha"] == "0.05"
    assert (tmp_path / "rep" / "gate.md").is_file() and "REGRESSED" in (tmp_path / "rep" / "gate.md").read_text()

    code, doc, suite = _gate(db, base, same, tmp_path, "--min-effect", "0.05")
    assert code == 0 and doc["outcome"] == "pass" and suite.get("failures") == "0"
    assert "gate: pass" in capsys.readouterr().out

    code, doc, _ = _gate(db, base[:2], same[:2], tmp_path, "--min-effect", "0.001")
    assert code == 11 and doc["outcome"] == "inconclusive"

    warm = side(store, "W", 3, first=4, cached=True)
    code, doc, suite = _gate(db, base, warm, tmp_path, "-o", str(tmp_path / "rep"))
    assert code == 12 and doc["counts"]["refused"] == len(doc["figures"])
    assert int(suite.get("skipped")) == len(doc["figures"])
    said = "refused: prefix cache cold (0% from the cache) vs warm (100% from the cache)"     # as compare says it
    assert said in (tmp_path / "rep" / "gate.md").read_text()
    assert [r["code"] for r in doc["figures"][0]["reasons"]] == ["cache_differs"]


def test_cli_gates_result_files_as_a_ci_job_keeps_them(store, tmp_path):
    base, slow = side(store, "B", 3), side(store, "S", 3, first=4, itl_ms=11.0)
    files = {}
    for rid in (*base, *slow):
        path = tmp_path / f"{rid}.json"
        assert main(["export", rid, "--db", str(store.path), "--requests", "-o", str(path)]) == 0
        files[rid] = str(path)
    code, doc, _ = _gate(tmp_path / "none.db", [files[r] for r in base], [files[r] for r in slow], tmp_path)
    assert code == 10 and doc["counts"]["regressed"] > 0
    assert not (tmp_path / "none.db").exists()          # files only: no database is made


def test_cli_refuses_bad_flags_in_one_line(store, tmp_path, capsys):
    base = side(store, "B", 1)
    assert main(["gate", "--db", str(store.path), "--baseline", base[0], "--candidate", base[0],
                 "--max-runs", "4"]) == 2
    assert main(["gate", "--db", str(store.path), "--baseline", base[0], "--candidate", base[0],
                 "--figures", "ttft:p42"]) == 2
    assert main(["gate", "--db", str(store.path), "--baseline", "nope", "--candidate", base[0]]) == 6
    missing = tmp_path / "missing.db"
    assert main(["gate", "--db", str(missing), "--baseline", "B0", "--candidate", "B0"]) == 6
    assert not missing.exists()                          # reading runs never makes a database
    err = capsys.readouterr().err
    assert "--repeat-until-decided and --max-runs go together" in err and "'ttft:p42' is not a figure" in err


def test_junit_and_json_forms_agree(store):
    base, slow = side(store, "B", 3), side(store, "S", 3, first=4, itl_ms=11.0)
    result = judge((runs(store, base), runs(store, slow)), Policy(), Floors(store))
    doc, suite = result_dict(result), ET.fromstring(junit_xml(result).split("\n", 1)[1])
    assert doc["counts"]["regressed"] == int(suite.get("failures"))
    assert int(suite.get("tests")) == len(doc["figures"]) == len(result.figures)
    assert json.loads(json.dumps(doc)) == doc


# the refusal rule compare applies (judge/fingerprint.refusals) ----------------------------------------
QUIET = {"count": 2, "host_pct": 120.0, "client_pct": 20.0, "server_pct": 60.0, "server_wait_pct": 5.0,
         "server_seen": "local", "other_pct": 10.0, "psi_some_pct": 20.0}
BUSY = {**QUIET, "host_pct": 199.0, "other_pct": 150.0, "psi_some_pct": 90.0}


def set_summary(store: Store, run_ids: list[str], **flat) -> None:
    """Set keys of every stored cell's summary of these runs (as a run that recorded them stores them)."""
    for key, value in flat.items():
        store.db.execute(f"UPDATE cells SET summary_json = json_set(summary_json, '$.{key}', json(?)) "
                         f"WHERE run_id IN ({', '.join('?' * len(run_ids))})", (json.dumps(value), *run_ids))


def cpu(store: Store, run_ids: list[str], shares: dict) -> None:
    set_summary(store, run_ids, **{f"cpu_{k}": v for k, v in shares.items()})


def test_a_busier_candidate_host_refuses_its_regression_and_no_change_as_compare_does(store, tmp_path):
    base, cand = side(store, "B", 3), side(store, "C", 3, first=4, itl_ms=11.0)
    cpu(store, base, QUIET)
    cpu(store, cand, BUSY)
    result = judge((runs(store, base), runs(store, cand)), Policy(), Floors(store))
    assert {f.decision for f in result.figures} == {"refused"} and result.outcome == "refused"
    tpot = next(f for f in result.figures if f.metric.key == "mean_tpot_ms")
    (r,) = [x for x in tpot.reasons if x.refuses]
    assert (tpot.why, r.code, r.side, r.a, r.b) == ("other_work", "other_work", "b", 10.0, 150.0)
    assert tpot.rejected and tpot.p is not None              # tested and rejected, then refused: kept so
    ttft = next(f for f in result.figures if f.metric.key == "median_ttft_ms")
    assert ttft.why == "other_work" and not ttft.rejected    # no difference: checked both ways, refused too
    words = " ".join(" ".join(row) for row in (words_row(f) for f in result.figures))
    assert "refused: a busier host could explain it (other work 10% vs 150% of a core)" in words


def words_row(f) -> list[str]:
    from tokenbench.report.gate import row
    return row(f, "en")


def test_a_busier_baseline_host_cannot_explain_a_slower_candidate(store):
    """The baseline's host was the busier one: a regression of the candidate stands; a figure that did not
    move is refused (a busier host could hide a difference either way)."""
    base, cand = side(store, "B", 3), side(store, "C", 3, first=4, itl_ms=11.0)
    cpu(store, base, BUSY)
    cpu(store, cand, QUIET)
    found = by_figure(judge((runs(store, base), runs(store, cand)), Policy(), Floors(store)))
    assert found[("64/16 c=1", "mean_tpot_ms")] == found[("64/16 c=4", "median_itl_ms")] == "regressed"
    assert found[("64/16 c=1", "median_ttft_ms")] == "refused"


def test_an_unknown_host_is_counted_not_refused(store):
    base, cand = side(store, "B", 3), side(store, "C", 3, first=4, itl_ms=11.0)
    result = judge((runs(store, base), runs(store, cand)), Policy(), Floors(store))
    assert "refused" not in {f.decision for f in result.figures}
    assert all(f.host_unchecked for f in result.figures if f.p is not None)
    from tokenbench.report.gate import summary_lines
    assert f"the host could not be checked for {len(result.figures)} figures" in " ".join(summary_lines(result, "en"))


def test_an_unknown_cache_state_is_decided_by_the_share_the_server_served_from_its_cache(store):
    """Both sides recorded 'unknown' (a --seed run to a server tokenbench did not launch): the baseline's
    server served nothing from its cache (cold), the candidate's 100 % (warm): refused, with the shares."""
    base, cand = side(store, "B", 3), side(store, "C", 3, first=4, cached=True)
    set_summary(store, base + cand, prefix_cache_state="unknown", prefix_cache_reason="no_evidence")
    result = judge((runs(store, base), runs(store, cand)), Policy(), Floors(store))
    f = result.figures[0]
    assert f.why == "cache_differs" and (f.reasons[0].a, f.reasons[0].b) == ("cold", "warm")
    # recorded cold on both: the recorded state stands, whatever the server measured (a prefix workload hits
    # its own prefixes)
    set_summary(store, base + cand, prefix_cache_state="cold", prefix_cache_reason="fresh_prompts")
    result = judge((runs(store, base), runs(store, cand)), Policy(), Floors(store))
    assert "cache_differs" not in {f.why for f in result.figures}


# runs of one launch ---------------------------------------------------------------------------------
def launch(store: Store, run_ids: list[str], launch_id: str) -> None:
    set_summary(store, run_ids, launch_id=launch_id)


def test_runs_of_one_launch_count_once(store):
    """Four runs a side on two launches each: two units a side, the spread at df 2, and the figure's test is
    Student's on the launches' mean logs (scipy)."""
    base, cand = side(store, "B", 4), side(store, "C", 4, first=4, itl_ms=11.0)
    for k, ids in enumerate((base[:2], base[2:], cand[:2], cand[2:])):
        launch(store, ids, f"launch-{k}")
    result = judge((runs(store, base), runs(store, cand)), Policy(), Floors(store))
    tpot = next(f for f in result.figures if f.metric.key == "mean_tpot_ms" and f.cell == "64/16 c=1")
    assert tpot.units == (2, 2) and tpot.noise.df == 2 and tpot.noise.units == 4 and len(tpot.base) == 4
    logs = [[(math.log(a) + math.log(b)) / 2 for a, b in zip(v[::2], v[1::2], strict=True)] for v in (tpot.base, tpot.cand)]
    assert tpot.p == pytest.approx(st.ttest_ind(logs[1], logs[0]).pvalue, rel=1e-6)
    assert "(4 / 2)" in words_row(tpot)[2]


def test_both_sides_on_one_launch_compare_run_by_run(store):
    base, cand = side(store, "B", 3), side(store, "C", 3, first=4, itl_ms=11.0)
    launch(store, base + cand, "the-one")
    tpot = next(f for f in judge((runs(store, base), runs(store, cand)), Policy(), Floors(store)).figures
                if f.metric.key == "mean_tpot_ms")
    assert tpot.units == (3, 3) and tpot.noise.df == 4 and tpot.decision == "regressed"


def test_one_launch_a_side_takes_the_floor(store):
    base, cand = side(store, "B", 3), side(store, "C", 3, first=4, itl_ms=11.0)
    launch(store, base, "base-launch")
    launch(store, cand, "cand-launch")
    result = judge((runs(store, base), runs(store, cand)), Policy(), Floors(store))
    assert {(f.units, f.noise.source) for f in result.figures if f.noise} == {((1, 1), "default")}
    # the floor is learned from runs other than the gate's own: two earlier launches are too few, the
    # baseline's own launch (its runs past the first included) never makes them three; a third earlier one does
    side(store, "E", 2, first=1)
    result = judge((runs(store, base), runs(store, cand)), Policy(), Floors(store))
    assert {f.noise.source for f in result.figures if f.noise} == {"default"}
    side(store, "F", 1, first=3)
    result = judge((runs(store, base), runs(store, cand)), Policy(), Floors(store))
    assert {(f.noise.source, f.noise.units) for f in result.figures if f.noise} == {("learned", 3)}


# the client's delays --------------------------------------------------------------------------------
def moved(store: Store, run_id: str, key: str) -> None:
    mark = {key: {"cause": "host_contention", "bound": 5.0, "tolerance": 0.1}}
    set_summary(store, [run_id], client_marks=mark)


def test_a_run_the_clients_delays_moved_is_left_out_of_that_figure_only(store):
    base, cand = side(store, "B", 4), side(store, "C", 4, first=4, itl_ms=11.0)
    moved(store, cand[0], "mean_tpot_ms")
    result = judge((runs(store, base), runs(store, cand)), Policy(), Floors(store))
    tpot = next(f for f in result.figures if f.metric.key == "mean_tpot_ms" and f.cell == "64/16 c=1")
    assert tpot.decision == "regressed" and tpot.left_out == (0, 1) and len(tpot.cand) == 3
    itl = next(f for f in result.figures if f.metric.key == "mean_itl_ms" and f.cell == "64/16 c=1")
    assert itl.left_out == (0, 0) and len(itl.cand) == 4
    assert "(3; 1 left out ~)" in words_row(tpot)[3]
    every = judge((runs(store, base), runs(store, cand)), Policy(allow_client_lag=True), Floors(store))
    assert {f.left_out for f in every.figures} == {(0, 0)}
    for r in cand:                                      # moved in every candidate run: refused, not judged
        moved(store, r, "mean_tpot_ms")
    tpot = next(f for f in judge((runs(store, base), runs(store, cand)), Policy(), Floors(store)).figures
                if f.metric.key == "mean_tpot_ms")
    assert (tpot.decision, tpot.why, tpot.left_out) == ("refused", "moved", (0, 4))


def test_a_gates_current_look_is_its_latest():
    look = Look(fractions=(1 / 3, 2 / 3, 1.0))
    assert look.now == 1.0 and look.number == 3
    assert Look(fractions=(0.25, 0.5)).now == 0.5
