"""Agreement with another benchmark client (`vllm bench serve`, `python -m sglang.bench_serving`, AISBench): the peer
and tokenbench's study run against the same server with the same random workload and concurrency,
alternately, `repeat` rounds each; each metric's mean over rounds side by side with the relative difference
and the round-to-round spread, written to agreement.json and agreement.md.

Before the rounds, a short run of each client through a recording proxy captures what each really sends
(agreement/capture.py); tokenbench then runs with every change toward the peer's request that its options
can make ("all peer-like changes", agreement/variants.py), so both clients send the same workload. With
`explain`, tokenbench's default request and each single change run as arms of their own, and
agreement/explain.py says how much of each difference each change closes. How each peer is run:
agreement/peers.py; why the tools can differ: docs/metrics.md ("Agreement, explained"),
docs/vllm-cpu.md and docs/sglang-cpu.md ("Agreement")."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from tokenbench.agreement import capture
from tokenbench.agreement.explain import FIGURES, PEER, Explained, Rounds, Setting, explain, figure
from tokenbench.agreement.explain import markdown as explain_markdown
from tokenbench.agreement.peers import PEERS, Cell, Peer, peer_python, run_peer
from tokenbench.agreement.variants import DEFAULT, Variant, combined, study_spec
from tokenbench.client import api
from tokenbench.deploy import state
from tokenbench.errors import MeasurementError, TargetError, UsageError
from tokenbench.report.document import plain
from tokenbench.store import outputs
from tokenbench.study import run as study

Say = Callable[[str], None]

METRICS = FIGURES          # (label, summary key) of every figure compared
COUNTS = ("completed", "total_input_tokens", "total_output_tokens")


@dataclass(frozen=True, kw_only=True)
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
    explain: bool = False                  # also run tokenbench's default and each single change
    variants: tuple[str, ...] | None = None    # explain: the single changes to run (default: every one found)


@dataclass(frozen=True)
class Bodies:
    """The captured requests compared: tokenbench's default and, after every change, the peer-like arm."""

    rows: list[capture.Difference]         # tokenbench default vs the peer
    after: list[capture.Difference]        # all peer-like changes vs the peer: what is left
    variants: list[Variant]                # the single changes the differences name
    peer_like: Variant                     # all of them together (the one, or the default when none)
    clock: capture.Clock | None = None     # the two clients' own clocks at the capture's concurrency


@dataclass(frozen=True, kw_only=True)
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


@dataclass(frozen=True, kw_only=True)
class Agreement:
    peer: Peer
    rows: list[Row]
    counts: dict[int, dict[str, dict]]     # concurrency -> tool -> summed COUNTS
    tolerance: float
    out: Path
    bodies: Bodies | None = None
    explained: list[Explained] = field(default_factory=list)
    repeat: int = 0

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


@dataclass(frozen=True)
class Session:
    """One agree run's peer client, where its files go and how it reports progress."""

    peer: Peer
    python: str
    out: Path
    say: Say = quiet


def run(spec: AgreeSpec, out: Path, say: Say = quiet) -> Agreement:
    """Capture both clients' requests, then `spec.repeat` rounds per concurrency of the peer and tokenbench's
    arms; writes agreement.json and agreement.md into `out`."""
    check_variants(spec)
    other = PEERS[spec.peer]
    session = Session(other, peer_python(other, spec.peer_python), out, say)
    model, tokenizer = model_and_tokenizer(spec.base_url, spec.model, spec.tokenizer)
    out.mkdir(parents=True, exist_ok=True)
    base = Cell(base_url=spec.base_url, model=model, tokenizer=tokenizer, input_len=spec.input_len,
                output_len=spec.output_len, concurrency=min(spec.concurrency), num_prompts=capture.CAPTURE_PROMPTS,
                seed=seed_for(spec, len(spec.concurrency), 0, 0), kind="capture")
    bodies = capture_bodies(session, base)
    arms, explained_arms = arms_of(spec, bodies)
    rows: list[Row] = []
    counts: dict[int, dict[str, dict]] = {}
    explained: list[Explained] = []
    for conc in spec.concurrency:
        clock = clock_at(session, base, conc, bodies) if spec.explain else None
        rounds = run_rounds(session, cells(spec, base, conc), arms)
        ours = rounds[bodies.peer_like.name]
        counts[conc] = {"tokenbench": _sum_counts(ours), other.name: _sum_counts(rounds[PEER])}
        rows += compare(conc, ours, rounds[PEER])
        if spec.explain:
            explained += explain(rounds, explained_arms, Setting(conc, spec.tolerance, spec.output_len, clock))
    agreement = Agreement(peer=other, rows=rows, counts=counts, tolerance=spec.tolerance, out=out, bodies=bodies,
                          explained=explained, repeat=spec.repeat)
    write(agreement)
    return agreement


