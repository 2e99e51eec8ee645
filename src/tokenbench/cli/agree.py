"""`tokenbench agree`: run `vllm bench serve` and `tokenbench bench` against the same server with the
same random workload and concurrency, and show their mean TTFT, mean TPOT and output throughput side
by side with the relative difference. Why the two can differ: docs/vllm-cpu.md ("Agreement")."""

from __future__ import annotations

import json
import os
import subprocess
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import click
from rich.markup import escape
from rich.table import Table

from tokenbench.cli import bench, console, options
from tokenbench.client import api
from tokenbench.deploy import vllm_cpu
from tokenbench.errors import MeasurementError, TargetError, UsageError

# (label, tokenbench summary key, vllm bench serve result key); both tools use the same names
METRICS = (("mean TTFT ms", "mean_ttft_ms"), ("mean TPOT ms", "mean_tpot_ms"),
           ("output tok/s", "output_throughput"))
COUNTS = ("completed", "total_input_tokens", "total_output_tokens")


@dataclass(frozen=True)
class Row:
    concurrency: int
    metric: str
    tokenbench: float | None
    vllm: float | None

    @property
    def rel_diff(self) -> float | None:
        """(tokenbench - vllm) / vllm."""
        if self.tokenbench is None or not self.vllm:
            return None
        return (self.tokenbench - self.vllm) / self.vllm


def say(message: str) -> None:
    console.err.print(f"[dim]agree:[/] {escape(message)}")


@click.command("agree")
@click.option("--base-url", required=True, help="server root, e.g. http://127.0.0.1:8000")
@click.option("--model", default=None, help="served model name (default: the first one /v1/models lists)")
@click.option("--tokenizer", default=None,
              help="tokenizer directory for both clients (default: the model's `root` from /v1/models, if local)")
@click.option("--input-len", type=click.IntRange(min=2), default=128, show_default=True)
@click.option("--output-len", type=click.IntRange(min=2), default=64, show_default=True)
@click.option("--concurrency", default="1,4", show_default=True, help="cells, e.g. 1,2,4,8")
@click.option("--num-prompts", type=click.IntRange(min=1), default=None,
              help="requests per cell and per tool (default max(16, 4 x concurrency))")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--vllm-python", default=None,
              help="a Python with vllm installed (default: the venv of `tokenbench setup vllm-cpu`)")
@click.option("--out-dir", default=None, type=click.Path(file_okay=False),
              help="where both tools' JSON and the table go (default results/agree-<time>)")
@click.option("--tolerance", type=click.FloatRange(min=0), default=0.02, show_default=True,
              help="relative difference marked as disagreement")
@click.option("--check", is_flag=True, help="exit non-zero when any difference exceeds the tolerance")
def command(base_url: str, model: str | None, tokenizer: str | None, input_len: int, output_len: int,
            concurrency: str, num_prompts: int | None, seed: int, vllm_python: str | None, out_dir: str | None,
            tolerance: float, check: bool) -> None:
    """Agreement with vLLM's own benchmark client on the same server, workload and concurrency."""
    python = _vllm_python(vllm_python)
    model, tokenizer = _model_and_tokenizer(base_url, model, tokenizer)
    out = Path(out_dir or f"results/agree-{time.strftime('%Y%m%d-%H%M%S')}")
    out.mkdir(parents=True, exist_ok=True)
    rows, counts = [], {}
    for conc in options.int_list("--concurrency", concurrency):
        n = num_prompts or max(16, 4 * conc)
        cell = Cell(base_url, model, tokenizer, input_len, output_len, conc, n, seed)
        say(f"concurrency {conc}: vllm bench serve ({n} requests)")
        theirs = run_vllm(python, cell, out)
        say(f"concurrency {conc}: tokenbench bench ({n} requests)")
        ours = run_tokenbench(cell, out)
        counts[conc] = {"tokenbench": {k: ours.get(k) for k in COUNTS}, "vllm": {k: theirs.get(k) for k in COUNTS}}
        rows += compare(conc, ours, theirs)
    _write(out, rows, counts, tolerance)
    console.out.print(table(rows, counts, tolerance))
    say(f"wrote {out}/agreement.json and {out}/agreement.md")
    bad = [r for r in rows if r.rel_diff is None or abs(r.rel_diff) > tolerance]
    if check and bad:
        raise MeasurementError(f"{len(bad)} of {len(rows)} numbers differ from vllm bench serve by more than "
                               f"{tolerance:.0%} (first: {bad[0].metric} at concurrency {bad[0].concurrency})",
                               "see docs/vllm-cpu.md for the definitions that differ; rerun on a quiet machine")


@dataclass(frozen=True)
class Cell:
    base_url: str
    model: str
    tokenizer: str
    input_len: int
    output_len: int
    concurrency: int
    num_prompts: int
    seed: int


def vllm_argv(python: str, cell: Cell, result_dir: Path) -> list[str]:
    """`vllm bench serve` with the random dataset at exactly input_len/output_len tokens, closed loop."""
    return [python, "-m", "vllm.entrypoints.cli.main", "bench", "serve",
            "--backend", "openai", "--base-url", cell.base_url, "--endpoint", "/v1/completions",
            "--model", cell.model, "--tokenizer", cell.tokenizer,
            "--dataset-name", "random", "--random-input-len", str(cell.input_len),
            "--random-output-len", str(cell.output_len), "--random-range-ratio", "0",
            "--ignore-eos", "--temperature", "0", "--num-prompts", str(cell.num_prompts),
            "--max-concurrency", str(cell.concurrency), "--request-rate", "inf",
            "--num-warmups", str(cell.concurrency), "--seed", str(cell.seed), "--disable-tqdm",
            "--save-result", "--save-detailed", "--result-dir", str(result_dir), "--result-filename", f"vllm-c{cell.concurrency}.json"]


