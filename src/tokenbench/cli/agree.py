"""`tokenbench agree`: run another benchmark client (`vllm bench serve`, `python -m sglang.bench_serving`)
and `tokenbench bench` against the same server with the same random workload and concurrency, alternately,
`--repeat` rounds each, and show their mean TTFT, mean TPOT and output throughput side by side with the
relative difference and the round-to-round spread. Why the tools can differ: docs/vllm-cpu.md and
docs/sglang-cpu.md ("Agreement")."""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import click
from rich.markup import escape
from rich.table import Table

from tokenbench.cli import console, options
from tokenbench.cli.agree_peers import PEERS, Cell, Peer, peer_python, run_peer
from tokenbench.client import api
from tokenbench.errors import MeasurementError, TargetError, UsageError
from tokenbench.spec.sweep import SweepSpec
from tokenbench.store import outputs
from tokenbench.study import run as study

# (label, key): tokenbench's summary and both peers' results use the same names
METRICS = (("mean TTFT ms", "mean_ttft_ms"), ("mean TPOT ms", "mean_tpot_ms"),
           ("output tok/s", "output_throughput"))
COUNTS = ("completed", "total_input_tokens", "total_output_tokens")


@dataclass(frozen=True)
class Row:
    concurrency: int
    metric: str
    tokenbench: float | None        # mean over rounds
    peer: float | None
    runs: tuple[float, ...] = ()     # per-round relative differences, in round order
    tokenbench_runs: tuple[float, ...] = ()
    peer_runs: tuple[float, ...] = ()

    @property
    def rel_diff(self) -> float | None:
        """(tokenbench - peer) / peer."""
        if self.tokenbench is None or not self.peer:
            return None
        return (self.tokenbench - self.peer) / self.peer


def spread(values: tuple[float, ...]) -> float | None:
    """Round-to-round spread: (max - min) / mean; None with fewer than 2 rounds."""
    if len(values) < 2 or not sum(values):
        return None
    return (max(values) - min(values)) / (sum(values) / len(values))


def say(message: str) -> None:
    console.err.print(f"[dim]agree:[/] {escape(message)}")


@click.command("agree")
@click.option("--base-url", required=True, help="server root, e.g. http://127.0.0.1:8000")
@click.option("--peer", type=click.Choice(sorted(PEERS)), default="vllm", show_default=True,
              help="the other client: vllm (`vllm bench serve`) or sglang (`python -m sglang.bench_serving`)")
@click.option("--model", default=None, help="served model name (default: the first one /v1/models lists)")
@click.option("--tokenizer", default=None,
              help="tokenizer directory for both clients (default: the model's `root` from /v1/models, if local)")
@click.option("--input-len", type=click.IntRange(min=2), default=128, show_default=True)
@click.option("--output-len", type=click.IntRange(min=2), default=64, show_default=True)
@click.option("--concurrency", default="1,4", show_default=True, help="cells, e.g. 1,2,4,8")
@click.option("--num-prompts", type=click.IntRange(min=1), default=None,
              help="requests per cell, round and tool (default max(16, 4 x concurrency))")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--peer-python", "--vllm-python", "peer_python_", default=None,
              help="a Python with the peer installed (default: the venv of `tokenbench setup vllm-cpu` / "
                   "`setup sglang-cpu`)")
@click.option("--out-dir", default=None, type=click.Path(file_okay=False),
              help="where both tools' results and the table go (default results/agree-<time>)")
@click.option("--tolerance", type=click.FloatRange(min=0), default=0.02, show_default=True,
              help="relative difference marked as disagreement")
@click.option("--repeat", type=click.IntRange(min=1), default=3, show_default=True,
              help="rounds per tool and cell, alternating which tool goes first; values are means over rounds")
@click.option("--check", is_flag=True, help="exit non-zero when any difference exceeds the tolerance")
def command(base_url: str, peer: str, model: str | None, tokenizer: str | None, input_len: int, output_len: int,
            concurrency: str, num_prompts: int | None, seed: int, peer_python_: str | None, out_dir: str | None,
            tolerance: float, repeat: int, check: bool) -> None:
    """Agreement with an engine's own benchmark client on the same server, workload and concurrency."""
    other = PEERS[peer]
    python = peer_python(other, peer_python_)
    model, tokenizer = _model_and_tokenizer(base_url, model, tokenizer)
    out = Path(out_dir or f"results/agree-{time.strftime('%Y%m%d-%H%M%S')}")
    out.mkdir(parents=True, exist_ok=True)
    rows, counts = [], {}
    for conc in options.int_list("--concurrency", concurrency):
        cells = [Cell(base_url, model, tokenizer, input_len, output_len, conc, num_prompts or max(16, 4 * conc),
                      seed + i, i) for i in range(repeat)]
        ours, theirs = run_both(other, python, cells, out)
        counts[conc] = {"tokenbench": _sum_counts(ours), other.name: _sum_counts(theirs)}
        rows += compare(conc, ours, theirs)
    _write(out, other, rows, counts, tolerance)
    console.out.print(table(other, rows, counts, tolerance))
    say(f"wrote {out}/agreement.json and {out}/agreement.md")
    bad = [r for r in rows if r.rel_diff is None or abs(r.rel_diff) > tolerance]
    if check and bad:
        raise MeasurementError(f"{len(bad)} of {len(rows)} numbers differ from {other.label} by more than "
                               f"{tolerance:.0%} (first: {bad[0].metric} at concurrency {bad[0].concurrency})",
                               "see docs/vllm-cpu.md and docs/sglang-cpu.md for the definitions that differ; "
                               "rerun on a quiet machine")