def check_variants(spec: AgreeSpec) -> None:
    """Before anything runs: --variants names known changes, and only with --explain."""
    if spec.variants is None:
        return
    if not spec.explain:
        raise UsageError("--variants chooses the single changes of --explain", "add --explain, or drop --variants")
    unknown = sorted(set(spec.variants) - set(capture.VARIANT_NAMES))
    if unknown:
        raise UsageError(f"--variants: unknown change {', '.join(unknown)}",
                         f"choose among {', '.join(capture.VARIANT_NAMES)}")


ARM_SLOTS = 16      # seeds per concurrency and round: the peer and tokenbench's arms (at most 9), room to spare


def seed_for(spec: AgreeSpec, conc_at: int, position: int, round_: int) -> int:
    """The prompts' seed of one run: a different one for every concurrency (its index `conc_at`; the
    captures take the index after the last), arm (its `position`, the peer's 0) and round. No run sends
    the prompts another sent, so a server's prefix cache serves no run what an earlier one left (with
    one seed, every arm after the first in a round found its prompts cached)."""
    return spec.seed + (conc_at * ARM_SLOTS + position) * spec.repeat + round_


def cells(spec: AgreeSpec, base: Cell, conc: int) -> list[Cell]:
    """One cell per round, each with its own seed (the peer's; each tokenbench arm's: `arm_cell`)."""
    n = spec.num_prompts or max(16, 4 * conc)
    at = spec.concurrency.index(conc)
    return [replace(base, concurrency=conc, num_prompts=n, seed=seed_for(spec, at, 0, i), run=i, kind="")
            for i in range(spec.repeat)]


def capture_bodies(session: Session, cell: Cell) -> Bodies:
    """The peer's and tokenbench's requests through the recording proxy, compared; then the peer-like arm's,
    compared again (what its changes leave), and the two clients' clocks at this concurrency."""
    session.say(f"capture: {session.peer.label} and tokenbench through a recording proxy "
                f"({cell.num_prompts} requests each)")
    theirs = capture.capture_peer(session.peer, session.python, cell, session.out)
    ours = capture.capture_tokenbench(cell, DEFAULT, session.out)
    rows = capture.compare(ours, theirs, cell)
    found = capture.variants(rows)
    peer_like = combined(found) if len(found) > 1 else found[0] if found else DEFAULT
    after, mine = rows, ours
    if found:
        mine = capture.capture_tokenbench(cell, peer_like, session.out)
        after = capture.compare(mine, theirs, cell)
    return Bodies(rows, after, found, peer_like, capture.clock(mine, theirs, cell.concurrency))


def clock_at(session: Session, base: Cell, conc: int, bodies: Bodies) -> capture.Clock:
    """Both clients' own clocks at `conc` (the first capture's, or a capture of the peer-like arm)."""
    if bodies.clock is not None and bodies.clock.concurrency == conc:
        return bodies.clock
    cell = replace(base, concurrency=conc, num_prompts=max(capture.CAPTURE_PROMPTS, conc), seed=base.seed + conc)
    session.say(f"capture at concurrency {conc}: the clients' own clocks")
    theirs = capture.capture_peer(session.peer, session.python, cell, session.out)
    return capture.clock(capture.capture_tokenbench(cell, bodies.peer_like, session.out), theirs, conc)


