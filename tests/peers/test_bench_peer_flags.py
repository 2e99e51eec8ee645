"""vLLM's and SGLang's `bench` flags under their own spellings (cli/flags.py PEERS, peers/serve.py),
argparse-style abbreviations and vLLM's underscores, AIPerf's rate-with-cap, and `translate` on the
command line."""

from __future__ import annotations

import asyncio
import json
import shlex

import pytest

from tokenbench.cli import bench, sweep
from tokenbench.cli.main import main
from tokenbench.client.records import RawExchange
from tokenbench.client.request import Prompt, prepare
from tokenbench.errors import UsageError
from tokenbench.load.runner import PhasePlan, run_phase
from tokenbench.spec.bench import Load
from tokenbench.spec.study import StudySpec
from tokenbench.study.plan import plan


def spec(*args: str) -> StudySpec:
    return bench.build_spec(bench.command.make_context("bench", list(args)).params)


def keys(s: StudySpec) -> list[str]:
    return [c.key for c in plan(s).cells]


def test_host_port_backend_endpoint_temperature_and_prefix():
    s = spec("--host", "10.0.0.2", "--port", "9001", "--backend", "openai-chat", "--endpoint", "/v1/chat/completions",
             "--random-input-len", "100", "--random-output-len", "10", "--random-prefix-len", "20",
             "--max-concurrency", "2", "--num-prompts", "4", "--temperature", "0.7", "--top-k", "5")
    assert (s.target.base_url, s.api) == ("http://10.0.0.2:9001", "chat")
    assert (s.workload.kind, s.workload.prefix_len, s.pairs) == ("prefix", 20, [(120, 10)])
    assert s.sampling.body() == {"temperature": 0.7, "top_k": 5}
    assert spec("--port", "30001", "--backend", "sglang", "--input-len", "8", "--output-len", "2",
                "--concurrency", "1").target.base_url == "http://127.0.0.1:30001"
    assert spec("--host", "h", "--backend", "sglang", "--input-len", "8", "--output-len", "2",
                "--concurrency", "1").target.base_url == "http://h:30000"          # SGLang's own backend's port
    with pytest.raises(UsageError, match="two addresses"):     # vLLM lets --base-url win in silence; refused here
        spec("--base-url", "http://b:1", "--host", "h", "--input-len", "8", "--output-len", "2", "--concurrency", "1")


def test_sampling_reaches_every_request_body():
    import json

    from tokenbench.client.request import RequestOptions
    body = json.loads(prepare("http://h:1", "completions", "m", Prompt(token_ids=(1, 2), text=None, input_len=2,
                                                                       output_len=3, expected_prompt_tokens=2), None,
                              RequestOptions(sampling={"temperature": 0.5, "top_p": 0.9})).body)
    assert (body["temperature"], body["top_p"], body["max_tokens"], body["min_tokens"], body["ignore_eos"]) == (
        0.5, 0.9, 3, 3, True)


def test_abbreviations_and_underscores_as_argparse_and_vllm_read_them():
    s = spec("--base-url", "http://x:1", "--random-input", "64", "--random-output", "8", "--num_prompts", "6",
             "--max-conc", "3", "--random-range", "0.25")
    assert (s.pairs, s.requests.num_prompts, s.max_concurrency, s.workload.range_ratio) == ([(64, 8)], 6, 3, 0.25)
    assert keys(s) == ["64:8(r0.25)/c=3"]


def test_an_sglang_backend_gives_the_range_ratio_sglangs_meaning():
    s = spec("--host", "h", "--backend", "sglang", "--random-input-len", "256", "--random-output-len", "32",
             "--random-range-ratio", "0", "--max-concurrency", "16", "--num-prompts", "80")
    assert (s.workload.range_ratio, s.workload.range_ratio_style) == (0.0, "sglang")
    assert keys(s) == ["256:32(sglang-r0)/c=16"]                          # 1..L, not exact
    vllm = spec("--host", "h", "--backend", "vllm", "--random-input-len", "256", "--random-output-len", "32",
                "--random-range-ratio", "0", "--max-concurrency", "16", "--num-prompts", "80")
    assert keys(vllm) == ["256:32/c=16"]                                  # vLLM's 0: exact