def tokenbench_args(cell: Cell, json_path: Path) -> list[str]:
    """`tokenbench bench` with the same shape; its warmup is `concurrency` requests like the peers'."""
    return ["--base-url", cell.base_url, "--model", cell.model, "--tokenizer", cell.tokenizer,
            "--input-len", str(cell.input_len), "--output-len", str(cell.output_len),
            "--concurrency", str(cell.concurrency), "--num-prompts", str(cell.num_prompts),
            "--warmup-requests", str(cell.concurrency), "--seed", str(cell.seed),
            "--output", str(json_path), "--no-store"]


def run_both(peer: Peer, python: str, cells: list[Cell], out: Path) -> tuple[list[dict], list[dict]]:
    """Each tool once per cell (one cell per round), alternating which goes first."""
    ours, theirs = [], []
    for cell in cells:
        for tool in (peer.name, "tokenbench") if cell.run % 2 == 0 else ("tokenbench", peer.name):
            say(f"concurrency {cell.concurrency}, round {cell.run + 1}/{len(cells)}: {tool} "
                f"({cell.num_prompts} requests)")
            if tool == peer.name:
                theirs.append(run_peer(peer, python, cell, out))
            else:
                ours.append(run_tokenbench(cell, out))
    return ours, theirs


def study_spec(cell: Cell) -> SweepSpec:
    """The study `tokenbench_args` asks for, as the library takes it."""
    return SweepSpec.model_validate({
        "name": "bench", "target": {"base_url": cell.base_url, "model": cell.model},
        "workload": {"tokenizer_path": cell.tokenizer}, "pairs": [(cell.input_len, cell.output_len)],
        "concurrency": [cell.concurrency], "requests": {"num_prompts": cell.num_prompts},
        "warmup_requests": cell.concurrency, "seed": cell.seed})


def run_tokenbench(cell: Cell, out: Path) -> dict:
    outcome = study.measure(study_spec(cell), str(out / f"tokenbench-{cell.tag}.json"))
    return outcome.cells[0]["summary"]


def compare(conc: int, ours: list[dict], theirs: list[dict]) -> list[Row]:
    """One row per metric: each tool's mean over its rounds, its values, and the per-round differences."""
    rows = []
    for label, key in METRICS:
        pairs = [(_num(a.get(key)), _num(b.get(key))) for a, b in zip(ours, theirs, strict=False)]
        runs = tuple((a - b) / b for a, b in pairs if a is not None and b)
        rows.append(Row(conc, label, _mean([a for a, _ in pairs]), _mean([b for _, b in pairs]), runs,
                        tuple(a for a, _ in pairs if a is not None), tuple(b for _, b in pairs if b is not None)))
    return rows


def _num(value) -> float | None:
    return float(value) if isinstance(value, (int, float)) else None


def _mean(values: list[float | None]) -> float | None:
    return None if not values or None in values else sum(values) / len(values)  # type: ignore[arg-type]


def _sum_counts(summaries: list[dict]) -> dict:
    return {k: sum(s.get(k) or 0 for s in summaries) for k in COUNTS}


def table(peer: Peer, rows: list[Row], counts: dict, tolerance: float) -> Table:
    t = Table(title=f"tokenbench vs {peer.label} (difference = (tokenbench - {peer.name}) / {peer.name}; "
                    f"target within {tolerance:.0%}; spread = (max - min) / mean over rounds)")
    for name in ("conc", "metric", "tokenbench", "spread", peer.label, "spread ", "difference", "per round", ""):
        t.add_column(name, justify="left" if name in ("metric", "per round", "") else "right")
    for r in rows:
        mark = "" if r.rel_diff is not None and abs(r.rel_diff) <= tolerance else "outside"
        t.add_row(str(r.concurrency), r.metric, console.fmt(r.tokenbench), _spread(r.tokenbench_runs),
                  console.fmt(r.peer), _spread(r.peer_runs), _pct(r.rel_diff), _per_run(r), mark)
    for conc, both in counts.items():
        t.add_row(str(conc), "requests / in / out tokens", _counts(both["tokenbench"]), "",
                  _counts(both[peer.name]), "", "", "", "")
    return t


def markdown(peer: Peer, rows: list[Row], tolerance: float) -> str:
    lines = [f"| concurrency | metric | tokenbench | spread | {peer.label} | spread | difference | per round |",
             "|---:|---|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        flag = "" if r.rel_diff is not None and abs(r.rel_diff) <= tolerance else " (!)"
        lines.append(f"| {r.concurrency} | {r.metric} | {console.fmt(r.tokenbench)} | {_spread(r.tokenbench_runs)} | "
                     f"{console.fmt(r.peer)} | {_spread(r.peer_runs)} | {_pct(r.rel_diff)}{flag} | {_per_run(r)} |")
    return "\n".join(lines) + "\n"


def _counts(c: dict) -> str:
    return "{completed} / {total_input_tokens} / {total_output_tokens}".format(**c)


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:+.2%}"


def _spread(values: tuple[float, ...]) -> str:
    s = spread(values)
    return "" if s is None else f"{s:.1%}"


def _per_run(r: Row) -> str:
    return " ".join(f"{d:+.1%}" for d in r.runs) if len(r.runs) > 1 else ""


def _write(out: Path, peer: Peer, rows: list[Row], counts: dict, tolerance: float) -> None:
    doc = {"peer": peer.name, "tolerance": tolerance,
           "rows": [{**asdict(r), "rel_diff": r.rel_diff, "tokenbench_spread": spread(r.tokenbench_runs),
                     "peer_spread": spread(r.peer_runs)} for r in rows],
           "counts": {str(k): v for k, v in counts.items()}}
    outputs.write_text(out / "agreement.json", json.dumps(doc, indent=1))
    outputs.write_text(out / "agreement.md", markdown(peer, rows, tolerance))


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
