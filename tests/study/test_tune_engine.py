"""`tokenbench tune` on the real llama.cpp engine (the built-in `cpu-smollm2-llamacpp` profile), kept small:
slots x batch size over 4 configs, each relaunched, under a TTFT limit any machine that runs the engine
meets (the timed run with a tight limit is bench/tune_llamacpp.py). It completes within its cell budget,
names the best config with a verdict against the default one, and the recommended `deploy` command starts."""

from __future__ import annotations

import pytest

from tokenbench.cli.main import main
from tokenbench.judge import tune as judged
from tokenbench.store.db import Store

pytestmark = pytest.mark.engine

DEFAULT = "slots=4,n_batch=2048"          # the profile's 4 slots and llama.cpp's own batch size


def test_tune_on_llamacpp_names_a_best_config_within_budget_and_its_command_starts(tmp_path, capsys):
    db = tmp_path / "db.sqlite"
    assert main(["tune", "cpu-smollm2-llamacpp", "--vary", "slots=2,4", "--vary", "args.n_batch=16,2048",
                 "--baseline", DEFAULT, "--input-len", "32", "--output-len", "8", "--slo", "ttft:p99<=60000",
                 "--capacity-max", "2", "--num-prompts", "4", "--budget-cells", "10", "--sustain-s", "5",
                 "--allow-client-lag",
                 "--db", str(db)]) == 0
    store = Store(db)
    [run] = store.runs()
    tuning = judged.of_run(run.spec, store.configs(run.id), store.searches(run.id))
    assert tuning is not None and tuning.baseline == DEFAULT
    r = tuning.rankings[0]
    assert len(r.standings) == 4 and len(store.cells(run.id)) <= 10 + 1        # the confirmation's cell beside
    assert tuning.confirmed is not None and tuning.confirmed.duration_s == 5
    assert r.best is not None and r.of(r.best).verdict == "best"
    assert r.of(DEFAULT).verdict in ("best", "indistinguishable", "worse") and r.gain is not None
    assert tuning.recommendation is not None
    argv = tuning.recommendation.argv
    assert argv[:4] == ["tokenbench", "deploy", "up", "cpu-smollm2-llamacpp"]
    assert " ".join(argv) in capsys.readouterr().out
    assert main([*argv[1:]]) == 0                         # the printed command, as typed (without `tokenbench`)
    try:
        url = capsys.readouterr().out.strip().splitlines()[-1]
        assert url.startswith("http://127.0.0.1:")
    finally:
        assert main(["deploy", "down", "cpu-smollm2-llamacpp"]) == 0
