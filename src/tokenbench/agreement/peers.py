"""The other benchmark clients `tokenbench agree` (agreement/agree.py) runs beside tokenbench: how each is started for one cell
and where its result is read back (AISBench: agreement/aisbench.py). Each peer asks for the workload tokenbench sends: random token ids
of exactly input_len / output_len tokens (ignore_eos, temperature 0), closed loop at the cell's concurrency,
`concurrency` warmup requests, the same seed."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tokenbench.agreement import aisbench
from tokenbench.errors import MeasurementError, UsageError
from tokenbench.formats.importers import SGLANG_RENAME
from tokenbench.local_engines import sglang_cpu, vllm_cpu


@dataclass(frozen=True, kw_only=True)
class Cell:
    base_url: str
    model: str
    tokenizer: str
    input_len: int
    output_len: int
    concurrency: int
    num_prompts: int
    seed: int
    run: int = 0
    kind: str = ""          # "capture": a short run through the recording proxy, not a measured round

    @property
    def tag(self) -> str:
        return f"{self.kind}-c{self.concurrency}" if self.kind else f"c{self.concurrency}-r{self.run + 1}"


@dataclass(frozen=True, kw_only=True)
class Peer:
    name: str                                          # vllm | sglang | aisbench
    label: str                                         # how tables name it
    argv: Callable[[str, Cell, Path], list[str]]       # (python, cell, out dir) -> command line
    result: Callable[[Cell, Path], Path]               # where that command leaves its result
    read: Callable[[Path], dict]                       # result file -> dict with the METRICS/COUNTS keys
    default_python: Callable[[], Path]
    hint: str


def vllm_argv(python: str, cell: Cell, result_dir: Path) -> list[str]:
    """`vllm bench serve` with the random dataset at exactly input_len/output_len tokens, closed loop."""
    return [python, "-m", "vllm.entrypoints.cli.main", "bench", "serve",
            "--backend", "openai", "--base-url", cell.base_url, "--endpoint", "/v1/completions",
            "--model", cell.model, "--tokenizer", cell.tokenizer,
            "--dataset-name", "random", "--random-input-len", str(cell.input_len),
            "--random-output-len", str(cell.output_len), "--random-range-ratio", "0",
            "--ignore-eos", "--temperature", "0", "--num-prompts", str(cell.num_prompts),
            "--percentile-metrics", "ttft,tpot,itl,e2el",
            "--max-concurrency", str(cell.concurrency), "--request-rate", "inf",
            "--num-warmups", str(cell.concurrency), "--seed", str(cell.seed), "--disable-tqdm",
            "--save-result", "--save-detailed", "--result-dir", str(result_dir),
            "--result-filename", f"vllm-{cell.tag}.json"]


def sglang_argv(python: str, cell: Cell, result_dir: Path) -> list[str]:
    """`python -m sglang.bench_serving` on the OpenAI completions endpoint tokenbench uses, `random-ids`
    (random token ids; plain `random` samples ShareGPT, a download), range ratio 1 = exact lengths.
    Its prompts travel as text (`--tokenize-prompt` needs SGLang's native /generate), so the server
    re-tokenizes them: the counts row shows what the server was asked."""
    return [python, "-m", "sglang.bench_serving", "--backend", "sglang-oai", "--base-url", cell.base_url,
            "--model", cell.model, "--tokenizer", cell.tokenizer,
            "--dataset-name", "random-ids", "--random-input-len", str(cell.input_len),
            "--random-output-len", str(cell.output_len), "--random-range-ratio", "1.0",
            "--num-prompts", str(cell.num_prompts), "--max-concurrency", str(cell.concurrency),
            "--request-rate", "inf", "--warmup-requests", str(cell.concurrency), "--seed", str(cell.seed),
            "--temperature", "0", "--disable-tqdm", "--output-file", str(result_dir / f"sglang-{cell.tag}.jsonl")]


def _last_json_line(path: Path) -> dict:
    """bench_serving's result (the file's last line), under tokenbench's names (mean_e2e_latency_ms ->
    mean_e2el_ms, as `tokenbench import` reads it)."""
    lines = [line for line in path.read_text().splitlines() if line.strip()]
    return {SGLANG_RENAME.get(k, k): v for k, v in json.loads(lines[-1]).items()}


# benchmark clients by name (the engines' own clients, not engines: any of them runs against any server)
PEERS = {peer.name: peer for peer in (
    Peer(name="vllm", label="vllm bench serve", argv=vllm_argv, result=lambda c, out: out / f"vllm-{c.tag}.json",
         read=lambda p: json.loads(p.read_text()), default_python=vllm_cpu.python, hint=vllm_cpu.SETUP_HINT),
    Peer(name="sglang", label="sglang.bench_serving", argv=sglang_argv,
         result=lambda c, out: out / f"sglang-{c.tag}.jsonl", read=_last_json_line, default_python=sglang_cpu.python,
         hint=sglang_cpu.SETUP_HINT),
    Peer(name=aisbench.NAME, label="AISBench", argv=aisbench.argv, result=aisbench.result, read=aisbench.read,
         default_python=aisbench.venv_python, hint=aisbench.SETUP_HINT))}


def peer_python(peer: Peer, given: str | None) -> str:
    if given:
        return given
    if not peer.default_python().exists():
        raise UsageError(f"no Python with {peer.name} to run {peer.label}",
                         f"pass --peer-python PATH, or {peer.hint}")
    return str(peer.default_python())


def run_client(argv: list[str], log: Path, label: str) -> None:
    """A client's command line, its output to `log`; a failure raises with the log's last lines."""
    with open(log, "w") as handle:
        code = subprocess.run(argv, stdout=handle, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                              env={**os.environ, "HF_HUB_OFFLINE": "1"}).returncode
    if code != 0:
        tail = " | ".join(log.read_text().strip().splitlines()[-3:])
        raise MeasurementError(f"{label} failed (exit {code}): {tail}", f"see {log}")


def run_peer(peer: Peer, python: str, cell: Cell, out: Path) -> dict:
    log, result = out / f"{peer.name}-{cell.tag}.log", peer.result(cell, out)
    result.unlink(missing_ok=True)
    run_client(peer.argv(python, cell, out), log, f"{peer.label} at concurrency {cell.concurrency}")
    result = peer.result(cell, out)                    # again: AISBench names its output folder by the time
    if not result.is_file():
        raise MeasurementError(f"{peer.label} left no result at concurrency {cell.concurrency} ({result})",
                               f"see {log}")
    return peer.read(result)
