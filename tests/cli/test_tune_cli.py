"""`tokenbench tune`'s command line in process, nothing launched: the dry run's plan and cell budget, the
baseline found or named, and bad input refused in one line with its fix. The stand-in engine's command line
(testing/reference_engine.py): SGLang's names and the reference server's fields, an unknown flag refused as
an engine refuses it."""

from __future__ import annotations

import pytest

from tokenbench.cli.main import main
from tokenbench.testing import reference_engine

BASE = ["tune", "cpu-smollm2-llamacpp", "--input-len", "64", "--output-len", "16", "--slo", "ttft:p99<=3000"]


def test_the_dry_run_prints_the_configs_in_order_with_their_commands_and_the_cell_budget(capsys):
    assert main([*BASE, "--vary", "slots=2,4", "--vary", "args.n_batch=64", "--budget-cells", "9", "--dry-run"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert out.index("default (baseline)") < out.index("slots=2,n_batch=64") < out.index("slots=4,n_batch=64")
    assert "tokenbench deploy up cpu-smollm2-llamacpp --set parallelism.slots=2 --set args.n_batch=64" in out
    assert "cell budget: 9 cells in all; a config's first search gets at most 3" in out


def test_the_dry_run_of_a_new_tune_writes_nothing(tmp_path, capsys):
    db = tmp_path / "results" / "db.sqlite"
    assert main([*BASE, "--vary", "slots=2,4", "--db", str(db), "--dry-run"]) == 0
    assert "tune plan: 2 server configs" in " ".join(capsys.readouterr().out.split())
    assert not db.exists() and list(tmp_path.iterdir()) == []


def test_the_varied_config_equal_to_the_profile_is_the_baseline_or_the_one_named(capsys):
    assert main([*BASE, "--vary", "slots=2,4", "--dry-run"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "slots=4 (baseline)" in out and "default" not in out          # the profile's own 4 slots
    assert main([*BASE, "--vary", "slots=2,4", "--baseline", "slots=2", "--dry-run"]) == 0
    assert "slots=2 (baseline)" in " ".join(capsys.readouterr().out.split())


@pytest.mark.parametrize(("extra", "says"), [
    ([], "give the server configs to compare"),
    (["--vary", "slots"], "--vary 'slots' is not KEY=V1,V2,..."),
    (["--vary", "slots=2", "--baseline", "slots=9"], "tune.baseline 'slots=9' is not one of the server configs"),
    (["--vary", "slots=2", "--set", "pairs=[[8, 8]]"], "tune ranks configs on one workload"),
])
def test_bad_input_is_one_line_with_its_fix(capsys, extra, says):
    assert main([*BASE, *extra, "--dry-run"]) != 0
    err = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]
    assert len(err) == 1 and says in err[0] and " -- " in err[0]


def test_the_stand_in_engine_reads_sglang_s_names_and_the_reference_fields():
    cfg, host, port = reference_engine.config(["--model-path", "/m", "--served-model-name", "m", "--host", "h",
                                               "--port", "7", "--max-running-requests", "4", "--tp", "2",
                                               "--itl-per-running-ms", "2.5", "--captured-batch-sizes", "1,2",
                                               "--no-honor-ignore-eos-placeholder"][:-1])
    assert (host, port, cfg.model, cfg.max_running, cfg.itl_per_running_ms) == ("h", 7, "m", 4, 2.5)
    assert cfg.captured_batch_sizes == (1, 2)


@pytest.mark.parametrize(("argv", "says"), [
    (["--no-such-flag", "3"], "unrecognized arguments: --no-such-flag"),
    (["--itl-ms", "fast"], "argument --itl-ms: invalid value"),
])
def test_the_stand_in_engine_refuses_what_it_does_not_know_as_an_engine_does(capsys, argv, says):
    with pytest.raises(SystemExit) as exit_:
        reference_engine.config(["--port", "0", *argv])
    assert exit_.value.code == 2 and says in capsys.readouterr().err
