"""`tokenbench gate`: the two sides (runs in the results database, or result files a CI job kept as artifacts:
tokenbench's `--output` JSON, read back by formats/own.py), judged by judge/gate.py. Sequential
(`--repeat-until-decided --max-runs K`): while a figure is undecided and the budget lasts, each side whose runs
deploy a profile (a new launch each: runs of one launch count once) is measured again from its stored spec,
with fresh prompts (another salt, or another seed), and judged again at the next look; alpha is spent over the looks
(Lan-DeMets, O'Brien-Fleming type, at group-sequential boundaries), so the gate's false-alarm rate holds over all
of them."""

from __future__ import annotations

import secrets
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, closing, contextmanager
from dataclasses import dataclass
from pathlib import Path

from tokenbench.errors import SpecError, UsageError
from tokenbench.formats.importers import import_file
from tokenbench.judge.floors import Floors
from tokenbench.judge.gate import GateResult, GateRun, Look, Policy, judge
from tokenbench.judge.views import RunData, load_run, open_store
from tokenbench.spec.loader import load_model
from tokenbench.spec.study import StudySpec
from tokenbench.store.db import Store
from tokenbench.study.run import execute, start
from tokenbench.study.settings import RunSettings, StudyEvents

SEED_STEP = 7919          # a rerun's prompts: the stored seed + SEED_STEP x its number (fresh, reproducible)


@dataclass(frozen=True)
class GateRequest:
    """What to judge (run ids, RUN:CONFIG, or result files, per side), how, and the sequential budget
    (`max_runs`: the most runs a side may have; None: judge what is given, once)."""

    baseline: tuple[str, ...]
    candidate: tuple[str, ...]
    policy: Policy = Policy()
    max_runs: int | None = None


Sides = tuple[list[GateRun], list[GateRun]]


def _config(run: RunData, asked: str, selector: str) -> str:
    names = run.config_names()
    if asked and asked not in names or not names:
        raise UsageError(f"{selector}: run {run.id} has no server config '{asked}' with cells",
                         f"use one of: {', '.join(names) or '(none)'}")
    if not asked and len(names) > 1:
        raise UsageError(f"{selector}: run {run.id} has {len(names)} server configs ({', '.join(names)})",
                         f"name one: {run.id}:{names[0]}")
    return asked or names[0]


def _member(selector: str, store: Callable[[], Store], files: Callable[[], Store]) -> GateRun:
    """A side's member: a result file (imported into a temporary store), or RUN / RUN:CONFIG of the results
    database (which must exist: reading one never makes one)."""
    path = Path(selector)
    if path.is_file():
        into = files()
        run = load_run(into, import_file(into, path, "tokenbench"), requests=False)
        return GateRun.of(run, _config(run, "", selector))
    run_id, _, asked = selector.partition(":")
    run = load_run(store(), run_id, requests=False)
    return GateRun.of(run, _config(run, asked, selector))


@contextmanager
def sides(request: GateRequest, db: Path) -> Iterator[tuple[Sides, Callable[[], Store]]]:
    """Both sides loaded (files imported into a temporary store kept open while they are judged), and the
    results database, opened when first needed to read runs (one that does not exist is refused, never
    made)."""
    opened: dict[str, Store] = {}
    with ExitStack() as stack:
        def store() -> Store:
            return opened.get("db") or opened.setdefault("db", open_store(str(db)))

        def files() -> Store:
            if "files" not in opened:
                folder = stack.enter_context(tempfile.TemporaryDirectory(prefix="tokenbench-gate-"))
                opened["files"] = Store(Path(folder) / "files.db")
                opened["files"].kept = False
            return opened["files"]
        loaded = ([_member(s, store, files) for s in request.baseline],
                  [_member(s, store, files) for s in request.candidate])
        try:
            yield loaded, store
        finally:
            for s in opened.values():
                s.close()


def stored_spec(run: RunData) -> StudySpec:
    """The spec a run was measured with (an imported file's: the run it came from), to measure it again."""
    spec = {k: v for k, v in run.spec.items() if k not in ("planned_cells", "import")}
    try:
        return load_model(StudySpec, spec, f"run {run.id}")
    except SpecError:
        raise UsageError(f"run {run.id} holds no spec this tokenbench can measure again",
                         "gate it without --repeat-until-decided, or measure more runs yourself") from None


def redeploys(run: RunData) -> bool:
    """Its spec deploys a profile (each run a new launch): a baseline then can be measured again."""
    target = run.spec.get("target") or {}
    return isinstance(target, dict) and bool(target.get("profile"))


