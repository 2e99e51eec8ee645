"""`tokenbench tune` over real HTTP against the built-in `reference-sglang` profile: the reference server
behind an engine's command line, relaunched per config, whose configs change its load model in a known way
(the batch cap `max-running-requests` and the ITL slope per running request), so each tier's best config and
its capacity are known in closed form (tokenbench.testing.expect).

The design (ITL = 10 + b x running, at most S running, no prefill; 32:16): TPOT's median is the steady
step (the ramp at a cell's ends moves the mean, not the median), each boundary sits 5-20 % from its limit.
Tier slo (ttft mean <= 40, tpot p50 <= 26.5): a small cap queues past S (mean TTFT jumps from 20 to 107 ms
at S + 1; a busy client adds 5-15 ms below it), a big one lets TPOT grow: S=16,b=3 is best at 5 streams, the baseline S=4,b=3 has 4. Tier batch (tpot p50
<= 23.5): the small cap never exceeds 22 ms: S=4,b=3 meets it up to the maximum, 16. The b=6 configs lose
both tiers at once at the warm start, so they are stopped after one cell."""

from __future__ import annotations

import json

import pytest

from tokenbench.cli.main import main
from tokenbench.deploy.profiles import load_profile
from tokenbench.judge import tune as judged
from tokenbench.store.db import Store
from tokenbench.testing import expect as X
from tokenbench.testing.reference_server import ReferenceConfig

pytestmark = pytest.mark.slow   # subprocesses, real servers relaunched per config

SHAPE = X.Shape(prompt_tokens=32, output_tokens=16)
TIERS = {"slo": [X.Slo("ttft", "mean", 40), X.Slo("tpot", "mean", 26.5)], "batch": [X.Slo("tpot", "mean", 23.5)]}
CAPS, SLOPES, MAX = (4, 16), (3, 6), 16
BASE = ["--profile-set", "args.prefill-ms-per-token=0", "--profile-set", "args.max-running-requests=4",
        "--profile-set", "args.itl-per-running-ms=3"]
SEARCH = ["--input-len", "32", "--output-len", "16", "--slo", "ttft:mean<=40,tpot:p50<=26.5",
          "--slo-tier", "batch=tpot:p50<=23.5", "--capacity-max", str(MAX), "--capacity-start", "2",
          "--set", "requests.min=32"]


def name(cap: int, slope: int) -> str:
    return f"max-running-requests={cap},itl-per-running-ms={slope}"


def closed_form() -> dict[str, dict[str, int]]:
    """Per tier, each config's capacity (the TPOT limits are on the p50, which is the steady step the mean
    of the closed form gives)."""
    out: dict[str, dict[str, int]] = {}
    for tier, slos in TIERS.items():
        out[tier] = {name(s, b): X.max_concurrency(ReferenceConfig(ttft_ms=20, itl_ms=10, itl_per_running_ms=b,
                                                                   max_running=s), slos, SHAPE, limit=MAX)
                     for s in CAPS for b in SLOPES}
    return out


def _tuning(db) -> tuple[str, judged.Tuning, Store]:
    store = Store(db)
    run = store.runs()[-1]
    tuning = judged.of_run(run.spec, store.configs(run.id), store.searches(run.id))
    assert tuning is not None
    return run.id, tuning, store


