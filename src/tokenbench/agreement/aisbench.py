"""AISBench (`ais-bench-benchmark` on PyPI, Huawei's benchmark for MindIE and vLLM-Ascend services) as a
peer of `tokenbench agree`: one perf-mode run per cell, configured by two files it is pointed at
(`--config-dir`), its outputs read back with formats/aisbench.py.

The workload tokenbench sends, as far as AISBench can ask for it: the synthetic `tokenid` dataset
(`input_len` random token ids per prompt, decoded to text: the server re-tokenizes them), `max_out_len`
= output_len with ignore_eos and temperature 0, streaming /v1/completions (VLLMCustomAPI), closed loop at
`batch_size` = concurrency, `concurrency` warmup requests, one attempt per request (`retry=1`: AISBench
counts attempts, 0 sends nothing). Its dataset has no seed."""

from __future__ import annotations

import shutil
from pathlib import Path

from tokenbench.formats import aisbench as import_aisbench
from tokenbench.userdirs import cache_root

NAME = "aisbench"
ABBR = "tb-agree"                 # AISBench's model abbr: the performances/<abbr>/ folder
DATASET = "synthetic"             # the dataset abbr: <dataset>.csv
# where venv_python() looks: the tokenbench cache ($TOKENBENCH_CACHE, else $XDG_CACHE_HOME/tokenbench)
INSTALL = ('V="${TOKENBENCH_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tokenbench}/aisbench-venv"; python3.11 -m venv '
           '"$V" && $V/bin/pip install ais-bench-benchmark==3.1.20260630 && $V/bin/pip install pyarrow==21.0.0')
SETUP_HINT = f"install AISBench: {INSTALL}"

MODEL_CFG = """from ais_bench.benchmark.models import VLLMCustomAPI

models = [dict(
    attr="service", type=VLLMCustomAPI, abbr={abbr!r}, path={tokenizer!r}, model={model!r},
    stream=True, request_rate=0, use_timestamp=False, retry=1, api_key="", url={url!r},
    max_out_len={output_len}, batch_size={concurrency}, trust_remote_code=False,
    generation_kwargs=dict(temperature=0, ignore_eos=True),
)]
"""

DATASET_CFG = """from ais_bench.benchmark.datasets import SyntheticDataset
from ais_bench.benchmark.openicl.icl_inferencer import GenInferencer
from ais_bench.benchmark.openicl.icl_prompt_template import PromptTemplate
from ais_bench.benchmark.openicl.icl_retriever import ZeroRetriever

synthetic_datasets = [dict(
    abbr={dataset!r}, type=SyntheticDataset,
    config={{"Type": "tokenid", "RequestCount": {requests}, "TrustRemoteCode": False,
            "TokenIdConfig": {{"RequestSize": {input_len}, "PrefixLen": 0}}}},
    reader_cfg=dict(input_columns=["question"], output_column="answer"),
    infer_cfg=dict(prompt_template=dict(type=PromptTemplate, template="{{question}}"),
                   retriever=dict(type=ZeroRetriever), inferencer=dict(type=GenInferencer)),
)]
"""


def venv_python() -> Path:
    return cache_root() / "aisbench-venv" / "bin" / "python"


def work_dir(tag: str, out: Path) -> Path:
    return out / f"aisbench-{tag}"


def write_configs(cell, out: Path) -> Path:
    """A fresh work folder for the cell with AISBench's model and dataset configs in it; returns the
    config folder. `cell` is a peers.Cell."""
    work = work_dir(cell.tag, out)
    shutil.rmtree(work, ignore_errors=True)
    cfg = work / "cfg"
    (cfg / "models").mkdir(parents=True)
    (cfg / "datasets").mkdir()
    (cfg / "models" / "tb_agree.py").write_text(MODEL_CFG.format(
        abbr=ABBR, tokenizer=cell.tokenizer, model=cell.model, url=cell.base_url.rstrip("/") + "/",
        output_len=cell.output_len, concurrency=cell.concurrency))
    (cfg / "datasets" / "tb_agree_tokenid.py").write_text(DATASET_CFG.format(
        dataset=DATASET, requests=cell.num_prompts, input_len=cell.input_len))
    return cfg


def argv(python: str, cell, out: Path) -> list[str]:
    """`ais_bench --mode perf` on the configs `write_configs` leaves in the cell's work folder."""
    cfg = write_configs(cell, out)
    return [python, "-c", "import sys; from ais_bench.benchmark.cli.main import main; sys.argv[0] = 'ais_bench'; "
            "sys.exit(main())", "--models", "tb_agree", "--datasets", "tb_agree_tokenid", "--mode", "perf",
            "--config-dir", str(cfg), "--work-dir", str(work_dir(cell.tag, out) / "outputs"),
            "--num-warmups", str(cell.concurrency)]


def result(cell, out: Path) -> Path:
    """The dataset's CSV of the cell's newest AISBench run (a path that does not exist before it ran)."""
    return newest(cell.tag, out)


def newest(tag: str, out: Path) -> Path:
    found = sorted((work_dir(tag, out) / "outputs").glob(f"*/performances/{ABBR}/{DATASET}.csv"))
    return found[-1] if found else work_dir(tag, out) / "outputs" / f"{DATASET}.csv"


def read(path: Path) -> dict:
    """AISBench's figures under tokenbench's names (import_aisbench's mapping)."""
    return import_aisbench.read(path).summary