def arms_of(spec: AgreeSpec, bodies: Bodies) -> tuple[list[Variant], list[Variant]]:
    """(tokenbench arms to run, the variants the explanation reads). Without `explain`: the peer-like arm
    alone. With it: the default, the chosen single changes, and all of them together."""
    if not spec.explain:
        return [bodies.peer_like], []
    known = {v.name for v in bodies.variants}
    unknown = sorted(set(spec.variants or ()) - known)
    if unknown:
        raise UsageError(f"--variants: {', '.join(unknown)} not among the differences found "
                         f"({', '.join(sorted(known)) or 'none'})", "name variants the capture found, or drop --variants")
    singles = [v for v in bodies.variants if spec.variants is None or v.name in spec.variants]
    last = [bodies.peer_like] if bodies.peer_like.name not in {v.name for v in singles} | {DEFAULT.name} else []
    return [DEFAULT, *singles, *last], [*singles, *last]


def run_rounds(session: Session, rounds: list[Cell], arms: list[Variant]) -> Rounds:
    """Every arm once per round (one cell per round), the order rotated each round so no arm always runs
    first or after the same one. Returns each arm's summaries in round order (the peer's under PEER)."""
    names = [PEER, *(a.name for a in arms)]
    by_name = {a.name: a for a in arms}
    results: dict[str, list[dict]] = {n: [] for n in names}
    for cell in rounds:
        for name in round_order(names, cell.run):
            session.say(f"concurrency {cell.concurrency}, round {cell.run + 1}/{len(rounds)}: "
                        f"{session.peer.label if name == PEER else by_name[name].label} ({cell.num_prompts} requests)")
            results[name].append(run_peer(session.peer, session.python, cell, session.out) if name == PEER
                                 else run_tokenbench(arm_cell(cell, names.index(name), len(rounds)), session.out,
                                                     by_name[name]))
    return results


def arm_cell(cell: Cell, position: int, rounds: int) -> Cell:
    """The round's cell for the arm at `position` (1 on; the peer's is `cell`): prompts of its own seed
    (`seed_for`), the same shape."""
    return replace(cell, seed=cell.seed + position * rounds)


def round_order(names: Sequence[str], run: int) -> list[str]:
    """The arms of round `run`, rotated by one each round: over len(names) rounds every arm runs once in
    every position (two arms: the peer first, then tokenbench first, and so on)."""
    k = run % len(names)
    return [*names[k:], *names[:k]]


def run_tokenbench(cell: Cell, out: Path, variant: Variant = DEFAULT) -> dict:
    outcome = study.measure(study_spec(cell, variant), str(out / f"tokenbench-{variant.name}-{cell.tag}.json"),
                            records=False)
    study.check(outcome, "bench")
    return outcome.cells[0].summary.to_dict()       # vLLM's names, as the peers' results use them


def compare(conc: int, ours: Sequence[Mapping], theirs: Sequence[Mapping]) -> list[Row]:
    """One row per metric: each tool's mean over its rounds, its values, and the per-round differences."""
    rows = []
    for label, key in METRICS:
        pairs = [(figure(a, key), figure(b, key)) for a, b in zip(ours, theirs, strict=False)]
        runs = tuple((a - b) / b for a, b in pairs if a is not None and b)
        rows.append(Row(concurrency=conc, metric=label, tokenbench=_mean([a for a, _ in pairs]),
                        peer=_mean([b for _, b in pairs]), runs=runs,
                        tokenbench_runs=tuple(a for a, _ in pairs if a is not None),
                        peer_runs=tuple(b for _, b in pairs if b is not None)))
    return rows


def spread(values: tuple[float, ...]) -> float | None:
    """Round-to-round spread: (max - min) / mean; None with fewer than 2 rounds."""
    if len(values) < 2 or not sum(values):
        return None
    return (max(values) - min(values)) / (sum(values) / len(values))


