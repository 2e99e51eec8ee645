"""Agreement with another benchmark client (`vllm bench serve`, `python -m sglang.bench_serving`, AISBench): the peer
and tokenbench's study run against the same server with the same random workload and concurrency,
alternately, `repeat` rounds each; each metric's mean over rounds side by side with the relative difference
and the round-to-round spread, written to agreement.json and agreement.md. Why the tools can differ:
docs/vllm-cpu.md and docs/sglang-cpu.md ("Agreement"). How each peer is run: study/agree_peers.py."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from tokenbench.client import api
from tokenbench.errors import MeasurementError, TargetError, UsageError
from tokenbench.report.document import plain
from tokenbench.spec.study import StudySpec
from tokenbench.store import outputs
from tokenbench.study import run as study
from tokenbench.study.agree_peers import PEERS, Cell, Peer, peer_python, run_peer

Say = Callable[[str], None]

# (label, key): tokenbench's summary and both peers' results use the same names
METRICS = (("mean TTFT ms", "mean_ttft_ms"), ("mean TPOT ms", "mean_tpot_ms"),
           ("output tok/s", "output_throughput"))
COUNTS = ("completed", "total_input_tokens", "total_output_tokens")


@dataclass(frozen=True)
class AgreeSpec:
    """What `tokenbench agree` asks for (the CLI's options, parsed)."""
    base_url: str
    peer: str = "vllm"
    model: str | None = None               # default: the first model /v1/models lists
    tokenizer: str | None = None           # default: that model's `root`, if a local directory
    input_len: int = 128
    output_len: int = 64
    concurrency: tuple[int, ...] = (1, 4)
    num_prompts: int | None = None         # per cell, round and tool; default max(16, 4 x concurrency)
    seed: int = 0
    peer_python: str | None = None         # default: the peer's venv from `tokenbench setup`
    tolerance: float = 0.02
    repeat: int = 3


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

    def within(self, tolerance: float) -> bool:
        """A missing value is never a match."""
        return self.rel_diff is not None and abs(self.rel_diff) <= tolerance


@dataclass(frozen=True)
class Agreement:
    peer: Peer
    rows: list[Row]
    counts: dict[int, dict[str, dict]]     # concurrency -> tool -> summed COUNTS
    tolerance: float
    out: Path

    def error(self) -> MeasurementError | None:
        """What `--check` raises: the numbers outside the tolerance, None when all agree."""
        bad = [r for r in self.rows if not r.within(self.tolerance)]
        if not bad:
            return None
        return MeasurementError(f"{len(bad)} of {len(self.rows)} numbers differ from {self.peer.label} by more "
                                f"than {self.tolerance:.0%} (first: {bad[0].metric} at concurrency "
                                f"{bad[0].concurrency})", "see docs/vllm-cpu.md, docs/sglang-cpu.md and "
                                "docs/aisbench.md for the definitions that differ; rerun on a quiet machine")


def quiet(message: str) -> None:
    """The default progress callback: says nothing."""


def run(spec: AgreeSpec, out: Path, say: Say = quiet) -> Agreement:
    """Both tools, `spec.repeat` rounds per concurrency; writes agreement.json and agreement.md into `out`."""
    other = PEERS[spec.peer]
    python = peer_python(other, spec.peer_python)
    model, tokenizer = model_and_tokenizer(spec.base_url, spec.model, spec.tokenizer)
    out.mkdir(parents=True, exist_ok=True)
    rows: list[Row] = []
    counts: dict[int, dict[str, dict]] = {}
    for conc in spec.concurrency:
        cells = [Cell(spec.base_url, model, tokenizer, spec.input_len, spec.output_len, conc,
                      spec.num_prompts or max(16, 4 * conc), spec.seed + i, i) for i in range(spec.repeat)]
        ours, theirs = run_both(other, python, cells, out, say)
        counts[conc] = {"tokenbench": _sum_counts(ours), other.name: _sum_counts(theirs)}
        rows += compare(conc, ours, theirs)
    agreement = Agreement(other, rows, counts, spec.tolerance, out)
    write(agreement)
    return agreement


def tokenbench_args(cell: Cell, json_path: Path) -> list[str]:
    """`tokenbench bench` with the same shape; its warmup is `concurrency` requests like the peers'. It asks
    for the usage at the end only, as the peers do, so the server does the same work for both tools."""
    return ["--base-url", cell.base_url, "--model", cell.model, "--tokenizer", cell.tokenizer,
            "--input-len", str(cell.input_len), "--output-len", str(cell.output_len),
            "--concurrency", str(cell.concurrency), "--num-prompts", str(cell.num_prompts),
            "--warmup-requests", str(cell.concurrency), "--seed", str(cell.seed),
            "--final-usage-only", "--output", str(json_path), "--no-store"]


def run_both(peer: Peer, python: str, cells: list[Cell], out: Path, say: Say = quiet) -> tuple[list[dict], list[dict]]:
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


def study_spec(cell: Cell) -> StudySpec:
    """The study `tokenbench_args` asks for, as the library takes it."""
    return StudySpec.model_validate({
        "name": "bench", "target": {"base_url": cell.base_url, "model": cell.model, "final_usage_only": True},
        "workload": {"tokenizer_path": cell.tokenizer}, "pairs": [(cell.input_len, cell.output_len)],
        "concurrency": [cell.concurrency], "requests": {"num_prompts": cell.num_prompts},
        "warmup_requests": cell.concurrency, "seed": cell.seed})


def run_tokenbench(cell: Cell, out: Path) -> dict:
    outcome = study.measure(study_spec(cell), str(out / f"tokenbench-{cell.tag}.json"), records=False)
    study.check(outcome, "bench")
    return outcome.cells[0].summary.to_dict()       # vLLM's names, as the peers' results use them


def compare(conc: int, ours: list[dict], theirs: list[dict]) -> list[Row]:
    """One row per metric: each tool's mean over its rounds, its values, and the per-round differences."""
    rows = []
    for label, key in METRICS:
        pairs = [(_num(a.get(key)), _num(b.get(key))) for a, b in zip(ours, theirs, strict=False)]
        runs = tuple((a - b) / b for a, b in pairs if a is not None and b)
        rows.append(Row(conc, label, _mean([a for a, _ in pairs]), _mean([b for _, b in pairs]), runs,
                        tuple(a for a, _ in pairs if a is not None), tuple(b for _, b in pairs if b is not None)))
    return rows


def spread(values: tuple[float, ...]) -> float | None:
    """Round-to-round spread: (max - min) / mean; None with fewer than 2 rounds."""
    if len(values) < 2 or not sum(values):
        return None
    return (max(values) - min(values)) / (sum(values) / len(values))


def _num(value) -> float | None:
    return float(value) if isinstance(value, (int, float)) else None


def _mean(values: list[float | None]) -> float | None:
    return None if not values or None in values else sum(values) / len(values)  # type: ignore[arg-type]


def _sum_counts(summaries: list[dict]) -> dict:
    return {k: sum(s.get(k) or 0 for s in summaries) for k in COUNTS}


# ---- text of the table (agreement.md here; the CLI's terminal table uses the same cells) ----

def counts_text(c: dict) -> str:
    return "{completed} / {total_input_tokens} / {total_output_tokens}".format(**c)


def pct(value: float | None) -> str:
    return "-" if value is None else f"{value:+.2%}"


def spread_text(values: tuple[float, ...]) -> str:
    s = spread(values)
    return "" if s is None else f"{s:.1%}"


def per_round(r: Row) -> str:
    return " ".join(f"{d:+.1%}" for d in r.runs) if len(r.runs) > 1 else ""


def markdown(peer: Peer, rows: list[Row], tolerance: float) -> str:
    lines = [f"| concurrency | metric | tokenbench | spread | {peer.label} | spread | difference | per round |",
             "|---:|---|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        flag = "" if r.within(tolerance) else " (!)"
        lines.append(f"| {r.concurrency} | {r.metric} | {plain(r.tokenbench)} | {spread_text(r.tokenbench_runs)} | "
                     f"{plain(r.peer)} | {spread_text(r.peer_runs)} | {pct(r.rel_diff)}{flag} | {per_round(r)} |")
    return "\n".join(lines) + "\n"


def write(agreement: Agreement) -> None:
    a = agreement
    doc = {"peer": a.peer.name, "tolerance": a.tolerance,
           "rows": [{**asdict(r), "rel_diff": r.rel_diff, "tokenbench_spread": spread(r.tokenbench_runs),
                     "peer_spread": spread(r.peer_runs)} for r in a.rows],
           "counts": {str(k): v for k, v in a.counts.items()}}
    outputs.write_text(a.out / "agreement.json", json.dumps(doc, indent=1))
    outputs.write_text(a.out / "agreement.md", markdown(a.peer, a.rows, a.tolerance))


def model_and_tokenizer(base_url: str, model: str | None, tokenizer: str | None) -> tuple[str, str]:
    """The served model (the first listed unless named) and a local tokenizer directory for both clients."""
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
