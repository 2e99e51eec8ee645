"""Why an engine did not start, read from its log (logs/launch.py): real logs of llama.cpp and vLLM that
failed to start here (tests/fixtures/launch/, paths replaced), Ascend lines in the formats CANN prints, and
tokenbench's own errors before a launch. A cause is named only on a line that says it."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tokenbench.logs.launch import CAUSES, LaunchFailure, classify

LOGS = Path(__file__).parents[1] / "fixtures" / "launch"
EXITED = "the engine exited with code 1 before it was ready; last lines of /x.log:"


@pytest.mark.parametrize(("log", "cause", "says"), [
    ("llamacpp-huge-ctx.log", "out_of_memory", "insufficient memory (attempted to allocate"),
    ("llamacpp-unknown-param.log", "unsupported_flag", "has no parameter 'no_such_param'"),
    ("vllm-flag.log", "unsupported_flag", "unrecognized arguments: --no-such-flag 3"),
    ("vllm-ctx.log", "rejected_value", "User-specified max_model_len (1000000) is greater"),
    ("vllm-oom.log", "out_of_memory", "is less than requested memory for kv (400.0 GiB)"),
])
def test_a_real_engine_log_names_its_cause_with_the_line_that_says_it(log, cause, says):
    got = classify((LOGS / log).read_text(), EXITED, "/x.log")
    assert (got.cause, got.exit_code, got.log) == (cause, 1, "/x.log")
    assert says in got.evidence and len(got.evidence) <= 300
    assert not got.retried                       # a relaunch would fail the same way


@pytest.mark.parametrize(("lines", "cause", "code"), [
    ("[rank0]: NPU function error: call aclnnMatmul failed, error code is 207001", "out_of_memory", "207001"),
    ("EL0004: [PID: 31] 2025-09-28-07:22:29.827.496 Failed to allocate memory.", "out_of_memory", "EL0004"),
    ("acl Error, code: 207004 at csrc/camem_allocator.cpp:63", "accelerator_error", "207004"),
    ("RuntimeError: ACL stream synchronize failed, error code:507015", "accelerator_error", "507015"),
    ("ERROR 05-29 EE1001: [PID: 1059] The argument is invalid.\nValueError: something", "accelerator_error", "EE1001"),
    ("RuntimeError: NPU out of memory. Tried to allocate 2.00 GiB\nacl Error, code: 507033", "out_of_memory",
     "507033"),
])
def test_ascend_error_codes_are_read_and_a_memory_code_is_out_of_memory(lines, cause, code):
    got = classify(f"INFO starting\n{lines}\nINFO shutting down", EXITED)
    assert (got.cause, got.code) == (cause, code)
    assert got.evidence in lines.splitlines()


def test_tokenbench_s_own_refusals_before_a_launch_are_causes_too():
    port = classify("", "port 8000 on 127.0.0.1 is already in use: pid 7 (python -m http.server)")
    assert port.cause == "port_in_use" and port.retried        # another port or a later try may start it
    model = classify("", "model file '/m/x.gguf' does not exist")
    assert model.cause == "model_missing" and not model.retried


def test_without_a_telling_line_only_what_was_seen_is_said():
    assert classify("loading\nstill loading", EXITED) == LaunchFailure(cause="exited", exit_code=1, message=EXITED)
    late = classify("loading", "the engine was not ready (/health and /v1/models) after 60 s; last lines of /x:")
    assert (late.cause, late.evidence, late.retried) == ("not_ready", "", True)


@given(st.lists(st.sampled_from(["INFO load model", "WARNING slow tokenizer", "DEBUG step 3", "loaded in 2 s",
                                 "Uvicorn running", "GPU blocks: 1024"]), max_size=30))
def test_ordinary_log_lines_name_no_cause(lines):
    got = classify("\n".join(lines), EXITED)
    assert got.cause == "exited" and got.evidence == "" and got.cause in CAUSES


@pytest.mark.parametrize(("message", "log"), [
    ("cannot start '/opt/llama/bin/llama-server': No such file or directory", ""),
    ("cannot start '/models/engine': Permission denied", ""),              # a path that names a model, too
    ("the engine exited with code 127 before it was ready", "sh: 1: vllm: command not found"),
])
def test_an_engine_whose_command_cannot_run_is_named_so_and_not_relaunched(message, log):
    got = classify(log, message)
    assert got.cause == "command_missing" and not got.retried
    assert got.evidence in (message, log)


def test_a_death_after_the_start_is_read_from_the_end_of_its_log():
    """An engine that served and then died: the cause is the line it wrote as it died (out of memory), kept
    with the launch and cell it died on; no line: what was seen (its exit code)."""
    from tokenbench.logs.launch import Death
    from tokenbench.study.servers import death_cause
    seen = "the engine process exited with code 1; log tail: serving | RuntimeError: out of memory"
    got = classify("INFO serving on :8000\nINFO 200 POST /v1/completions\nRuntimeError: out of memory\n", seen)
    assert (got.cause, got.exit_code, got.evidence) == ("out_of_memory", 1, "RuntimeError: out of memory")
    d = Death(launch=2, cell="32:16/c=8", failure=got)
    assert Death.model_validate_json(d.model_dump_json()) == d
    killed = death_cause("the engine process exited with code -9; log tail: INFO 200 POST /v1/completions", None)
    assert (killed.cause, killed.exit_code, killed.evidence) == ("exited", -9, "")