def _mean(values: list[float | None]) -> float | None:
    return None if not values or None in values else sum(values) / len(values)  # type: ignore[arg-type]


def _sum_counts(summaries: Sequence[Mapping]) -> dict:
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


def body_rows(bodies: Bodies) -> list[list[str]]:
    """The request comparison: a row per field, tokenbench's default, the peer's, the variant that sends the
    peer's value and what the peer-like arm sent ('same' where it matches the peer)."""
    after = {d.what: d for d in bodies.after}
    rows = []
    for d in bodies.rows:
        left = after.get(d.what)
        now = "same" if left is None or not left.differs else left.ours      # None: absent from both now
        rows.append([d.what, d.ours, d.theirs, d.variant.label if d.variant and d.differs else "", now])
    return rows


def body_markdown(peer: Peer, bodies: Bodies) -> str:
    lines = [f"| request | tokenbench default | {peer.label} | variant | all peer-like changes |",
             "|---|---|---|---|---|"]
    lines += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in body_rows(bodies)]
    return "\n".join(lines) + "\n"


def _bodies_doc(bodies: Bodies | None) -> dict | None:
    if bodies is None:
        return None
    return {"rows": [asdict(d) for d in bodies.rows], "after": [asdict(d) for d in bodies.after],
            "variants": [asdict(v) for v in bodies.variants], "peer_like": asdict(bodies.peer_like),
            "clock": asdict(bodies.clock) if bodies.clock else None}


def write(agreement: Agreement) -> None:
    a = agreement
    doc = {"peer": a.peer.name, "tolerance": a.tolerance,
           "rows": [{**asdict(r), "rel_diff": r.rel_diff, "tokenbench_spread": spread(r.tokenbench_runs),
                     "peer_spread": spread(r.peer_runs)} for r in a.rows],
           "counts": {str(k): v for k, v in a.counts.items()}, "bodies": _bodies_doc(a.bodies),
           "explained": [{**asdict(e), "accounted": e.accounted, "verdict": e.verdict} for e in a.explained]}
    outputs.write_text(a.out / "agreement.json", json.dumps(doc, indent=1, default=str))
    text = markdown(a.peer, a.rows, a.tolerance)
    if a.bodies is not None:
        text += "\n### What each client sent (captured)\n\n" + body_markdown(a.peer, a.bodies)
    if a.explained:
        text += "\n### Explained\n\n" + explain_markdown(a.explained, a.peer.label, a.repeat)
    outputs.write_text(a.out / "agreement.md", text)


def model_and_tokenizer(base_url: str, model: str | None, tokenizer: str | None) -> tuple[str, str]:
    """The served model (the first listed unless named) and a local tokenizer directory for both clients."""
    entries = api.list_models(base_url, None)
    if not entries:
        raise TargetError(f"{base_url}/v1/models lists no model", "wait until the server has loaded it")
    entry = next((e for e in entries if e.get("id") == model), None) if model else entries[0]
    if entry is None:
        raise UsageError(f"model '{model}' is not served at {base_url}",
                         f"use one of: {', '.join(str(e.get('id')) for e in entries)}")
    tokenizer = tokenizer or local_root(base_url, entry.get("root"))
    if not tokenizer or not Path(tokenizer).is_dir():
        raise UsageError(f"no local tokenizer directory for '{entry.get('id')}' (server root: {entry.get('root')})",
                         "pass --tokenizer DIR (the model's Hugging Face directory)")
    return entry["id"], tokenizer


def local_root(base_url: str, root: object) -> str | None:
    """The server's `root` when it is a local directory (vLLM), else the model directory of the running
    deployment at `base_url` (SGLang lists its served name as root)."""
    if isinstance(root, str) and Path(root).is_dir():
        return root
    deployed = state.serving(state.state_dir(), base_url)
    return state.model_directory(deployed) if deployed else None