@pytest.mark.parametrize("args,needle", [
    (["--backend", "openai-responses"], "completions and chat completions streams only"),
    (["--endpoint", "/v1/responses"], "measures /v1/completions and /v1/chat/completions"),
    (["--backend", "openai", "--endpoint", "/v1/chat/completions"], "sends completions requests but"),
    (["--api", "chat", "--backend", "openai"], "another flag gave chat"),
    (["--dataset-name", "sharegpt", "--dataset-path", "x", "--random-prefix-len", "4"], "applies to the random"),
    (["--dataset-name", "hf"], "--dataset-name: Input should be"),
])
def test_peer_flags_without_a_meaning_here_are_one_line_errors(args, needle):
    base = [] if "sharegpt" in args else ["--input-len", "8", "--output-len", "2"]
    with pytest.raises(UsageError, match=needle):
        spec("--base-url", "http://x:1", "--concurrency", "1", *base, *args)


def test_peer_flags_are_refused_with_resume(tmp_path, capsys):
    assert main(["bench", "--resume", "R", "--port", "8000", "--db", str(tmp_path / "d.db")]) == 2
    assert "--port with --resume" in capsys.readouterr().err


def test_sweep_takes_the_peer_flags_too():
    names = {o for p in sweep.command.params for o in p.opts}
    assert {"--host", "--port", "--backend", "--endpoint", "--random-prefix-len", "--disable-tqdm",
            "--output-file"} <= names


def test_rate_cap_gate_waits_with_the_schedule_queue_keeps_it():
    """Cap 1, arrivals every 10 ns, each request 100 ns long. vLLM's queue keeps every arrival's time (they
    wait for the slot: queue time); AIPerf's gate shifts the schedule by each wait (no catch-up)."""

    class Clock:
        t = 0

        def now_ns(self) -> int:
            return self.t

        async def sleep_until(self, t_ns: int) -> None:
            self.t = max(self.t, t_ns)

    def intended(cap: str) -> list[int]:
        clock = Clock()

        async def send(req, due):
            sent = clock.t
            clock.t += 100
            return RawExchange(intended_ns=due, sent_ns=sent, end_ns=clock.t, status=500)

        reqs = [prepare("http://h:1", "completions", "m", Prompt(token_ids=(5,), text=None, input_len=1, output_len=1,
                                                                 expected_prompt_tokens=1), None) for _ in range(4)]
        load = Load(request_rate=1, max_concurrency=1, rate_cap=cap, num_prompts=4)
        run = asyncio.run(run_phase(send, reqs, PhasePlan("measure", load, offsets=[0, 10, 20, 30]), clock=clock))
        return [r.intended_ns for r in sorted(run.records, key=lambda r: r.index)]

    assert intended("queue") == [0, 10, 20, 30]
    assert intended("gate") == [0, 10, 120, 230]          # each later arrival 10 ns after the slot freed


def test_gate_needs_a_capped_rate():
    with pytest.raises(UsageError, match="rate_cap gate"):
        spec("--base-url", "http://x:1", "--input-len", "8", "--output-len", "2", "--concurrency", "2",
             "--rate-cap", "gate")
    s = spec("--base-url", "http://x:1", "--input-len", "8", "--output-len", "2", "--request-rate", "200",
             "--max-concurrency", "100", "--rate-cap", "gate", "--num-prompts", "500")
    assert keys(s) == ["8:2/rate=200/s,gate=100"]


def test_translate_prints_the_command_and_each_difference(capsys):
    line = ("aiperf profile --model m --url localhost:8000 --endpoint-type chat --streaming --concurrency 100 "
            "--request-rate 200 --request-count 500 --synthetic-input-tokens-mean 500 --output-tokens-mean 200")
    assert main(["translate", "--", *line.split()]) == 0
    out, err = capsys.readouterr()
    assert out.strip().splitlines() == ["tokenbench bench --base-url http://localhost:8000 --model m --api chat "
                                        "--input-len 500 --output-len 200 --num-prompts 500 --request-rate 200 "
                                        "--arrival poisson --max-concurrency 100 --rate-cap gate --warmup-requests 0"]
    assert all(e.startswith("difference (AIPerf 0.13.0): ") for e in err.strip().splitlines())
    assert "only sets max_completion_tokens" in err
    assert main(["translate", "--", "vllm bench serve --dataset-name hf --dataset-path x"]) == 2
    assert "no tokenbench workload" in capsys.readouterr().err
    assert main(["translate", "--", "locust", "-f", "x.py"]) == 2


