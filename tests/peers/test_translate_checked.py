"""translate's differences as checked on each peer's own code, with the version they were checked on
(issue 39): vLLM 0.32's random, random-mm and timed_trace datasets send ignore_eos themselves; SGLang's
--apply-chat-template templates ShareGPT prompts only; options before `--` are tokenbench's; a peer's line
given to `bench` points to translate; an SGLang line run directly states SGLang's default length draw."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from tokenbench.cli.main import main
from tokenbench.errors import UsageError
from tokenbench.peers.translate import translate

LINES: dict[str, dict] = yaml.safe_load((Path(__file__).parent / "peer_lines.yaml").read_text())
CEILING = "sends max_tokens without ignore_eos"


def differences(line: str) -> list[str]:
    return translate([line]).differences


# ---- vLLM: ignore_eos where vllm bench serve sets it itself ----

@pytest.mark.parametrize("dataset", ["random", "random-mm --random-mm-bucket-config '{(64, 64, 1): 1.0}'",
                                     "timed_trace --self-timed --dataset-path t.jsonl"])
def test_vllm_sets_ignore_eos_itself_on_random_random_mm_and_timed_trace(dataset):
    assert not any(CEILING in d for d in differences(f"vllm bench serve --port 8000 --dataset-name {dataset}"))


@pytest.mark.parametrize("dataset", ["sharegpt --dataset-path s.json", "custom --dataset-path p.jsonl",
                                     "prefix_repetition"])
def test_vllm_asks_only_a_ceiling_on_the_other_datasets_unless_ignore_eos(dataset):
    found = [d for d in differences(f"vllm bench serve --port 8000 --dataset-name {dataset}") if CEILING in d]
    assert len(found) == 1 and f"--dataset-name {dataset.split()[0]}" in found[0]
    assert not any(CEILING in d for d in differences(f"vllm bench serve --port 8000 --ignore-eos --dataset-name {dataset}"))


def test_the_older_script_never_sets_ignore_eos_itself():
    found = [d for d in differences("python3 benchmarks/benchmark_serving.py --port 8000 --dataset-name random")
             if CEILING in d]
    assert len(found) == 1 and "never here" in found[0]


def test_no_documented_vllm_random_line_is_said_to_ask_a_ceiling():
    vllm_random = [n for n, x in LINES.items() if "refused" not in x and x["line"].startswith("vllm bench serve")
                   and ("--dataset-name" not in x["line"] or re.search(r"--dataset-name (random|timed_trace)", x["line"]))]
    assert len(vllm_random) >= 4
    assert [n for n in vllm_random if any(CEILING in d for d in differences(LINES[n]["line"]))] == []


def test_every_translated_line_carries_the_version_its_differences_were_checked_on():
    versions = {translate([x["line"]]).checked_on for x in LINES.values() if "refused" not in x}
    assert versions == {"vLLM 0.32.0", "vLLM's last benchmarks/benchmark_serving.py", "SGLang 0.5.23",
                        "AIPerf 0.13.0", "GuideLLM 0.3.1", "GuideLLM 0.6.1", "GuideLLM 0.8.1"}


def test_the_cli_prints_each_difference_with_its_version(capsys):
    assert main(["translate", "--", "vllm", "bench", "serve", "--port", "8000", "--dataset-name", "sharegpt",
                 "--dataset-path", "s.json"]) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert err and all(line.startswith("difference (vLLM 0.32.0): ") for line in err)


# ---- SGLang ----

SGLANG = "python3 -m sglang.bench_serving --port 30000 --num-prompts 8"


def test_apply_chat_template_on_completions_is_the_chat_api_where_the_server_templates():
    eq = translate([f"{SGLANG} --backend sglang-oai --dataset-name sharegpt --dataset-path s.json --apply-chat-template"])
    assert eq.options["--api"] == "chat"
    assert any("templates each ShareGPT prompt on the client" in d and "--api chat" in d for d in eq.differences)
    assert not any("is dropped" in d and "apply-chat-template" in d for d in eq.differences)
    plain = translate([f"{SGLANG} --backend sglang-oai --dataset-name sharegpt --dataset-path s.json"])
    assert plain.options["--api"] == "completions"


def test_apply_chat_template_on_a_chat_backend_templates_twice_and_on_random_does_nothing():
    chat = translate([f"{SGLANG} --backend sglang-oai-chat --dataset-name sharegpt --dataset-path s.json "
                      "--apply-chat-template"])
    assert chat.options["--api"] == "chat" and any("templated once by the server" in d for d in chat.differences)
    for kind in ("random", "random-ids"):
        eq = translate([f"{SGLANG} --backend sglang-oai --dataset-name {kind} --apply-chat-template"])
        assert eq.options["--api"] == "completions"
        assert any(f"for --dataset-name {kind} it changes nothing" in d for d in eq.differences)


def test_sglangs_random_and_random_ids_prompts_are_told_apart():
    random_ = " ".join(differences(f"{SGLANG} --dataset-name random"))
    ids = " ".join(differences(f"{SGLANG} --dataset-name random-ids --tokenize-prompt"))
    assert "ShareGPT prompts' tokens" in random_ and "decoded to text" in random_
    assert "consecutive token ids" in ids and "sent as token ids (--tokenize-prompt)" in ids


def test_an_sglang_line_run_directly_states_sglangs_default_length_draw(capsys):
    args = ["bench", "--backend", "sglang-oai", "--port", "9", "--dataset-name", "random", "--random-input-len",
            "16", "--random-output-len", "4", "--num-prompts", "2", "--max-concurrency", "1", "--no-store"]
    main(args)
    err = capsys.readouterr().err
    assert "draws each random length from 1..L" in err and "this run asks exactly L tokens" in err
    main([*args, "--random-range-ratio", "0"])
    err = capsys.readouterr().err
    assert "1..L" not in err and "SGLang's meaning" in err
    main([*args[:2], "openai", *args[3:]])                            # vLLM's backend: vLLM's defaults, no note
    assert "1..L" not in capsys.readouterr().err


# ---- options before `--` are tokenbench's ----

def test_bench_options_before_the_separator_are_added_to_the_command(capsys):
    assert main(["translate", "--vocab-size", "32000", "--num-prompts=4", "--", "vllm", "bench", "serve", "--port",
                 "8000", "--num-prompts", "100"]) == 0
    [command] = capsys.readouterr().out.strip().splitlines()
    words = command.split()
    assert words[words.index("--vocab-size") + 1] == "32000"
    assert words.count("--num-prompts") == 1 and words[words.index("--num-prompts") + 1] == "4"
    assert "--" not in words


@pytest.mark.parametrize("before,needle", [(["--bogus"], "--bogus before `--` is not a tokenbench option"),
                                           (["--vocab-size"], "--vocab-size before `--` needs a value"),
                                           (["--vocab-size", "abc"], "'abc' is not a valid integer")])
def test_a_bad_option_before_the_separator_is_one_line(capsys, before, needle):
    assert main(["translate", *before, "--", "vllm", "bench", "serve"]) == UsageError.exit_code
    err = capsys.readouterr().err.strip()
    assert needle in err and len(err.splitlines()) == 1


def test_translates_own_options_still_work_before_the_separator(capsys, tmp_path):
    assert main(["translate", "--db", str(tmp_path / "x.db"), "--no-store", "--", "vllm", "bench", "serve"]) == 0
    assert capsys.readouterr().out.strip().endswith(f"--db {tmp_path / 'x.db'} --no-store")


# ---- a peer's line given to bench ----

@pytest.mark.parametrize("args,program", [
    (["serve", "--model", "m", "--port", "8000"], "-- vllm bench serve --model m"),
    (["vllm", "bench", "serve", "--model", "m"], "-- vllm bench serve --model m"),
    (["python3", "-m", "sglang.bench_serving", "--backend", "sglang"], "-- python3 -m sglang.bench_serving --backend"),
    (["--target", "http://localhost:8000", "--data", "prompt_tokens=256,output_tokens=128", "--rate-type", "sweep"],
     "-- guidellm benchmark --target"),
    (["--url", "localhost:8000", "--endpoint-type", "chat", "--streaming"], "-- aiperf profile --url"),
    (["--base-url", "http://x:1", "--input-len", "8", "--output-len", "2", "--concurrency", "1",
      "--trust-remote-code"], "--concurrency 1 -- vllm bench serve --base-url"),   # bench's own: before --
    (["benchmark", "--target", "http://h:1"], "-- guidellm benchmark --target")])
def test_a_peers_line_given_to_bench_points_to_translate(capsys, args, program):
    assert main(["bench", *args]) == UsageError.exit_code
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"run `tokenbench translate {program}" in err


def test_benchs_own_spellings_are_not_taken_for_a_peers(capsys, tmp_path):
    args = ["--base-url", "http://127.0.0.1:9", "--random-input", "8", "--random_output_len", "2", "--num_prompts",
            "2", "--max-conc", "1", "--db", str(tmp_path / "db")]
    main(["bench", *args])
    assert "translate" not in capsys.readouterr().err
