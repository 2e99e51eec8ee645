"""`sweep --set KEY=VALUE` means the same with or without a SPEC.yaml (YAML or flags, then --set, then
the flags on top), fails loudly on an unknown key, and a resumed run refuses anything that would change
its stored spec instead of ignoring it."""

from __future__ import annotations

import pytest
import yaml

from tokenbench.cli import sweep
from tokenbench.cli.main import main

URL = "http://127.0.0.1:1"
FLAGS = ["--base-url", URL, "--pairs", "16:4", "--concurrency", "1,2"]
OVERRIDES = [["repeats=2"], ["seed=7", "warmup_requests=0"], ["requests.num_prompts=5"], ["name=mine"],
             ["max_error_rate=0.5"], ["slo={ttft_ms: 500}", "allow_client_lag=true"],
             ["workload.kind=prefix", "workload.prefix_len=8"], ["vary={}", "rates=[2.5]"]]


def spec_of(argv: list[str]):
    """The sweep spec the command line gives (nothing is run or stored)."""
    params = sweep.command.make_context("sweep", list(argv)).params
    return sweep.build_spec(params.pop("spec_file"), list(params.pop("overrides")), params)


def with_set(items: list[str]) -> list[str]:
    return [arg for item in items for arg in ("--set", item)]


@pytest.mark.parametrize("items", OVERRIDES)
def test_set_gives_the_same_spec_with_flags_as_with_a_yaml(tmp_path, items):
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump({"target": {"base_url": URL}, "pairs": [[16, 4]], "concurrency": [1, 2]}))
    plain = spec_of(FLAGS).model_dump()
    by_flags = spec_of(FLAGS + with_set(items)).model_dump()
    by_yaml = spec_of([str(path), *with_set(items)]).model_dump()
    assert by_flags == by_yaml != plain                 # the override took effect, the same way in both


def test_flags_win_over_set_in_both_forms(tmp_path):
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump({"target": {"base_url": URL}, "pairs": [[16, 4]], "concurrency": [1, 2]}))
    for argv in (FLAGS + ["--set", "repeats=2", "--repeats", "3"], [str(path), "--set", "repeats=2", "--repeats", "3"]):
        assert spec_of(argv).repeats == 3


def test_set_alone_can_give_the_target():
    assert spec_of(["--pairs", "16:4", "--concurrency", "1", "--set", f"target.base_url={URL}"]).target.base_url == URL


@pytest.mark.parametrize("item,needle", [
    ("bogus=1", "--set bogus=1: unknown key 'bogus'"),
    ("requests.bogus=1", "--set requests.bogus=1: unknown key 'requests.bogus'"),
    ("repeats=x", "--set repeats=x: 'repeats': Input should be a valid integer"),
])
@pytest.mark.parametrize("with_file", [False, True])
def test_a_bad_set_fails_in_one_line_naming_it(tmp_path, capsys, item, needle, with_file):
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump({"target": {"base_url": URL}, "pairs": [[16, 4]], "concurrency": [1]}))
    head = [str(path)] if with_file else FLAGS
    code = main(["sweep", *head, "--set", item, "--dry-run", "--db", str(tmp_path / "db")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and needle in err[0], err
    assert not (tmp_path / "db").exists()


@pytest.mark.parametrize("extra,named", [(["--set", "repeats=2"], "--set"), (["--concurrency", "3"], "--concurrency"),
                                         (["--input-len", "8", "--output-len", "2"], "--input-len")])
def test_resume_refuses_what_would_change_the_stored_spec(tmp_path, capsys, extra, named):
    code = main(["sweep", "--resume", "R1", *extra, "--db", str(tmp_path / "db")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1
    assert err[0].startswith(f"error: {named} with --resume: a resumed run keeps the spec it was stored with")
    assert f"drop {named} to resume R1" in err[0]
    assert main(["bench", "--resume", "R1", "--concurrency", "3", "--db", str(tmp_path / "db")]) == 2
    assert not (tmp_path / "db").exists()