def fresh(spec: StudySpec, n: int) -> StudySpec:
    """The spec of the n-th run again, with prompts no earlier run sent: a salted run (the default) a new salt;
    a seeded one (--seed) seed + SEED_STEP x n, reproducible. Not in the run's series: a gate's runs are its
    own, not the series' history."""
    if spec.prompt_salt is not None:
        return spec.model_copy(update={"prompt_salt": secrets.token_hex(6), "series": None})
    return spec.model_copy(update={"seed": spec.seed + SEED_STEP * n, "series": None})


def measure_again(member: GateRun, store: Store, n: int, log: Callable[[str], None]) -> GateRun:
    """One more run of the member's spec (a new run in `store`), with fresh prompts (`fresh`)."""
    spec = fresh(stored_spec(member.run), n)
    kind = "sweep" if spec.target.profile else "bench"
    study = start(spec, store, RunSettings(kind=kind), ["tokenbench", "gate", "(again: " + member.run.id + ")"])
    execute(study, StudyEvents(log=log))
    log(f"gate: measured {member.run.id} again as run {study.run_id}")
    return GateRun.of(load_run(store, study.run_id, requests=False), member.config)


@dataclass(frozen=True)
class Budget:
    """The sequential budget: the most runs each side may reach, and which sides can be measured again (a
    side whose runs deploy a profile: each run a new launch; a side measured at a URL is not, since runs of one
    launch count once and another would add no launch to learn from)."""

    max_runs: int
    again: tuple[bool, bool]                 # baseline, candidate

    @classmethod
    def of(cls, s: Sides, max_runs: int) -> Budget:
        again = (all(redeploys(m.run) for m in s[0]), all(redeploys(m.run) for m in s[1]))
        if not any(again):
            raise UsageError("--repeat-until-decided: neither side's runs deploy a profile, and runs measured again "
                             "at the same URL share its launch, which counts once (docs/metrics.md, \"Runs of one "
                             "launch\")", "measure each side with `sweep --set target.profile=NAME` (each run a new "
                             "launch), or gate the runs you have without --repeat-until-decided")
        return cls(max_runs, again)

    def _reach(self, side: int, s: Sides) -> int:
        return max(self.max_runs, len(s[side])) if self.again[side] else len(s[side])

    def most(self, s: Sides) -> int:
        return self._reach(0, s) + self._reach(1, s)

    def fraction(self, s: Sides, most: int) -> float:
        return min(1.0, (len(s[0]) + len(s[1])) / most)

    def left(self, s: Sides) -> bool:
        return any(self.again[k] and len(s[k]) < self.max_runs for k in (0, 1))


def _grow(s: Sides, budget: Budget, store: Store, log: Callable[[str], None]) -> Sides:
    """One more run of each side that may take one: the baseline first, then the candidate, so a drift of the
    host over time falls on both."""
    grown = (list(s[0]), list(s[1]))
    for k, side in enumerate(grown):
        if budget.again[k] and len(side) < budget.max_runs:
            side.append(measure_again(side[-1], store, len(side), log))
    return grown


def sequential(s: Sides, request: GateRequest, db: Path, log: Callable[[str], None]) -> GateResult:
    """Look, then measure more while a figure is undecided and the budget lasts; each look tests at the alpha
    spent since the one before (its information fraction: runs so far over the most the budget allows). The
    runs measured again are stored in `db` (made if missing)."""
    budget = Budget.of(s, request.max_runs or 0)
    most = budget.most(s)
    with closing(Store(db)) as store:
        floor = Floors(store)
        look = Look((budget.fraction(s, most) if budget.left(s) else 1.0,))
        result = judge(s, request.policy, floor, look)
        while result.undecided() and budget.left(s):
            s = _grow(s, budget, store, log)
            look = look.then(budget.fraction(s, most) if budget.left(s) else 1.0)
            result = judge(s, request.policy, floor, look, result.figures)
    return result


def gate(request: GateRequest, db: Path, log: Callable[[str], None] = print) -> GateResult:
    """Judge the sides once, or sequentially when `max_runs` is given."""
    with sides(request, db) as (loaded, store):
        if request.max_runs is not None:
            return sequential(loaded, request, db, log)
        return judge(loaded, request.policy, Floors(store() if db.is_file() else None))


def runs_of(selectors: Sequence[str]) -> tuple[str, ...]:
    """Selectors given comma-separated or one per flag, as one tuple."""
    return tuple(s.strip() for sel in selectors for s in sel.split(",") if s.strip())