def test_guidellm_spread_and_bounds_become_clipped_or_uniform_draws():
    from tokenbench.peers.translate import translate
    line = ('guidellm benchmark --target http://localhost:8000 --profile concurrent --rate 4 --max-requests 40 '
            '--data "prompt_tokens=512,prompt_tokens_stdev=128,prompt_tokens_min=256,prompt_tokens_max=1024,'
            'output_tokens=256,output_tokens_min=128,output_tokens_max=512"')
    s = spec(*translate([line]).argv()[1:])
    wl = s.workloads()[0]
    assert (wl.input_len, wl.input_len_stddev, wl.min_input_len, wl.max_input_len) == (512, 128, 256, 1024)
    assert (wl.output_len, wl.output_len_stddev, wl.min_output_len, wl.max_output_len) == (256, None, 128, 512)
    assert keys(s) == ["512:256(sd128,0,in256..1024,out128..512)/c=4"]


def test_vllm_random_images_of_one_size_and_the_old_sonnet_dataset():
    from tokenbench.peers.translate import translate
    mm = ("vllm bench serve --backend openai-chat --model m --endpoint /v1/chat/completions --dataset-name random-mm "
          "--num-prompts 20 --max-concurrency 4 --random-input-len 64 --random-output-len 16 "
          "--random-mm-base-items-per-request 2 --random-mm-bucket-config '{(448, 224, 1): 1.0}'")
    s = spec(*translate([mm]).argv()[1:])
    wl = s.workloads()[0]
    assert (wl.kind, wl.image_count, wl.image_width, wl.image_height, wl.api) == ("image", 2, 224, 448, "chat")
    assert keys(s) == ["image(224x448.png*2):64:16/c=4"]
    with pytest.raises(UsageError, match="only with one image size"):
        translate([mm.replace("{(448, 224, 1): 1.0}", "{(448, 224, 1): 0.5, (720, 1280, 1): 0.5}")])
    sonnet = ("python3 benchmarks/benchmark_serving.py --backend vllm --model m --dataset-name sonnet "
              "--dataset-path benchmarks/sonnet.txt --sonnet-input-len 550 --sonnet-output-len 150 --num-prompts 10")
    s = spec(*translate([sonnet]).argv()[1:])
    assert keys(s) == ["prefix(1x200):550:150/c=10"] and s.warmup_requests == 1


def test_body_fields_without_a_flag_here_pass_on_as_the_extra_body(capsys):
    """A peer's body fields: sampling ones become tokenbench's flags, any other is merged over every body
    as it is (--extra-body); what tokenbench writes itself (model, prompt, ...) is refused in one line."""
    kwargs = '{"extras": {"body": {"temperature": 0.6, "logprobs": 2, "chat_template_kwargs": {"x": 1}}}}'
    line = ["guidellm", "benchmark", "--target", "http://h:8000/v1", "--model", "m",
            "--data", "prompt_tokens=256,output_tokens=128", "--max-requests", "50", "--backend-kwargs", kwargs]
    assert main(["translate", "--", *line]) == 0
    command = shlex.split(capsys.readouterr().out.strip().splitlines()[0])
    assert command[command.index("--temperature") + 1] == "0.6"
    extra = json.loads(command[command.index("--extra-body") + 1])
    assert extra == {"chat_template_kwargs": {"x": 1}, "logprobs": 2}
    StudySpec.model_validate({"target": {"base_url": "http://h:8000", "extra_body": extra}, "pairs": [[8, 2]],
                              "concurrency": [1]})
    line[-1] = '{"extras": {"body": {"model": "other"}}}'
    assert main(["translate", "--", *line]) == 2
    assert "sets model, which tokenbench sets itself" in capsys.readouterr().err
