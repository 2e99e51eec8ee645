"""--tokenizer DIR: a local Hugging Face tokenizer for servers without /tokenize."""

import json

import pytest
import yaml

from tests.workload.hf_tokenizer import make_reference_tokenizer
from tokenbench.errors import TargetError, UsageError
from tokenbench.spec.bench import Workload
from tokenbench.testing.reference_server import ReferenceConfig, ReferenceProcess
from tokenbench.testing.tokenizer import tokenize
from tokenbench.workload.build import tokenizer_for
from tokenbench.workload.chat import ServerTokenizer
from tokenbench.workload.local_tokenizer import LocalTokenizer


class _T:
    base_url, model, api_key, token_ids = "http://127.0.0.1:9", "m", None, True


def test_local_tokenizer_counts_like_the_reference_server(tmp_path):
    tok = LocalTokenizer(str(make_reference_tokenizer(tmp_path / "tok")))
    text = "w5 w77 hello, world w31999"
    assert tok.encode(text) == [5, 77, 0, 0, 31999] and len(tokenize(text, 32000)) == 5
    assert tok.decode([5, 77]) == "w5 w77" and tok.vocab_size == 32000


def test_tokenizer_for_picks_local_only_where_a_tokenizer_is_needed(tmp_path):
    path = str(make_reference_tokenizer(tmp_path / "tok"))
    chat = Workload(api="chat", input_len=4, output_len=2, tokenizer_path=path)
    assert isinstance(tokenizer_for(_T(), chat), LocalTokenizer)
    ids = Workload(input_len=4, output_len=2, tokenizer_path=path)
    assert isinstance(tokenizer_for(_T(), ids), ServerTokenizer)   # token-id prompts never tokenize
    sharegpt = Workload(kind="sharegpt", dataset_path="x.json", tokenizer_path=path)
    assert isinstance(tokenizer_for(_T(), sharegpt), LocalTokenizer)


@pytest.mark.slow
def test_a_missing_tokenize_endpoint_says_how_to_fix_it_for_this_workload(tmp_path):
    bare = tmp_path / "only-config"
    bare.mkdir()
    with ReferenceProcess(ReferenceConfig(ttft_ms=1, itl_ms=1, tokenize_endpoint=False)) as ref:
        target = _T()
        target.base_url = ref.url
        sharegpt = Workload(kind="sharegpt", dataset_path="x.json", api="completions")
        with pytest.raises(TargetError) as err:
            tokenizer_for(target, sharegpt).encode("hello")
        assert "--tokenizer DIR" in err.value.one_line() and "--api completions" not in err.value.one_line()
        chat = Workload(api="chat", input_len=4, output_len=2)
        with pytest.raises(TargetError) as err:
            tokenizer_for(target, chat).encode("hello")
        assert "--tokenizer DIR" in err.value.one_line() and "--api completions" in err.value.one_line()
        with pytest.raises(TargetError) as err:
            tokenizer_for(target, Workload(kind="sharegpt", dataset_path="x", tokenizer_path=str(bare))).encode("a")
        assert "has no tokenizer.json" in err.value.one_line()


def test_a_bad_tokenizer_file_is_a_one_line_error(tmp_path):
    (tmp_path / "tokenizer.json").write_text("{not json")
    with pytest.raises(UsageError, match="not a Hugging Face tokenizer"):
        LocalTokenizer(str(tmp_path))
    with pytest.raises(UsageError, match="no tokenizer.json"):
        LocalTokenizer(str(tmp_path / "nowhere"))


def _sharegpt(path):
    words = "the quick brown fox jumps over a lazy dog again and again".split()
    rows = [{"conversations": [{"from": "human", "value": " ".join(words[: 3 + i % 9])},
                               {"from": "gpt", "value": " ".join(["ok"] * (4 + i % 5))}]} for i in range(12)]
    path.write_text(json.dumps(rows))
    return path


@pytest.mark.slow
@pytest.mark.parametrize("api", ["chat", "completions"])
def test_sharegpt_bench_and_sweep_without_tokenize(tmp_path, api, capsys):
    """A server without /tokenize: ShareGPT runs in `bench` and in a sweep YAML with --tokenizer DIR, and
    the server's own counts agree with the local tokenizer's (no length mismatch)."""
    from tokenbench.cli.main import main

    tok = str(make_reference_tokenizer(tmp_path / "tok"))
    data = str(_sharegpt(tmp_path / "sg.json"))
    with ReferenceProcess(ReferenceConfig(ttft_ms=2, itl_ms=1, tokenize_endpoint=False)) as ref:
        out = tmp_path / "bench.json"
        code = main(["bench", "--base-url", ref.url, "--dataset-name", "sharegpt", "--dataset-path", data,
                     "--api", api, "--tokenizer", tok, "--concurrency", "2", "--num-prompts", "6",
                     "--no-store", "--output", str(out)])
        assert code == 0, capsys.readouterr().err
        [cell] = json.loads(out.read_text())["cells"]
        assert cell["status"] == "ok" and cell["summary"]["length_mismatches"] == 0
        spec = tmp_path / "study.yaml"
        spec.write_text(yaml.safe_dump({
            "target": {"base_url": ref.url}, "api": api, "concurrency": [2], "requests": {"num_prompts": 6},
            "workload": {"kind": "sharegpt", "dataset_path": data, "tokenizer_path": tok}}))
        code = main(["sweep", str(spec), "--db", str(tmp_path / "db.sqlite"), "--output", str(out)])
        assert code == 0, capsys.readouterr().err
        [cell] = json.loads(out.read_text())["cells"]
        assert cell["status"] == "ok" and cell["summary"]["length_mismatches"] == 0
        assert cell["summary"]["tokenizer"].startswith("local ")


def test_a_vocab_size_and_a_tokenizer_config_that_disagree_are_refused(tmp_path):
    """Two sources of one fact: refused naming both, never one taken in silence."""
    import json

    from tokenbench.errors import UsageError
    from tokenbench.workload.vocab import discover
    (tmp_path / "config.json").write_text(json.dumps({"vocab_size": 32000}))
    assert discover("http://127.0.0.1:9", [], str(tmp_path), 32000).size == 32000
    with pytest.raises(UsageError, match="two vocabularies"):
        discover("http://127.0.0.1:9", [], str(tmp_path), 49152)
