"""One option set: bench and sweep flags come from the study spec's fields; vLLM spellings are aliases."""

from __future__ import annotations

import pytest

from tokenbench.cli import bench, flags, sweep
from tokenbench.cli.main import main
from tokenbench.errors import UsageError
from tokenbench.load.target import read_api_key
from tokenbench.spec.fields import field_at
from tokenbench.spec.study import StudySpec, Target
from tokenbench.study.plan import plan

URL = ["--base-url", "http://127.0.0.1:1"]


def spellings(command) -> set[str]:
    return {opt for p in command.params for opt in (*p.opts, *p.secondary_opts) if opt.startswith("-")}


def bench_spec(*args: str) -> StudySpec:
    return bench.build_spec(bench.command.make_context("bench", [*URL, *args]).params)


def test_every_bench_option_is_a_sweep_option():
    missing = spellings(bench.command) - spellings(sweep.command)
    assert not missing, f"bench options missing from sweep: {sorted(missing)}"


def test_every_shared_flag_is_a_yaml_key_with_its_help():
    for flag in flags.SHARED + flags.SWEEP_ONLY:
        info = field_at(StudySpec, flag.key)                  # KeyError: a flag without a YAML key
        assert flags.describe(flag)[0] == (flag.help or info.description), flag.key
        assert flags.describe(flag)[0], f"{flag.key} has no description"


def test_flags_set_the_same_keys_as_yaml():
    spec = bench_spec("--input-len", "64", "--output-len", "32", "--concurrency", "1,4", "--vocab-size", "32000",
                      "--tokenizer", "/tok", "--api-key-file", "/k", "--timeout", "30")
    assert (spec.workload.vocab_size, spec.workload.tokenizer_path) == (32000, "/tok")
    assert (spec.target.api_key_file, spec.target.timeout_s) == ("/k", 30.0)
    assert [c.key for c in plan(spec).cells] == ["64:32/c=1", "64:32/c=4"]


def test_vllm_spellings():
    spec = bench_spec("--dataset-name", "random", "--random-input-len", "128", "--random-output-len", "64",
                      "--max-concurrency", "8", "--num-prompts", "32", "--goodput", "ttft:500", "tpot:50",
                      "--label", "mine", "--ignore-eos", "--random-range-ratio", "0", "--num-warmups", "3")
    cells = plan(spec).cells
    assert [(c.key, c.load.num_prompts, c.load.warmup_requests) for c in cells] == [("128:64/c=8", 32, 3)]
    assert (spec.slo.ttft_ms, spec.slo.tpot_ms, spec.name) == (500, 50, "mine")
    inf = plan(bench_spec("--input-len", "8", "--output-len", "4", "--request-rate", "inf", "--max-concurrency", "4"))
    assert [c.key for c in inf.cells] == ["8:4/c=4"]                        # vLLM: inf + cap = closed loop
    rate = plan(bench_spec("--input-len", "8", "--output-len", "4", "--request-rate", "2", "--max-concurrency", "4"))
    assert [(c.key, c.load.max_concurrency) for c in rate.cells] == [("8:4/rate=2/s", 4)]


@pytest.mark.parametrize("args,needle", [
    (["--random-range-ratio", "1", "--concurrency", "1"], "must be below 1 with vLLM's window"),
    (["--concurrency", "4", "--request-rate", "2"], "two kinds of cells here"),
    (["--random", "8"], "is ambiguous"),
    (["--burstiness", "0.5", "--concurrency", "1"], "burstiness shapes Poisson arrivals: it needs a request rate"),
    (["--goodput", "latency:5"], "KEY:MS"),
    (["--request-rate", "inf"], "needs --max-concurrency or --num-prompts"),
    (["--vocab-size", "1"], "--vocab-size: Input should be greater than or equal to 2"),
])
def test_bad_vllm_spellings_are_one_line_errors(args, needle):
    with pytest.raises(UsageError, match=needle):
        bench_spec("--input-len", "8", "--output-len", "4", *args)


