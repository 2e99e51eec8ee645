"""`tokenbench agree --peer aisbench`: AISBench's configs ask for the cell tokenbench runs, a missing
AISBench says how to install it, and (slow, where AISBench's venv exists) both tools against the
reference server give one table."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.contention import Waited, mean_allowance_ms
from tests.workload.hf_tokenizer import make_reference_tokenizer
from tokenbench.agreement import aisbench as agree_aisbench
from tokenbench.agreement import peers as agree_peers
from tokenbench.cli.main import main
from tokenbench.errors import UsageError
from tokenbench.testing.reference_server import ReferenceConfig, ReferenceProcess

CELL = agree_peers.Cell(base_url="http://127.0.0.1:9", model="gemma3-270m", tokenizer="/models/g", input_len=128,
                        output_len=32, concurrency=4, num_prompts=16, seed=7, run=1)


def _flag(argv: list[str], name: str) -> str:
    return argv[argv.index(name) + 1]


def _configs(cfg: Path) -> tuple[dict, dict]:
    """The two config files as AISBench reads them (Python), with its classes stubbed by name."""
    stub = {name: name for name in ("VLLMCustomAPI", "SyntheticDataset", "GenInferencer", "PromptTemplate",
                                    "ZeroRetriever")}

    def run(path: Path) -> dict:
        text = "\n".join(line for line in path.read_text().splitlines() if not line.startswith("from "))
        names = dict(stub)
        exec(compile(text, str(path), "exec"), names)
        return names
    [model] = run(cfg / "models" / "tb_agree.py")["models"]
    [dataset] = run(cfg / "datasets" / "tb_agree_tokenid.py")["synthetic_datasets"]
    return model, dataset


def test_aisbench_is_asked_for_the_cell_tokenbench_runs(tmp_path):
    argv = agree_aisbench.argv("/venv/bin/python", CELL, tmp_path)
    assert argv[0] == "/venv/bin/python" and _flag(argv, "--mode") == "perf"
    assert _flag(argv, "--num-warmups") == "4"                        # = concurrency, like tokenbench's warmup
    model, dataset = _configs(Path(_flag(argv, "--config-dir")))
    assert (model["url"], model["model"], model["path"]) == ("http://127.0.0.1:9/", "gemma3-270m", "/models/g")
    assert (model["max_out_len"], model["batch_size"], model["stream"], model["retry"]) == (32, 4, True, 1)
    assert model["generation_kwargs"] == {"temperature": 0, "ignore_eos": True}
    cfg = dataset["config"]
    assert (cfg["Type"], cfg["RequestCount"], cfg["TokenIdConfig"]["RequestSize"]) == ("tokenid", 16, 128)
    assert not agree_aisbench.result(CELL, tmp_path).exists()         # nothing until AISBench wrote it


def test_the_newest_output_is_read(tmp_path):
    work = agree_aisbench.work_dir(CELL.tag, tmp_path) / "outputs"
    for stamp in ("20261201_100000", "20261201_110000"):
        folder = work / stamp / "performances" / agree_aisbench.ABBR
        folder.mkdir(parents=True)
        (folder / "synthetic.csv").write_text("Performance Parameters,Stage\n")
    assert agree_aisbench.result(CELL, tmp_path).parts[-4] == "20261201_110000"


def test_without_aisbench_one_line_says_how_to_install_it(tmp_path, monkeypatch):
    monkeypatch.setenv("TOKENBENCH_CACHE", str(tmp_path))
    with pytest.raises(UsageError) as err:
        agree_peers.peer_python(agree_peers.PEERS["aisbench"], None)
    assert "no Python with aisbench" in err.value.message and "\n" not in err.value.message
    assert "pip install ais-bench-benchmark==" in err.value.hint and "pyarrow==21.0.0" in err.value.hint


def reference_tokenizer(folder: Path) -> Path:
    """A Hugging Face tokenizer directory that tokenizes as the reference server does (`wN` is token N), one
    that transformers' AutoTokenizer (AISBench) loads too: both clients' text then has the server's length."""
    make_reference_tokenizer(folder)
    (folder / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "PreTrainedTokenizerFast", "unk_token": "<unk>", "bos_token": "<s>", "eos_token": "</s>"}))
    (folder / "config.json").write_text(json.dumps({"vocab_size": 32000}))
    return folder


@pytest.mark.slow
@pytest.mark.skipif(not agree_aisbench.venv_python().exists(),
                    reason=f"AISBench is not installed ({agree_aisbench.SETUP_HINT})")
def test_agree_runs_aisbench_on_the_same_workload(tmp_path):
    tokenizer = reference_tokenizer(tmp_path / "tokenizer")
    with ReferenceProcess(ReferenceConfig(ttft_ms=50, itl_ms=10, usage_chunk=True)) as ref, \
            Waited(descendants=True) as waited:          # both clients and the server
        code = main(["agree", "--peer", "aisbench", "--base-url", ref.url, "--tokenizer", str(tokenizer),
                     "--input-len", "32", "--output-len", "8", "--concurrency", "2", "--num-prompts", "6",
                     "--repeat", "1", "--out-dir", str(tmp_path / "out")])
    assert code == 0
    tmp_path = tmp_path / "out"
    doc = json.loads((tmp_path / "agreement.json").read_text())
    assert doc["peer"] == "aisbench"
    # as captured: AISBench sends its token ids decoded to text (32 tokens by the server), without min_tokens
    bodies = doc["bodies"]
    assert {"text", "no-min-tokens"} <= {v["name"] for v in bodies["variants"]}
    assert [d["theirs"] for d in bodies["rows"] if d["what"] == "prompt"] == ["text, 32 tokens by the server"]
    assert [d["ours"] for d in bodies["after"] if d["what"] == "prompt"] == ["text, 32 tokens by the server"]
    rows = {r["metric"]: r for r in doc["rows"]}
    assert rows["mean TTFT ms"]["peer"] >= 50 and rows["mean TTFT ms"]["tokenbench"] >= 50
    most = 12 + mean_allowance_ms(waited.ms, 2, 6, gaps=7)       # 10 ms, or what other work made it
    assert 9 <= rows["mean TPOT ms"]["peer"] <= most and 9 <= rows["mean TPOT ms"]["tokenbench"] <= most
    counts = doc["counts"]["2"]
    assert counts["aisbench"]["completed"] == counts["tokenbench"]["completed"] == 6
    assert counts["aisbench"]["total_output_tokens"] == counts["tokenbench"]["total_output_tokens"] == 48
    assert counts["tokenbench"]["total_input_tokens"] == 6 * 32
    assert "| AISBench | spread |" in (tmp_path / "agreement.md").read_text()
