"""Every named server kind's recording (tests/fixtures/servers/*.json: headers and SSE bytes captured from a
real server, or built from its documentation, as each file's `source` says) replays through `bench` with
its documented result (`expect`): the exit code, the cell's status, the method the run states, and the
answers that ended early where the length could not be forced. Also: what `bench` does with a model list
that answers HTTP 500, with and without --model."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest

from tests.workload.hf_tokenizer import make_reference_tokenizer
from tokenbench.cli.main import main
from tokenbench.spec.server_kinds import KINDS
from tokenbench.testing.recordings import Answer, Recording
from tokenbench.testing.reference_server import ReferenceConfig, ReferenceProcess

FIXTURES = Path(__file__).parents[1] / "fixtures" / "servers"
DOC = Path(__file__).parents[2] / "docs" / "compatibility.md"
RECORDINGS = sorted(FIXTURES.glob("*.json"))
N = 4


def replayed(path: Path) -> ReferenceProcess:
    return ReferenceProcess(ReferenceConfig(ttft_ms=5, itl_ms=1, recording=str(path)))


def tokenizer(tmp: Path) -> Path:
    """The reference server's tokenizer as a model directory (tokenizer.json and config.json's vocab size)."""
    folder = make_reference_tokenizer(tmp / "tok")
    (folder / "config.json").write_text(json.dumps({"vocab_size": 32000}))
    return folder


def bench(url: str, tmp: Path, *args: str) -> tuple[int, dict | None]:
    out = tmp / "result.json"
    code = main(["bench", "--base-url", url, "--input-len", "32", "--output-len", "16", "--concurrency", "1",
                 "--num-prompts", str(N), "--warmup-requests", "1", "--monitor-interval-s", "0",
                 "--tokenizer-path", str(tokenizer(tmp)), "--db", str(tmp / "r.db"),
                 "--output", str(out), *args])
    return code, json.loads(out.read_text()) if out.exists() else None


def test_every_named_kind_has_a_recording_that_says_where_it_came_from():
    kinds = {Recording.load(p).kind: Recording.load(p).source for p in RECORDINGS}
    assert set(kinds) == set(KINDS)
    assert all(s.startswith(("captured from", "built from the documentation")) for s in kinds.values())


def test_the_compatibility_table_has_one_row_per_kind_with_its_recorded_method():
    rows = {line.split("|")[1].strip().strip("`"): line for line in DOC.read_text().splitlines()
            if line.startswith("| `")}
    assert set(rows) == set(KINDS)
    for path in RECORDINGS:
        rec = Recording.load(path)
        kept, prompts = re.fullmatch(r"output lengths .* by (\S+); prompts as (.+)", rec.expect["method"]).groups()
        assert f"`{kept}`" in rows[rec.kind].split("|")[3] and f"prompts as {prompts}" in rows[rec.kind], rec.kind
        assert ("captured" if rec.source.startswith("captured") else "documentation") in rows[rec.kind].split("|")[5]


@pytest.mark.parametrize("path", RECORDINGS, ids=[p.stem for p in RECORDINGS])
@pytest.mark.slow
@pytest.mark.timeout(120)
def test_a_recording_replays_through_bench_with_its_documented_result(path, tmp_path, capsys):
    rec = Recording.load(path)
    expect = rec.expect
    with replayed(path) as ref:
        code, result = bench(ref.url, tmp_path, "--model", rec.model, *expect["args"])
    console = capsys.readouterr()
    assert code == expect["exit"], console.err[-2000:]
    assert result is not None
    cell = result["cells"][0]
    assert cell["status"] == expect["status"], cell["message"]
    assert result["target"]["method"] == expect["method"]
    assert expect["method"] in console.out + console.err
    caps = result["server_facts"]["capabilities"]
    assert caps["probed"] and caps["requests"] <= 10
    s = cell["summary"]
    assert s.get("ended_early", 0) == expect["ended_early"]
    if expect["ended_early"]:
        assert s["ended_early_out_min"] == s["ended_early_out_max"] == expect["ended_early_out"]
    assert s["usage_source"] == {"server": N}                     # every output length from the server's usage
    assert all(r["completion_tokens"] is not None for r in cell["requests"] if r["phase"] == "measure")


@pytest.fixture
def models_500(tmp_path) -> Path:
    """transformers serve's recording whose /v1/models answers 500 (no hub cache)."""
    rec = Recording.load(FIXTURES / "transformers.json")
    rec = dataclasses.replace(rec, models=Answer(500, {"content-type": "text/plain; charset=utf-8"},
                                                 "Internal Server Error"))
    path = tmp_path / "models-500.json"
    path.write_text(rec.to_json())
    return path


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_a_model_list_that_answers_500_is_no_obstacle_with_model(models_500, tmp_path, capsys):
    with replayed(models_500) as ref:
        code, result = bench(ref.url, tmp_path, "--model", "tiny-llama")
    assert code == 0 and result is not None and result["cells"][0]["status"] == "ok"
    said = capsys.readouterr()
    assert "/v1/models: HTTP 500 (Internal Server Error); model 'tiny-llama' sent as --model gives it" in \
        said.out + said.err


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_without_model_the_error_names_the_status_the_body_and_the_fix(models_500, tmp_path, capsys):
    with replayed(models_500) as ref:
        code, result = bench(ref.url, tmp_path)
    err = capsys.readouterr().err
    assert code != 0 and result is None
    assert "HTTP 500 (Internal Server Error)" in err and "pass --model NAME" in err
    assert len([line for line in err.splitlines() if line.strip()]) == 1
    assert "--api-key-env" in err               # no key was sent: a gateway answers 500 without its key


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_with_a_key_sent_a_failed_model_list_does_not_ask_for_one(models_500, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("SOME_KEY", "sk-test")
    with replayed(models_500) as ref:
        code, _ = bench(ref.url, tmp_path, "--api-key-env", "SOME_KEY")
    err = capsys.readouterr().err
    assert code != 0 and "pass --model NAME" in err and "--api-key-env" not in err


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_an_empty_model_list_without_model_says_so_and_how_to_run_anyway(tmp_path, capsys):
    with replayed(FIXTURES / "transformers.json") as ref:
        code, _ = bench(ref.url, tmp_path)
    err = capsys.readouterr().err
    assert code != 0 and "lists no model (HTTP 200" in err and "pass --model NAME" in err


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_no_probe_takes_the_kind_as_known_and_sends_nothing_before_the_cell(tmp_path, capsys):
    with replayed(FIXTURES / "transformers.json") as ref:
        code, result = bench(ref.url, tmp_path, "--model", "tiny-llama", "--backend", "transformers", "--no-probe")
    assert code == 0 and result is not None
    caps = result["server_facts"]["capabilities"]
    assert not caps["probed"] and caps["requests"] == 0 and caps["kind"] == "transformers"
    assert result["cells"][0]["status"] == "ok"
    said = capsys.readouterr()
    assert "probe skipped (--no-probe): the transformers kind assumed" in said.out + said.err


LISTS = {"404": Answer(404, {"content-type": "application/json"}, '{"detail":"Not Found"}'),
         "html": Answer(200, {"content-type": "text/html"}, "<html><body>a gateway's page</body></html>"),
         "others": Answer(200, {"content-type": "application/json"},
                          '{"object":"list","data":[{"id":"some-cached-model","object":"model"}]}')}


def with_models(tmp: Path, answer: Answer) -> Path:
    rec = dataclasses.replace(Recording.load(FIXTURES / "transformers.json"), models=answer)
    path = tmp / "models.json"
    path.write_text(rec.to_json())
    return path


@pytest.mark.parametrize("kind", sorted(LISTS))
@pytest.mark.slow
@pytest.mark.timeout(120)
def test_any_model_list_is_no_obstacle_with_model_and_without_it_the_error_says_what_came(kind, tmp_path, capsys):
    with replayed(with_models(tmp_path, LISTS[kind])) as ref:
        code, result = bench(ref.url, tmp_path, "--model", "tiny-llama")
        assert code == 0 and result is not None and result["cells"][0]["status"] == "ok"
        said = capsys.readouterr()
        assert "model 'tiny-llama' sent as --model gives it" in said.out + said.err
        code, _ = bench(ref.url, tmp_path / "without")
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    if kind == "others":          # without --model the first model listed is measured
        assert code == 0
        return
    assert code != 0 and len(err) == 1 and "pass --model NAME" in err[0]
    assert "not an OpenAI model list" in err[0] and LISTS[kind].body[:20] in err[0]


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_no_probe_against_a_server_that_refuses_fields_fails_its_cells_saying_to_drop_it(tmp_path, capsys):
    with replayed(FIXTURES / "transformers.json") as ref:
        code, result = bench(ref.url, tmp_path, "--model", "tiny-llama", "--no-probe")
    assert code != 0 and result is not None and result["cells"][0]["status"] == "failed"
    err = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]
    assert len(err) == 1 and "HTTP 422" in err[0] and "drop --no-probe" in err[0] and "--backend" in err[0]
