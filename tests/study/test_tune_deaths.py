"""`tokenbench tune` when an engine dies under load, or cannot start at all (issue 42, item 5), over real
processes: the built-in `reference-sglang` profile launches the reference server as an engine whose load model
gives each config's capacity in closed form (tokenbench.testing.expect), and whose `--die-after-s` fault ends
it with an out-of-memory line S seconds after each start (only above a batch cap, `--die-if-running-above`).

Three configs (batch caps 2, 4, 16; ITL 10 + 3 ms per running request; 32:16; TTFT mean <= 40 ms and TPOT
p50 <= 26.5 ms): capacities 2, 4 and 5 streams. The cap of 16 is the best of them and dies 20 s after each
start: whether its search ends before that (then its confirmation on a fresh launch, 25 s long, outlives the 20
s and sees it die) or not (then it dies during its search), it is never recommended, its death is named with
its cause in the console's answer, the JSON result and the report, and it is never launched again after its
death. The cap of 4 is recommended, confirmed on a launch of its own (another server process than its search's).
No assertion reads a clock: the machine's speed decides only where the death falls."""

from __future__ import annotations

import json

import pytest

from tokenbench.cli.main import main
from tokenbench.judge import tune as judged
from tokenbench.store.db import Store
from tokenbench.testing import expect as X
from tokenbench.testing.reference_server import ReferenceConfig

pytestmark = pytest.mark.slow   # subprocesses, real servers launched per config, a 25 s confirmation

SHAPE = X.Shape(prompt_tokens=32, output_tokens=16)
SLOS = [X.Slo("ttft", "mean", 40), X.Slo("tpot", "mean", 26.5)]
CAPS, DIES_ABOVE, MAX = (2, 4, 16), 4, 16
PROFILE = ["--profile-set", "args.prefill-ms-per-token=0", "--profile-set", "args.max-running-requests=4",
           "--profile-set", "args.itl-per-running-ms=3", "--profile-set", "args.die-after-s=20",
           "--profile-set", f"args.die-if-running-above={DIES_ABOVE}"]
SEARCH = ["--input-len", "32", "--output-len", "16", "--slo", "ttft:mean<=40,tpot:p50<=26.5", "--capacity-max",
          str(MAX), "--capacity-start", "2", "--set", "requests.min=32", "--sustain-s", "25"]


def name(cap: int) -> str:
    return f"max-running-requests={cap}"


def capacities() -> dict[str, int]:
    return {name(s): X.max_concurrency(ReferenceConfig(ttft_ms=20, itl_ms=10, itl_per_running_ms=3, max_running=s),
                                       SLOS, SHAPE, limit=MAX) for s in CAPS}