def tokenbench_args(cell: Cell, json_path: Path) -> list[str]:
    """`tokenbench bench` with the same shape; its warmup is `concurrency` requests like vLLM's above."""
    return ["--base-url", cell.base_url, "--model", cell.model, "--tokenizer", cell.tokenizer,
            "--input-len", str(cell.input_len), "--output-len", str(cell.output_len),
            "--concurrency", str(cell.concurrency), "--num-prompts", str(cell.num_prompts),
            "--warmup-requests", str(cell.concurrency), "--seed", str(cell.seed),
            "--output", str(json_path), "--no-store"]


def run_vllm(python: str, cell: Cell, out: Path) -> dict:
    log = out / f"vllm-c{cell.concurrency}.log"
    with open(log, "w") as handle:
        code = subprocess.run(vllm_argv(python, cell, out), stdout=handle, stderr=subprocess.STDOUT,
                              stdin=subprocess.DEVNULL, env={**os.environ, "HF_HUB_OFFLINE": "1"}).returncode
    result = out / f"vllm-c{cell.concurrency}.json"
    if code != 0 or not result.is_file():
        tail = " | ".join(log.read_text().strip().splitlines()[-3:])
        raise MeasurementError(f"vllm bench serve failed (exit {code}) at concurrency {cell.concurrency}: {tail}",
                               f"see {log}")
    return json.loads(result.read_text())


def run_tokenbench(cell: Cell, out: Path) -> dict:
    path = out / f"tokenbench-c{cell.concurrency}.json"
    bench.command.main(tokenbench_args(cell, path), standalone_mode=False)
    return json.loads(path.read_text())["cells"][0]["summary"]


def compare(conc: int, ours: dict, theirs: dict) -> list[Row]:
    return [Row(conc, label, _num(ours.get(key)), _num(theirs.get(key))) for label, key in METRICS]


def _num(value) -> float | None:
    return float(value) if isinstance(value, (int, float)) else None


def table(rows: list[Row], counts: dict, tolerance: float) -> Table:
    t = Table(title=f"tokenbench vs vllm bench serve (difference = (tokenbench - vllm) / vllm; "
                    f"target within {tolerance:.0%})")
    for name in ("conc", "metric", "tokenbench", "vllm bench serve", "difference", ""):
        t.add_column(name, justify="left" if name in ("metric", "") else "right")
    for r in rows:
        diff = r.rel_diff
        mark = "" if diff is not None and abs(diff) <= tolerance else "outside"
        t.add_row(str(r.concurrency), r.metric, console.fmt(r.tokenbench), console.fmt(r.vllm),
                  "-" if diff is None else f"{diff:+.2%}", mark)
    for conc, both in counts.items():
        tb, vl = both["tokenbench"], both["vllm"]
        t.add_row(str(conc), "requests / in / out tokens", f"{tb['completed']} / {tb['total_input_tokens']} / "
                  f"{tb['total_output_tokens']}", f"{vl['completed']} / {vl['total_input_tokens']} / "
                  f"{vl['total_output_tokens']}", "", "")
    return t


def markdown(rows: list[Row], tolerance: float) -> str:
    lines = ["| concurrency | metric | tokenbench | vllm bench serve | difference |", "|---:|---|---:|---:|---:|"]
    for r in rows:
        diff = "-" if r.rel_diff is None else f"{r.rel_diff:+.2%}" + ("" if abs(r.rel_diff) <= tolerance else " (!)")
        lines.append(f"| {r.concurrency} | {r.metric} | {console.fmt(r.tokenbench)} | {console.fmt(r.vllm)} | {diff} |")
    return "\n".join(lines) + "\n"


def _write(out: Path, rows: list[Row], counts: dict, tolerance: float) -> None:
    doc = {"tolerance": tolerance, "rows": [{**asdict(r), "rel_diff": r.rel_diff} for r in rows],
           "counts": {str(k): v for k, v in counts.items()}}
    (out / "agreement.json").write_text(json.dumps(doc, indent=1))
    (out / "agreement.md").write_text(markdown(rows, tolerance))


def _vllm_python(given: str | None) -> str:
    if given:
        return given
    if not vllm_cpu.python().exists():
        raise UsageError("no Python with vllm to run `vllm bench serve`",
                         f"pass --vllm-python PATH, or {vllm_cpu.SETUP_HINT}")
    return str(vllm_cpu.python())


def _model_and_tokenizer(base_url: str, model: str | None, tokenizer: str | None) -> tuple[str, str]:
    entries = api.list_models(base_url, None)
    if not entries:
        raise TargetError(f"{base_url}/v1/models lists no model", "wait until the server has loaded it")
    entry = next((e for e in entries if e.get("id") == model), None) if model else entries[0]
    if entry is None:
        raise UsageError(f"model '{model}' is not served at {base_url}",
                         f"use one of: {', '.join(str(e.get('id')) for e in entries)}")
    tokenizer = tokenizer or entry.get("root")
    if not tokenizer or not Path(tokenizer).is_dir():
        raise UsageError(f"no local tokenizer directory for '{entry.get('id')}' (server root: {entry.get('root')})",
                         "pass --tokenizer DIR (the model's Hugging Face directory)")
    return entry["id"], tokenizer