def test_openai_api_key_is_read_by_default(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", " sk-test ")
    assert read_api_key(Target(base_url="http://x")) == "sk-test"
    monkeypatch.delenv("OPENAI_API_KEY")
    assert read_api_key(Target(base_url="http://x")) is None


def test_sweep_fields_lists_every_yaml_key_with_its_flag(capsys):
    assert main(["sweep", "--fields"]) == 0
    out = capsys.readouterr().out
    for key, flag in (("workload.vocab_size", "--vocab-size"), ("target.api_key_file", "--api-key-file"),
                      ("requests.num_prompts", "--num-prompts"), ("client.workers", "--workers")):
        line = next(line for line in out.splitlines() if key in line)
        assert flag in line, line


def test_unknown_sweep_key_lists_the_valid_keys(tmp_path, capsys):
    (tmp_path / "s.yaml").write_text("target:\n  base_url: http://x\n  vocab: 5\npairs: [[8, 4]]\nconcurrency: [1]\n")
    assert main(["sweep", str(tmp_path / "s.yaml"), "--db", str(tmp_path / "db")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "s.yaml:3: unknown key 'target.vocab'" in err[0]
    assert "base_url, profile, set, model" in err[0] and "tokenbench sweep --fields" in err[0]


def test_one_cell_key_and_one_flag_rendering():
    """The plan, the importers and the store spell a cell's key one way; a report renders a profile's
    flags as the engine argv does (a `--api-key` secret key is not doubled into `----api-key`)."""
    from tokenbench.deploy.engines import render_args
    from tokenbench.formats.importers import cell_key as imported_key
    from tokenbench.formats.importers import plain_load
    from tokenbench.judge.views import ConfigInfo
    from tokenbench.spec.deploy_profile import Profile
    from tokenbench.spec.server_facts import ServerFacts
    closed = plan(bench_spec("--input-len", "512", "--output-len", "128", "--concurrency", "8"))
    rate = plan(bench_spec("--input-len", "512", "--output-len", "128", "--request-rate", "2"))
    assert [c.key for c in closed.cells + rate.cells] == [imported_key(512, 128, plain_load(8, None)),
                                                          imported_key(512, 128, plain_load(None, 2.0))]
    profile = {"name": "p", "args": {"ctx-size": 4096, "--flash-attn": True, "mlock": False},
               "secret_args": {"--api-key": "KEY"}, "extra_args": ["--x"]}
    typed = Profile.model_validate({**profile, "engine": "llamacpp", "model": {"path": "m.gguf"}})
    info = ConfigInfo(id=1, name="default", overrides={}, profile=typed, facts=ServerFacts(engine="llamacpp"),
                      status="done", message="")
    rendered = " ".join(render_args(profile["args"], profile["secret_args"], profile["extra_args"]))
    assert rendered == "--ctx-size 4096 --flash-attn --api-key ${KEY} --x"
    assert info.flags() == f"profile=p {rendered}"


def test_output_length_mismatch_is_not_blamed_on_bos():
    """A chat prompt counted as expected (template included) with a wrong output length is diagnosed as
    an output problem, from the counts the parser expected."""
    from tokenbench.client.records import RequestRecord
    from tokenbench.metrics.verdict import diagnose_mismatch
    recs = [RequestRecord(index=i, phase="measure", input_len=16, output_len=8, intended_ns=0, sent_ns=0,
                          end_ns=1, token_times_ns=[1] * 6, token_counts=[1] * 6, prompt_tokens=27,
                          expected_prompt_tokens=27, completion_tokens=6, finish_reason="length",
                          length_error="output 6 tokens, asked 8") for i in range(3)]
    text = diagnose_mismatch(recs)
    assert "-2 output tokens" in text and "BOS" not in text


def test_burstiness_is_gamma_gaps_with_the_same_mean_rate():
    """vLLM's --burstiness: gaps ~ Gamma(shape b, mean 1/rate), so CV^2 of the gaps = 1/b."""
    import random

    from tokenbench.load.arrivals import offsets_ns
    spec = bench_spec("--input-len", "8", "--output-len", "4", "--request-rate", "4", "--burstiness", "0.25")
    (cell,) = plan(spec).cells
    assert (cell.key, cell.load.burstiness) == ("8:4/rate=4/s,b=0.25", 0.25)
    for b in (0.25, 1.0, 4.0):
        t = list(offsets_ns(4.0, "poisson", random.Random(7), 20001, burstiness=b))
        gaps = [(y - x) / 1e9 for x, y in zip(t, t[1:], strict=False)]
        mean = sum(gaps) / len(gaps)
        cv2 = sum((g - mean) ** 2 for g in gaps) / len(gaps) / mean ** 2
        assert abs(mean - 0.25) < 0.25 * 0.05 and abs(cv2 - 1 / b) < 0.15 / b, (b, mean, cv2)


def test_agree_measures_exactly_what_its_documented_bench_command_asks(tmp_path):
    """agree calls the study library; the `tokenbench bench` line of each arm (the default, every single
    change toward a peer's request, all of them together) builds the same study, so a user can send what
    the arm sent."""
    from tokenbench.agreement.peers import Cell
    from tokenbench.agreement.variants import DEFAULT, Variant, combined, study_spec, tokenbench_args
    cell = Cell(base_url="http://127.0.0.1:9", model="m", tokenizer="/tok", input_len=128, output_len=32, concurrency=4,
                num_prompts=16, seed=7)
    singles = [Variant("text", "t", {"workload.prompt_as_text": True}, input_len=127),
               Variant("no-min-tokens", "n", {"target.no_min_tokens": True}),
               Variant("final-usage", "f", {"target.final_usage_only": True}),
               Variant("sampling", "s", {"target.extra_body": {"repetition_penalty": 1.0, "logprobs": None}}),
               Variant("warmup", "w", {"warmup_first_prompt": True}, warmup_extra=1),
               Variant("connection", "c", {"target.new_connection_per_request": True, "target.connect_in_ttft": True}),
               Variant("no-monitor", "m", {"monitor_interval_s": 0})]
    for variant in [DEFAULT, *singles, combined(singles)]:
        kw = bench.command.make_context("bench", tokenbench_args(cell, str(tmp_path / "tb.json"), variant)).params
        assert bench.build_spec(kw) == study_spec(cell, variant), variant.name
    both = study_spec(cell, combined(singles))
    assert both.target.extra_body == {"repetition_penalty": 1.0, "logprobs": None} and both.warmup_requests == 5
    assert both.pairs == [(127, 32)] and both.workload.prompt_as_text and both.target.new_connection_per_request
    assert both.monitor_interval_s == 0