def test_a_config_that_dies_under_load_is_never_recommended_and_the_answer_is_confirmed_on_a_fresh_launch(
        tmp_path, capsys):
    truth = capacities()
    assert truth == {name(2): 2, name(4): 4, name(16): 5}           # the one that dies has the highest
    alive = max((c for c in truth if c != name(16)), key=lambda c: truth[c])
    db, out_json, report = tmp_path / "db.sqlite", tmp_path / "tune.json", tmp_path / "report"
    assert main(["tune", "reference-sglang", *PROFILE, "--vary", "args.max-running-requests=2,4,16", *SEARCH,
                 "--db", str(db), "--output", str(out_json)]) == 0
    printed = " ".join(capsys.readouterr().out.split())
    store = Store(db)
    [run] = store.runs()
    tuning = judged.of_run(run.spec, store.configs(run.id), store.searches(run.id))
    assert tuning is not None
    r = tuning.rankings[0]

    # the dying config: died, never recommended, never launched again after its death, its cause named
    dead = r.of(name(16))
    assert dead.verdict == "died" and tuning.recommended == alive == name(4)
    [death] = dead.deaths
    assert death.failure.cause == "out_of_memory" and "out of memory" in death.failure.evidence
    assert death.failure.exit_code == 1 and death.failure.log and death.launch in (1, 2)
    launches = {c.summary.launch.number for c in store.cells(run.id) if c.config == name(16) and c.summary.launch}
    assert max(launches) == death.launch                       # nothing ran on a launch after the death
    assert all(c.outcome != "confirmed" for c in tuning.confirmations if c.config == name(16))

    # the answer: the closed form's best among the living, confirmed on a launch of its own
    a = r.of(alive).answer
    assert a is not None and a.capacity == truth[alive] and r.best == alive
    confirmation = tuning.confirmed
    assert confirmation is not None and confirmation.outcome == "confirmed" and confirmation.load == truth[alive]
    assert confirmation.duration_s == 25
    [search] = [x.record for x in store.searches(run.id) if x.config == alive]
    assert search.sustain is not None
    cells = [c for c in store.cells(run.id) if c.config == alive]
    sustain = next(c for c in cells if (c.key, c.repeat) == (search.sustain.key, search.sustain.repeat))
    others = {c.summary.launch.id for c in cells if c is not sustain and c.summary.launch}
    assert sustain.summary.launch is not None and sustain.summary.launch.id not in others       # a fresh process
    assert sustain.summary.launch.number > max(c.summary.launch.number for c in cells if c is not sustain)

    # the death is in the console's answer, the JSON result and the report; the answer opens the report
    said = f"{name(16)} died under load" if not death.sustain else f"{name(16)}'s engine died on its confirmation"
    assert said in printed and "out of memory" in printed and f"Recommended: {alive}" in printed
    assert f"Confirmed on a fresh launch: {alive} met tier slo" in printed
    doc = json.loads(out_json.read_text())["tune"]
    [stood] = [s for s in doc["rankings"][0]["standings"] if s["config"] == name(16)]
    assert stood["verdict"] == "died" and stood["deaths"][0]["failure"]["cause"] == "out_of_memory"
    assert doc["recommendation"]["config"] == alive and doc["confirmations"][-1]["outcome"] == "confirmed"
    assert main(["report", run.id, "--db", str(db), "-o", str(report)]) == 0
    page = (report / "report.md").read_text()
    assert page.index(f"Recommended: {alive}") < page.index("| server config | cell |")
    assert "Configs whose engine died under load" in page and "the reference engine's --die-after-s fault" in page
    assert main(["export", run.id, "--db", str(db), "-o", str(tmp_path / "run.json")]) == 0
    [config] = [c for c in json.loads((tmp_path / "run.json").read_text())["configs"] if c["name"] == name(16)]
    assert config["deaths"][0]["launch"] == death.launch


def test_a_profile_whose_engine_cannot_start_is_did_not_start_with_its_cause_each_config_launched_once(
        tmp_path, capsys):
    """A wrong path to the engine's program: every config 'did not start: the engine's command was not found',
    each launched once (a relaunch runs the same missing program), and the tune ends with that cause and the
    profile to fix (exit 4, a deploy error), never 'loosen the SLO'."""
    from tokenbench.deploy.profiles import load_profile, to_yaml
    profile = load_profile("reference-sglang").model_copy(update={"command": ["/nonexistent/bin/python3"]})
    path = tmp_path / "wrong-path.yaml"
    path.write_text(to_yaml(profile))
    db = tmp_path / "db.sqlite"
    assert main(["tune", str(path), "--vary", "args.max-running-requests=2,4,16", "--input-len", "32",
                 "--output-len", "8", "--slo", "tpot:p50<=100", "--db", str(db)]) == 4
    err = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]
    assert len(err) == 1 and "tune: no config started (the engine's command was not found" in err[0]
    assert "/nonexistent/bin/python3" in err[0] and "loosen" not in err[0] and "fix the profile" in err[0]
    store = Store(db)
    [run] = store.runs()
    configs = store.configs(run.id)
    assert len(configs) == 4 and all(c.launch is not None and c.launch.cause == "command_missing" for c in configs)
    assert all("launch 1 failed" in c.message and "launch 2" not in c.message for c in configs)
