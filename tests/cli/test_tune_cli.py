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


def _dry(capsys, *extra: str) -> str:
    assert main([*BASE, *extra, "--dry-run"]) == 0
    return " ".join(capsys.readouterr().out.split())


def _refused(capsys, *extra: str) -> str:
    assert main([*BASE, *extra, "--dry-run"]) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]
    assert len(err) == 1 and " -- " in err[0]
    return err[0]


def test_a_vary_key_given_again_adds_its_values_whatever_its_spelling(capsys):
    """Issue 42: `--vary k=4 --vary k=8` planned one config (the last); the values of one key are merged in the
    order given, across --vary, its short and full names, and --set vary."""
    out = _dry(capsys, "--vary", "args.n_batch=64", "--vary", "args.n_batch=512", "--vary", "slots=2",
               "--vary", "parallelism.slots=4", "--set", "vary.slots=[8]")
    assert "tune plan: 7 server configs" in out                     # 3 x 2, and the profile as given (default)
    for config in ("slots=8,n_batch=64", "slots=2,n_batch=64", "slots=2,n_batch=512", "slots=4,n_batch=512"):
        assert config in out
    assert "n_batch=64,n_batch" not in out and "slots=2,slots" not in out        # one axis each, not two


@pytest.mark.parametrize(("extra", "says"), [
    (["--vary", "slots=4,4"], "--vary parallelism.slots=4 is given twice (values 4, 4)"),
    (["--vary", "slots=2", "--vary", "slots=4,2"], "--vary parallelism.slots=2 is given twice (values 2, 4, 2)"),
    (["--vary", "slots=2", "--vary", "parallelism.slots=2"], "parallelism.slots=2 is given twice"),
    (["--vary", "slots=8", "--set", "vary.slots=[8]"], "parallelism.slots=8 is given twice"),
    (["--set", "vary.slots=[8, 8]"], "--set vary parallelism.slots=8 is given twice (values 8, 8)"),
])
def test_a_value_given_twice_for_one_key_is_refused_in_one_line(capsys, extra, says):
    assert says in _refused(capsys, *extra)


def test_the_plan_says_its_configs_and_cells_before_it_starts_and_what_a_smaller_budget_leaves(capsys):
    """A 60 x 60 grid planned 86,400 cells without a word: the plan says the configs and the cells they imply
    (the dry run, and a tune before it starts); a budget below that says what a first search gets; one that
    leaves a config no cell is refused in one line."""
    from tokenbench.cli.tune import build_spec, plan_lines
    from tokenbench.errors import UsageError
    grid = ("slots=" + ",".join(str(i) for i in range(1, 61)),
            "args.n_batch=" + ",".join(str(16 * i) for i in range(1, 61)))

    def lines(budget: int | None = None) -> list[str]:
        spec = build_spec("cpu-smollm2-llamacpp", grid, (), [] if budget is None else [f"tune.budget_cells={budget}"],
                          _kw())
        assert spec is not None
        return plan_lines(spec, 3601)
    assert lines() == ["plan: 3,601 server configs (60 x 60 values and the baseline), up to 24 cells a search: "
                       "86,424 cells"]
    [line] = lines(7500)
    assert line.endswith("86,424 cells; the budget is 7,500 cells (--budget-cells): a first search gets at most 2, "
                         "what early stops leave goes to the contenders, and configs the budget does not reach are "
                         "listed as not run")
    with pytest.raises(UsageError) as refused:
        lines(40)
    assert "86,424 cells, and the cell budget is 40: no config would get a cell" in refused.value.message
    assert "--budget-cells 3601 or more" in refused.value.hint
    assert "plan: 2 server configs (2 values), up to 24 cells a search: 48 cells" in _dry(capsys, "--vary", "slots=2,4")
    out = _dry(capsys, "--vary", "slots=1,2,3", "--vary", "args.n_batch=16,64", "--budget-cells", "40")
    assert "plan: 7 server configs (3 x 2 values and the baseline), up to 24 cells a search: 168 cells; the budget is " \
           "40 cells (--budget-cells): a first search gets at most 5" in out


def _kw() -> dict:
    """The options a tune's command line gives with only a profile, lengths and an SLO (click's defaults)."""
    from click.testing import CliRunner  # noqa: F401  (click's own parsing, as main does)

    from tokenbench.cli import tune
    ctx = tune.command.make_context("tune", ["cpu-smollm2-llamacpp", "--input-len", "64", "--output-len", "16",
                                             "--slo", "ttft:p99<=3000"])
    return {k: v for k, v in ctx.params.items() if k not in ("profile", "axes", "profile_sets", "dry_run",
                                                                "overrides", "profile_out")}


@pytest.mark.parametrize(("extra", "says"), [
    (["--vary", "slots=2,4", "--no-confirm", "--sustain-s", "30"], "drop one of --sustain-s and --no-confirm"),
    (["--vary", "slots=2,4", "--sustain-s", "0"], "give --no-confirm to skip the confirmation"),
])
def test_the_confirmation_and_its_length_cannot_contradict(capsys, extra, says):
    assert says in _refused(capsys, *extra)


def test_the_stand_in_engine_takes_its_death_fault_and_refuses_it_half_given(capsys):
    cfg, _, _, death = reference_engine.engine(["--port", "0", "--max-running-requests", "16", "--die-after-s", "20",
                                                "--die-if-running-above", "4"])
    assert death is not None and (death.after_s, death.above) == (20.0, 4) and death.applies(cfg)
    small, _, _, _ = reference_engine.engine(["--max-running-requests", "4"])
    assert not death.applies(small)
    assert reference_engine.engine(["--port", "0"])[3] is None
    never = reference_engine.engine(["--die-after-s", "inf"])
    assert never[3] is not None and not never[3].applies(never[0])
    for argv, says in ((["--die-if-running-above", "4"], "needs --die-after-s"),
                       (["--die-after-s", "0"], "--die-after-s must be greater than 0")):
        with pytest.raises(SystemExit) as exit_:
            reference_engine.engine(argv)
        assert exit_.value.code == 2 and says in capsys.readouterr().err
