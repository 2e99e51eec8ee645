"""Profiles: built-ins by name, files by path, --set overrides, errors that name file:line."""

from __future__ import annotations

import pytest
import yaml

from tokenbench.cli.main import main
from tokenbench.deploy import profiles
from tokenbench.errors import SpecError

from .helpers import write_profile


def test_builtins_are_listed_and_valid():
    names = profiles.builtin_names()
    assert {"cpu-smollm2-llamacpp", "cpu-gemma3-llamacpp"} <= set(names)
    listing = dict(profiles.listing())
    for name in ("cpu-smollm2-llamacpp", "cpu-gemma3-llamacpp"):
        assert listing[name] and not listing[name].startswith("INVALID")


def test_default_profile_is_sized_for_two_cores():
    p = profiles.load_profile("cpu-smollm2-llamacpp")
    assert (p.engine, p.model.bundled, p.runs_in, p.port) == ("llamacpp", "smollm2-135m-instruct", "local", None)
    assert p.parallelism.threads == 1 and 2 <= p.parallelism.slots <= 8
    assert "1 engine thread" in p.notes and "slots" in p.notes


def test_set_overrides_are_validated_like_the_file():
    p = profiles.load_profile("cpu-smollm2-llamacpp", ["parallelism.slots=2", "port=8123", "args.n_batch=256"])
    assert (p.parallelism.slots, p.port, p.args) == (2, 8123, {"n_batch": 256})


def test_env_numbers_become_their_text_and_booleans_are_refused():
    p = profiles.load_profile("cpu-smollm2-llamacpp", ["env.OMP_NUM_THREADS=1", "env.RATIO=0.5", "env.NAME=x"])
    assert {k: p.env[k] for k in ("OMP_NUM_THREADS", "RATIO", "NAME")} == {"OMP_NUM_THREADS": "1", "RATIO": "0.5",
                                                                          "NAME": "x"}
    with pytest.raises(SpecError) as exc:
        profiles.load_profile("cpu-smollm2-llamacpp", ["env.FLAG=true"])
    assert "env" in exc.value.message and "FLAG" in exc.value.message


def test_path_profiles(tmp_path):
    path = write_profile(tmp_path, "mine", code=None)
    assert profiles.load_profile(str(path)).name == "mine"


def test_misspelt_key_names_file_and_line(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("name: x\nengine: llamacpp\nmodel:\n  bundled: smollm2-135m-instruct\nparalelism:\n  slots: 2\n")
    with pytest.raises(SpecError) as exc:
        profiles.load_profile(str(path))
    assert f"{path}:5" in exc.value.message and "paralelism" in exc.value.message


def test_nested_misspelt_key_names_its_line(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("name: x\nengine: llamacpp\nmodel:\n  bundled: smollm2-135m-instruct\n"
                    "readiness:\n  path: /health\n  timout_s: 3\n")
    with pytest.raises(SpecError, match=r"bad.yaml:7: unknown key 'readiness.timout_s'"):
        profiles.load_profile(str(path))


@pytest.mark.parametrize("override, expect", [
    ("parallelism.slots", "has no '='"),
    ("parallelism.slots=zero", "parallelism.slots"),
    ("parallelism.threds=1", "unknown key 'parallelism.threds'"),
    ("engine=tgi", "'engine'"),
    ("name.x=1", "is not a section"),
])
def test_bad_set(override, expect):
    with pytest.raises(SpecError, match=expect):
        profiles.load_profile("cpu-smollm2-llamacpp", [override])


def test_unknown_name_lists_builtins():
    with pytest.raises(SpecError) as exc:
        profiles.load_profile("cpu-smollm3")
    assert "no profile named 'cpu-smollm3'" in exc.value.message and "cpu-smollm2-llamacpp" in exc.value.hint


def test_missing_file():
    with pytest.raises(SpecError, match="not found"):
        profiles.load_profile("/nowhere/p.yaml")


def test_show_round_trips(tmp_path):
    text = profiles.to_yaml(profiles.load_profile("cpu-smollm2-llamacpp", ["parallelism.slots=3"]))
    again = tmp_path / "again.yaml"
    again.write_text(text)
    assert profiles.load_profile(str(again)).parallelism.slots == 3


def test_fields_cover_nested_keys():
    keys = {f.key for f in profiles.fields()}
    assert {"parallelism.slots", "readiness.timeout_s", "model.bundled", "container.image", "args"} <= keys


def test_cli(capsys):
    assert main(["profiles"]) == 0
    out = capsys.readouterr().out
    assert any(line.startswith("cpu-smollm2-llamacpp ") for line in out.splitlines())
    assert main(["profiles", "--show", "cpu-smollm2-llamacpp", "--set", "parallelism.slots=2"]) == 0
    assert yaml.safe_load(capsys.readouterr().out)["parallelism"]["slots"] == 2
    assert main(["profiles", "--fields"]) == 0
    assert "readiness.timeout_s" in capsys.readouterr().out
    assert main(["profiles", "--show", "nope"]) == 2
    assert "no profile named 'nope'" in capsys.readouterr().err
