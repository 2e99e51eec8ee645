"""Errors point at what the user wrote: a `--set` override is named as the flag and its value, not as
a line of a file the user never wrote (a built-in profile) or of their own file."""

from __future__ import annotations

import pytest

from tokenbench.deploy.profiles import load_profile
from tokenbench.errors import SpecError
from tokenbench.spec.loader import load_file
from tokenbench.spec.study import StudySpec

SPEC = "target: {base_url: 'http://127.0.0.1:1'}\npairs: [[8, 8]]\nconcurrency: [1]\n"


@pytest.mark.parametrize("item, says", [("repeats=abc", "'repeats': Input should be a valid integer"),
                                        ("bogus=1", "unknown key 'bogus'"),
                                        ("slo.ttft=-1", "'slo.ttft'")])
def test_a_sweep_override_error_names_the_flag(tmp_path, item, says):
    path = tmp_path / "sweep.yaml"
    path.write_text(SPEC)
    with pytest.raises(SpecError) as exc:
        load_file(StudySpec, path, [item])
    assert exc.value.message.startswith(f"--set {item}: ") and says in exc.value.message
    assert "sweep.yaml:" not in exc.value.message


def test_a_file_error_still_names_its_line(tmp_path):
    path = tmp_path / "sweep.yaml"
    path.write_text(SPEC + "repeats: abc\n")
    with pytest.raises(SpecError) as exc:
        load_file(StudySpec, path, ["name=x"])
    assert exc.value.message.startswith(f"{path}:4: 'repeats'")


def test_a_deploy_override_typo_names_the_flag_not_the_built_in_file():
    with pytest.raises(SpecError) as exc:
        load_profile("cpu-smollm2-llamacpp", ["parallelism.slotz=2"])
    assert exc.value.message.startswith("--set parallelism.slotz=2: unknown key 'parallelism.slotz'")
    assert "built-in" not in exc.value.message and "slots" in exc.value.hint


def test_a_binary_file_as_spec_is_one_spec_error(tmp_path):
    path = tmp_path / "x.yaml"
    path.write_bytes(bytes(range(256)))
    with pytest.raises(SpecError, match="not a UTF-8 text file"):
        load_file(StudySpec, path)
