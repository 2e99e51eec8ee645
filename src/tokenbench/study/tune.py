"""`tokenbench tune`: the best server config for the SLOs, found with the fewest cells. A tune is a capacity
study (study/run.py) over the varied configs whose searches are chosen by `TuneSearches` (the runner's
`Searching`, study/settings.py): the baseline first, then every other config, each search

- with a share of the cells left (`--budget-cells`, default capacity_budget per config), split evenly over
  the configs not searched yet, so a config stopped early leaves its cells to the later ones;
- starting from the best boundary found so far (warm start: it brackets the rivals' boundary at once);
- stopped early once its boundary's interval cannot reach another config's in any tier (judge/tune.outranked);
- with no sustain cell.

Then the configs still in contention whose search ran out of cells get what is left (round 2), until the
budget or `--budget-minutes` is spent. Last, the recommended config is confirmed on a fresh launch: a sustain
cell at its first tier's answer (`--sustain-s S` long; default 200 requests at the rate measured there, 60 s
to 30 min); one that misses the tier there, or whose engine dies, gives way to the next-ranked config, which
is confirmed in turn (`--no-confirm`: none). A config that does not start is stored with its cause and skipped;
one whose engine dies under load, in any launch, is stored with its death and never launched again (a config
that dies is not one to recommend). The judgement (ranking, verdicts, gain, frontier, confirmations) is
judge/tune.py, over what is stored."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from tokenbench.judge import tune as judged
from tokenbench.logs.launch import Death, LaunchFailure
from tokenbench.metrics.capacity import Reason
from tokenbench.spec.study import StudySpec
from tokenbench.store.db import Store
from tokenbench.study import capacity
from tokenbench.study.plan import DEFAULT, ServerConfig, server_configs, varied
from tokenbench.study.run import Study
from tokenbench.study.servers import load_profile

if TYPE_CHECKING:
    from tokenbench.study.settings import Seen

ROUNDS = 4                # passes over the contenders after the first round, at most
NOT_RUN = {"budget": "not run: the cell budget was spent", "time": "not run: the time budget was spent"}


def baseline_name(spec: StudySpec) -> str:
    """The config the gain is stated against: the one named (checked), else the varied config whose profile
    equals the profile as given, else the profile as given itself (`default`, then one more config)."""
    assert spec.tune is not None
    configs = varied(spec)
    if spec.tune.baseline is not None:
        server_configs(spec)                                   # a name that is no config is refused here
        return spec.tune.baseline
    given = load_profile(spec.target, DEFAULT)
    return next((c.name for c in configs if load_profile(spec.target, c) == given), DEFAULT.name)


def resolved(spec: StudySpec) -> StudySpec:
    """The spec with its baseline named: stored so, a resume plans the same configs in the same order."""
    assert spec.tune is not None
    tune = spec.tune.model_copy(update={"baseline": baseline_name(spec)})
    return spec.model_copy(update={"tune": tune})


def total_budget(spec: StudySpec, count: int) -> int:
    assert spec.tune is not None
    return spec.tune.budget_cells or spec.capacity_budget * count


@dataclasses.dataclass(frozen=True)
class PlanSize:
    """What a tune's plan implies before it starts: its server configs (`axes`: each --vary axis's values; the
    baseline `default` may add one), the cells a full search of each may take (capacity_budget), and the cell
    budget with the share of it a first search gets."""

    configs: int
    axes: tuple[int, ...]
    per_search: int
    budget: int

    @property
    def implied(self) -> int:
        return self.configs * self.per_search

    @property
    def share(self) -> int:
        return min(self.per_search, self.budget // self.configs)

    @property
    def over(self) -> bool:
        """The full plan is larger than the budget: configs get less than a full search, or none."""
        return self.implied > self.budget


def plan_size(spec: StudySpec, configs: int) -> PlanSize:
    return PlanSize(configs, tuple(len(v) for v in spec.vary.values()), spec.capacity_budget,
                    total_budget(spec, configs))


@dataclasses.dataclass(frozen=True)
class Share:
    """One config's first search: its cell budget, where it starts, and the rivals' sure-pass loads per tier
    it is stopped against."""

    budget: int
    start: float | None
    rival: dict[str, float | None]


class TuneSearches:
    """The runner's `Searching` for a tune: which configs, each search's budget, start and sustain, and when
    one is stopped early. Reads what is stored (the same on a resume, which replays the stored cells through
    the same choices)."""

    def __init__(self, store: Store, run_id: str, spec: StudySpec, order: Sequence[ServerConfig],
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.store, self.run_id, self.spec, self.order, self.clock = store, run_id, spec, list(order), clock
        self.started = clock()
        self.total = total_budget(spec, len(order))
        self.shares: dict[str, Share] = {}
        self.budgets: dict[str, int] = {}
        self.confirming: str | None = None
        self.rival: dict[str, float | None] = {}
        self.stopped: str | None = None               # why the tune ended before every config was searched

    # ---- what is stored ----

    def entrants(self, names: Sequence[str] | None = None) -> list[judged.Entrant]:
        """The configs (of `names`, default all) in the tune's order, with what is stored of each."""
        by_name = {c.name: c for c in self.store.configs(self.run_id)}
        names = [c.name for c in self.order] if names is None else names
        return judged.entrants([by_name[n] for n in names if n in by_name], self.store.searches(self.run_id))

    def entrant(self, name: str) -> judged.Entrant:
        return next((e for e in self.entrants() if e.name == name), judged.Entrant(name))

    def tuning(self) -> judged.Tuning:
        return judged.judge(self.spec.capacity_tiers(), self.entrants(), self.order[0].name, self.confirms)

    @property
    def confirms(self) -> bool:
        return self.spec.tune is None or not self.spec.tune.no_confirm

    def judged(self) -> judged.Tuning | None:
        """The judgement as stored runs are judged, with the recommendation ready to start."""
        spec = self.spec.model_dump(mode="json")
        return judged.of_run(spec, self.store.configs(self.run_id), self.store.searches(self.run_id))

    def out_of_time(self) -> bool:
        minutes = self.spec.tune.budget_minutes if self.spec.tune else None
        return minutes is not None and self.clock() - self.started >= minutes * 60

    # ---- Searching ----

    def visits(self, configs: Sequence[ServerConfig]) -> Iterator[ServerConfig]:
        yield from self._first_round()
        yield from self._contenders()
        yield from self._confirm()
        self._not_reached()

    def _not_reached(self) -> None:
        """Configs the budget did not reach say so (their status stays pending: a resume may run them)."""
        why = NOT_RUN.get(self.stopped or "", "")
        for e in self.entrants():
            if e.record is None and e.launch is None and why:
                self.store.set_config_status(self.run_id, e.name, "pending", why)

    def _first_round(self) -> Iterator[ServerConfig]:
        used = 0
        for i, config in enumerate(self.order):
            if self.out_of_time():
                self.stopped = "time"
                return
            e = self.entrant(config.name)
            if e.deaths or (e.launch is not None and not e.launch.retried and e.record is None):
                continue                      # died under load, or did not start for a cause a relaunch keeps
            share = self._share(i, used)
            if share is None:
                self.stopped = "budget"
                return
            self.shares[config.name] = share
            self.budgets[config.name] = share.budget
            self.rival = share.rival
            yield config
            used += self.entrant(config.name).cells

    def _share(self, i: int, used: int) -> Share | None:
        left = (self.total - used) // (len(self.order) - i)
        if left < 1:
            return None
        before = self.entrants([c.name for c in self.order[:i]])
        tiers = self.spec.capacity_tiers()
        start = judged.warm_start(before, tiers[0])
        return Share(min(self.spec.capacity_budget, left), start, judged.rivals(before, tiers))

    def _contenders(self) -> Iterator[ServerConfig]:
        for _ in range(ROUNDS):
            todo = [c for c in self.order if self._contends(c.name)]
            left = self.total - sum(e.cells for e in self.entrants())
            if not todo or left < 1 or self.out_of_time():
                return
            spent = left
            for k, config in enumerate(todo):
                more = left // len(todo) + (k < left % len(todo))          # what is left, split evenly
                if not more:
                    continue
                self.rival = judged.rivals([e for e in self.entrants() if e.name != config.name],
                                           self.spec.capacity_tiers())
                self.budgets[config.name] = self.entrant(config.name).cells + more
                yield config
            if self.total - sum(e.cells for e in self.entrants()) >= spent:
                return                                        # no cell run: nothing more to learn

    def _contends(self, name: str) -> bool:
        """Still in contention (best or indistinguishable in some tier) and its search ran out of cells there."""
        tuning = self.tuning()
        for r in tuning.rankings:
            s = r.of(name)
            if s.verdict in ("best", "indistinguishable") and s.answer is not None and s.answer.reason == "budget":
                return True
        return False

    def _confirm(self) -> Iterator[ServerConfig]:
        """The recommended config confirmed on a fresh launch: its search replayed from the store, then a
        sustain cell at its first tier's answer. One that misses the tier there, whose engine dies, or that does
        not start again is no longer the best (judge/tune.excluded): the next-ranked one is confirmed in its
        place, each config once; a resume finds the confirmations already stored."""
        tried: set[str] = set()
        while self.confirms and (best := self.tuning().recommended) is not None and best not in tried:
            if self.entrant(best).confirmation is not None:
                break                                         # confirmed (or in doubt) already
            if self.out_of_time():
                self.stopped = "time"
                break
            tried.add(best)
            self.confirming = best
            self.budgets[best] = self.entrant(best).cells + 1
            self.rival = {}
            yield next(c for c in self.order if c.name == best)
        self.confirming = None

    def settings(self, config: ServerConfig, base: capacity.Settings) -> capacity.Settings:
        share = self.shares.get(config.name)
        sustain = self.spec.sustain_s if config.name == self.confirming else 0.0
        start = share.start if share is not None and share.start is not None else base.start
        return dataclasses.replace(base, start=start, sustain_s=sustain,
                                   budget=self.budgets.get(config.name, base.budget))

    def halt(self, config: ServerConfig, s: capacity.Settings, seen: Seen, fresh: bool) -> Reason | None:
        if fresh and self.out_of_time():
            self.stopped = "time"
            return "time"
        if not seen or not any(v is not None for v in self.rival.values()):
            return None
        answers = capacity.halted(s, seen, "outranked").answers
        return "outranked" if judged.outranked(answers, self.rival) else None

    def launch_is_result(self, failure: LaunchFailure) -> bool:
        return True

    def relaunch_after_death(self, config: ServerConfig, death: Death) -> bool:
        """Never: a config whose engine died under load is not one to recommend (judge/tune.excluded), and a
        relaunch would only finish a search that cannot make it the answer."""
        return False

    def doc(self) -> dict[str, Any]:
        tuning = self.judged()
        return {"tune": {**tuning.model_dump(mode="json"), "stopped": self.stopped}} if tuning is not None else {}


# ---- a tune, run as a study ----

def prepare(study: Study) -> Study:
    """The stored tune made ready: every config stored (pending) in the tune's order before any runs, so the
    judgement lists the ones never reached; its searches chosen by TuneSearches."""
    store, run_id, p = study.store, study.run_id, study.plan
    stored = {c.name for c in store.configs(run_id)}
    for config in p.configs:
        if config.name not in stored:
            store.upsert_config(run_id, config.name, config.as_dict(), status="pending")
    searching = TuneSearches(store, run_id, p.spec, p.configs)
    return dataclasses.replace(study, settings=dataclasses.replace(study.settings, searching=searching))
