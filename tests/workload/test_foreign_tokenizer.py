"""Every length tokenbench states is the server's: a server that refuses token-id prompts (a strict
OpenAI-style server: the `transformers` recording, replayed by the reference server, which counts a text
prompt's tokens as whitespace words) given a tokenizer that is not its own (`--tokenizer`, tokenizers trained
here: tests/workload/tokenizer_zoo.py) either fails, naming the mismatch, or publishes lengths equal to the
server's own count of every prompt (its send log). Never a silent wrong length."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.workload import tokenizer_zoo as zoo
from tokenbench.cli.main import main
from tokenbench.testing.reference_server import ReferenceConfig, ReferenceProcess

pytestmark = pytest.mark.slow     # a server process per test

STRICT = Path(__file__).parents[1] / "fixtures" / "servers" / "transformers.json"
FOREIGN = [name for name in zoo.BUILT if not name.startswith("word level")]   # every one but the server's own


def saved(name: str, folder: Path) -> Path:
    folder.mkdir(parents=True)
    zoo.built(name).raw.save(str(folder / "tokenizer.json"))
    return folder


def measured(result: dict) -> list[dict]:
    return [r for r in result["cells"][0]["requests"] if r["phase"] == "measure"]


def bench(ref: ReferenceProcess, tmp: Path, tokenizer: Path, api: str) -> tuple[int, dict | None]:
    out = tmp / "result.json"
    code = main(["bench", "--base-url", ref.url, "--model", "tiny-llama", "--api", api, "--tokenizer", str(tokenizer),
                 "--input-len", "32", "--output-len", "16", "--concurrency", "1", "--num-prompts", "8",
                 "--warmup-requests", "0", "--db", str(tmp / "r.db"), "--output", str(out)])
    return code, json.loads(out.read_text()) if out.exists() else None


@pytest.mark.timeout(300)
@pytest.mark.parametrize("api", ["completions", "chat"])
def test_a_tokenizer_not_the_servers_fails_naming_it_or_states_the_servers_count(tmp_path, capsys, api):
    silent = []
    for i, name in enumerate(FOREIGN):
        folder = saved(name, tmp_path / f"tok{i}")
        with ReferenceProcess(ReferenceConfig(ttft_ms=1, itl_ms=1, recording=str(STRICT))) as ref:
            code, result = bench(ref, tmp_path / f"run{i}", folder, api)
        err = capsys.readouterr().err
        if code != 0:
            assert "not the server's tokenizer" in err or "wrong length" in err, (name, err[-800:])
            assert "Traceback" not in err and "drop --prompt-as-text" not in err, (name, err[-800:])
            continue
        assert result is not None                  # the replay's usage is the server's own count of each prompt
        stated = [(r["expected_prompt_tokens"], r["prompt_tokens"]) for r in measured(result)]
        if any(want != got for want, got in stated):
            silent.append((name, stated))
    assert silent == []


def without_stream_usage(tmp: Path) -> Path:
    """The strict server, its streams without usage: no per-request count (its whole answers keep theirs)."""
    rec = json.loads(STRICT.read_text())
    for answer in rec["streams"].values():
        answer["events"] = [e.replace(e[e.index(',"usage"'):e.rindex("}")], "") if '"usage"' in e else e
                            for e in answer["events"]]
    path = tmp / "strict-no-usage.json"
    path.write_text(json.dumps(rec))
    return path


@pytest.mark.timeout(300)
def test_without_a_count_per_request_a_tokenizer_not_the_servers_is_refused_before_measuring(tmp_path, capsys):
    """No usage in the stream: no request can be checked, so the cell's probes (two texts, one of the cell's own
    length, counted by the server) refuse every foreign tokenizer before anything is measured or published."""
    recording = without_stream_usage(tmp_path)
    for i, name in enumerate(FOREIGN):
        folder = saved(name, tmp_path / f"tok{i}")
        with ReferenceProcess(ReferenceConfig(ttft_ms=1, itl_ms=1, recording=str(recording))) as ref:
            code, result = bench(ref, tmp_path / f"run{i}", folder, "completions")
        err = capsys.readouterr().err
        assert code == 3 and "not the server's tokenizer" in err, (name, err[-800:])
        assert result is None or not result["cells"], name


@pytest.mark.timeout(120)
def test_the_servers_own_tokenizer_passes_and_its_lengths_are_the_servers(tmp_path, capsys):
    """The control: the server's own tokenizer (whitespace words) is no mismatch."""
    folder = tmp_path / "own"
    folder.mkdir()
    zoo.built("word level, 32000").raw.save(str(folder / "tokenizer.json"))
    with ReferenceProcess(ReferenceConfig(ttft_ms=1, itl_ms=1, recording=str(STRICT))) as ref:
        code, result = bench(ref, tmp_path, folder, "completions")
    assert code == 0, capsys.readouterr().err[-800:]
    assert result is not None and [r["prompt_tokens"] for r in measured(result)] == [32] * 8
    assert result["cells"][0]["summary"]["total_input_tokens"] == 256


@pytest.mark.timeout(120)
def test_the_first_hint_for_a_strict_server_names_everything_it_needs_and_following_it_once_runs(tmp_path, capsys):
    """A strict server that names no vocabulary, has no /tokenize and refuses token ids: the first error asks
    for the model's directory (vocabulary and text prompts at once); given it, the bench runs."""
    folder = tmp_path / "own"
    folder.mkdir()
    zoo.built("word level, 32000").raw.save(str(folder / "tokenizer.json"))
    args = ["bench", "--model", "tiny-llama", "--input-len", "32", "--output-len", "16", "--concurrency", "1",
            "--num-prompts", "2", "--warmup-requests", "0", "--db", str(tmp_path / "r.db")]
    with ReferenceProcess(ReferenceConfig(ttft_ms=1, itl_ms=1, recording=str(STRICT))) as ref:
        assert main([args[0], "--base-url", ref.url, *args[1:]]) == 3
        [line] = [x for x in capsys.readouterr().err.splitlines() if x.startswith("error:")]
        assert "--tokenizer DIR" in line and "tokenizer.json" in line and "no /tokenize" in line, line
        assert main([args[0], "--base-url", ref.url, *args[1:], "--tokenizer", str(folder)]) == 0