def test_tune_picks_the_closed_form_best_per_tier_stops_losers_early_and_states_the_gain(tmp_path, capsys):
    truth = closed_form()
    assert truth["slo"] == {name(4, 3): 4, name(4, 6): 2, name(16, 3): 5, name(16, 6): 2}
    assert truth["batch"] == {name(4, 3): 16, name(4, 6): 2, name(16, 3): 4, name(16, 6): 2}
    db, out_json, profile_out = tmp_path / "db.sqlite", tmp_path / "tune.json", tmp_path / "best.yaml"
    assert main(["tune", "reference-sglang", *BASE, "--vary", "args.max-running-requests=4,16", "--vary",
                 "args.itl-per-running-ms=3,6", *SEARCH, "--budget-cells", "40", "--sustain-s", "5", "--db", str(db), "--output",
                 str(out_json), "--profile-out", str(profile_out)]) == 0
    printed = capsys.readouterr().out
    run_id, tuning, store = _tuning(db)
    assert tuning.baseline == name(4, 3)                     # the profile as given is one of the varied configs
    for tier, capacities in truth.items():
        r = tuning.ranking(tier)
        best = max(capacities, key=lambda c: capacities[c])
        assert r.best == best, (tier, r.best)
        a = r.of(best).answer
        assert a is not None and a.capacity == capacities[best]
        assert a.lo is not None and a.lo <= capacities[best] and (a.hi is None or capacities[best] < a.hi)
        assert all(s.verdict == "worse" for s in r.standings if s.config != best), r.standings
    slo = tuning.ranking("slo")
    assert slo.gain is not None and slo.gain.holds(5 / 4 - 1) and slo.gain.value == pytest.approx(0.25)
    stopped = [s for s in slo.standings if s.answer is not None and s.answer.reason == "outranked"]
    assert {s.config for s in stopped} >= {name(4, 6)} and all(s.cells <= 2 for s in stopped)
    assert sum(s.cells for s in slo.standings) == len(store.cells(run_id)) <= 40 + 1     # the confirmation's cell
    assert tuning.recommendation is not None and tuning.recommended == name(16, 3)
    assert tuning.confirmed is not None and tuning.confirmed.load == 5 and tuning.confirmed.duration_s == 5
    command = " ".join(tuning.recommendation.argv)
    assert command in printed and command.count("args.max-running-requests=") == 1
    assert "args.max-running-requests=16" in command and "Gain over the baseline" in printed
    assert load_profile(str(profile_out)).args["max-running-requests"] == 16
    assert json.loads(out_json.read_text())["tune"]["recommendation"]["config"] == name(16, 3)

    logs = {p: p.stat().st_mtime_ns for p in (tmp_path / "state").glob("*.log")}
    assert main(["tune", "--resume", run_id, "--db", str(db)]) == 0       # replayed: nothing relaunched, no cell
    assert {p: p.stat().st_mtime_ns for p in (tmp_path / "state").glob("*.log")} == logs
    assert len(store.cells(run_id)) == sum(s.cells for s in slo.standings)
    assert _tuning(db)[1].rankings == tuning.rankings

    assert main(["report", run_id, "--db", str(db), "-o", str(tmp_path / "r"), "--lang", "zh"]) == 0
    page = (tmp_path / "r" / "report.zh.md").read_text()
    assert "调优：满足 SLO 的最佳服务器配置" in page and "提前停止" in page and "推荐" in page
    assert main(["export", run_id, "--db", str(db), "-o", str(tmp_path / "run.json")]) == 0
    exported = json.loads((tmp_path / "run.json").read_text())["tune"]
    assert exported["rankings"][1]["best"] == name(4, 3)


def test_a_config_that_cannot_start_is_kept_with_its_cause_and_the_tune_goes_on(tmp_path, capsys):
    """Three of four configs cannot start: a batch cap of 0 the engine refuses (its log says why, one
    launch), and a context of 8 tokens that cannot hold a 32:8 request (known before any launch). The
    sustain cell asked runs once, on the recommended config, after the ranking."""
    db = tmp_path / "db.sqlite"
    assert main(["tune", "reference-sglang", "--vary", "args.max-running-requests=4,0", "--vary",
                 "args.context-length=131072,8", "--input-len", "32", "--output-len", "8", "--slo",
                 "tpot:p50<=100", "--capacity-max", "2", "--sustain-s", "2", "--db", str(db)]) == 0
    printed = capsys.readouterr().out
    run_id, tuning, store = _tuning(db)
    r = tuning.rankings[0]
    assert tuning.baseline == "default" and r.best == "default"     # the profile as given (S=8) is no varied one
    refused = r.of("max-running-requests=0,context-length=131072")
    assert refused.verdict == "failed" and refused.launch is not None
    assert refused.launch.cause == "rejected_value" and "max_running" in refused.launch.evidence
    for small in ("max-running-requests=4,context-length=8", "max-running-requests=0,context-length=8"):
        f = r.of(small).launch
        assert f is not None and f.cause == "context_too_small" and "needs 40 tokens" in f.evidence
    assert r.of("max-running-requests=4,context-length=131072").verdict in ("best", "indistinguishable")
    sustained = [x for x in store.searches(run_id) if x.record.sustain is not None]
    assert [x.config for x in sustained] == [r.best] and sustained[0].record.sustain.duration_s == 2
    assert "did not start: a value the engine refuses" in printed
    refused_row = next(c for c in store.configs(run_id) if c.name == "max-running-requests=0,context-length=131072")
    assert refused_row.status == "failed" and "launch 1 failed" in refused_row.message   # one launch, not three
    assert "launch 2" not in refused_row.message
