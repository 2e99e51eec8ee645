"""Numbers that overflow and characters no value can hold are refused where they are given: one line with
the flag, the cause and the fix (exit 2), never an overflow met later in the run (or "internal error")."""

from __future__ import annotations

import pytest

from tokenbench.cli.main import main
from tokenbench.errors import UsageError
from tokenbench.load.target import read_api_key
from tokenbench.spec.study import Target

BENCH = ["bench", "--base-url", "http://127.0.0.1:1", "--input-len", "8", "--output-len", "4"]


@pytest.mark.parametrize("args,needle", [
    (["--concurrency", "1", "--num-prompts", "100000000000000000000000"], "--num-prompts: 1e+23 is too large"),
    (["--concurrency", "1", "--num-prompts", "1e23"], "'1e23' is not a valid integer"),
    (["--concurrency", "1", "--seed", "9223372036854775808"], "--seed: 9.22e+18 is too large"),
    (["--concurrency", "1", "--timeout", "inf"], "--timeout: Input should be less than or equal to"),
    (["--concurrency", "1", "--timeout", "1e308"], "--timeout: Input should be less than or equal to"),
    (["--concurrency", "1", "--temperature", "inf"], "--temperature: Input should be less than or equal to 100"),
    (["--request-rate", "1e-300"], "--request-rate: a request rate is at least 1e-06"),
    (["--request-rate", "4", "--burstiness", "1e308"], "--burstiness: Input should be less than or equal to"),
    (["--concurrency", "1", "--repeats", "99999999999999999999"], "--repeats"),
    (["--concurrency", "1", "--timeslice-s", "1e-320"], "--timeslice-s"),
    (["--concurrency", "1", "--warmup-requests", "1000000000"],      # named as typed, not as vLLM's --num-warmups
     "--warmup-requests: Input should be less than or equal to 100000"),
    (["--concurrency", "1", "--slo", "ttft=1e400"], "less than or equal to 1000000000"),
])
def test_an_overflowing_number_is_one_line_naming_its_flag(args, needle, capsys):
    assert main([*BENCH, *args]) == 2
    [line] = capsys.readouterr().err.strip().splitlines()
    assert needle in line and (" -- " in line or "--help" in line) and "internal error" not in line, line


@pytest.mark.parametrize("content,needle", [(b"sk-\x00abc\n", "'\\x00' at position 4"), (b"", "is empty"),
                                            (b"\xff\xfe", "is not text"), (b"sk-\x1b[31m\n", "'\\x1b' at position 4")])
def test_an_api_key_file_with_a_control_character_is_refused_naming_it(tmp_path, content, needle):
    path = tmp_path / "key"
    path.write_bytes(content)
    with pytest.raises(UsageError) as exc:
        read_api_key(Target(base_url="http://x", api_key_file=str(path)))
    line = exc.value.one_line()
    assert needle in line and "first line" in line and "/v1" not in line
    assert "abc" not in line                       # the key itself is never printed
