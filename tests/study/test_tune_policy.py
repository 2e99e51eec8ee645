"""How a tune spends its budget (study/tune.TuneSearches), driven in process the way the runner drives it: each
config visited gets its settings, then its search is stored. Searches are stand-ins with known answers (no
server): the budget shares, the warm start, the rivals a search is stopped against, the second round for the
contenders, the time budget and the configs it did not reach."""

from __future__ import annotations

import pytest

from tokenbench.judge import tune as judged
from tokenbench.logs.launch import Death, LaunchFailure
from tokenbench.metrics.capacity import Answer, Check, SearchRecord, Sustain, TierVerdict, Tried
from tokenbench.spec.study import StudySpec
from tokenbench.store.db import Store
from tokenbench.study import capacity
from tokenbench.study.plan import server_configs
from tokenbench.study.tune import TuneSearches

SLO = "tpot:mean<=20"


def spec(**tune) -> StudySpec:
    """The tune's spec; the confirmation is left out unless `no_confirm=False` asks it."""
    return StudySpec(target={"profile": "cpu-smollm2-llamacpp"}, pairs=[[16, 8]], find_capacity="concurrency",
                     slo={"limits": [SLO]}, vary={"slots": [1, 2, 4]}, capacity_budget=8,
                     tune={"baseline": "slots=4", "no_confirm": True, **tune})


class Driver:
    """The runner's side: store every config pending, visit, take the settings, store a search whose answer
    is `answers[config]` (capacity, lo, hi, reason) and whose cells number min(`cost[config]`, the budget)."""

    def __init__(self, tmp_path, s: StudySpec, answers: dict, cost: dict, clock=None) -> None:
        self.store = Store(tmp_path / "db.sqlite")
        self.run = self.store.create_run("tune", "p", s.model_dump(mode="json"), [], {})
        self.order = server_configs(s)
        self.ids = {c.name: self.store.upsert_config(self.run, c.name, c.as_dict(), status="pending")
                    for c in self.order}
        self.tune = TuneSearches(self.store, self.run, s, self.order, **({"clock": clock} if clock else {}))
        self.answers, self.cost, self.seen = answers, cost, []
        self.base = capacity.settings(s, "16:8")

    def run_all(self, dies: frozenset[str] = frozenset(), sustains: dict[str, bool] | None = None
                ) -> list[tuple[str, int, float | None]]:
        """Visit as the runner does. A config in `dies` dies under load in its search (its death stored, its
        search not); one given in `sustains` passes (True) or misses (False) the tier on its sustain cell, one
        not given dies there."""
        for config in self.tune.visits(self.order):
            st = self.tune.settings(config, self.base)
            self.seen.append((config.name, st.budget, st.start))
            confirming = st.sustain_s != 0
            if config.name in dies or (confirming and config.name not in (sustains or {})):
                self.store.add_config_death(self.run, config.name, Death(launch=len(self.seen), cell="c=1",
                                            sustain=confirming, failure=LaunchFailure(cause="out_of_memory")))
                continue
            record = self.record(config.name, st.budget)
            if confirming:
                record = record.model_copy(update={"sustain": self.sustain(record, (sustains or {})[config.name])})
            self.store.save_search(self.run, self.ids[config.name], record)
        return self.seen

    def record(self, name: str, budget: int) -> SearchRecord:
        cap, lo, hi, reason = self.answers[name]
        n = min(self.cost[name], budget)
        reason = "budget" if n < self.cost[name] else reason
        tried = [Tried(key=f"c={i}", repeat=0, role="bracket", load=i, status="ok", verdicts=[]) for i in range(n)]
        answer = Answer(tier="slo", limits=[SLO], capacity=cap, fail_load=hi, lo=lo, hi=hi, reason=reason)
        return SearchRecord(workload="16:8", dimension="concurrency", tiers=[{"name": "slo", "limits": [SLO]}],
                            budget=budget, precision=0.1, tried=tried, answers=[answer])

    @staticmethod
    def sustain(record: SearchRecord, passes: bool) -> Sustain:
        limit = record.tiers[0].limits[0]
        check = Check(limit=limit, value=limit.value + (-1 if passes else 1), lo=0.0, hi=99.0, n=200)
        load = record.answers[0].capacity or 1
        return Sustain(key=f"c={load:g}", repeat=1, load=load, duration_s=60.0, status="ok",
                       verdicts=[TierVerdict(tier="slo", ok=True, checks=[check])])


def test_the_baseline_goes_first_and_each_config_gets_an_even_share_of_what_is_left(tmp_path):
    answers = {"slots=4": (4, 4, 5, "converged"), "slots=1": (None, None, 4, "outranked"),
               "slots=2": (6, 6, 7, "converged")}
    d = Driver(tmp_path, spec(budget_cells=12), answers, {"slots=4": 6, "slots=1": 1, "slots=2": 5})
    seen = d.run_all()
    # 12 / 3 = 4 (the baseline spends them); 8 / 2 = 4 (stopped after 1); 7 / 1 = 7: what the early stop left
    assert seen[:3] == [("slots=4", 4, None), ("slots=1", 4, 4), ("slots=2", 7, 4)]
    assert d.tune.rival == {"slo": 4}                        # the last search was stopped against the baseline's lo


def test_cells_left_go_to_the_contenders_whose_search_ran_out(tmp_path):
    answers = {"slots=4": (4, 3, 6, "undecided"), "slots=1": (1, 1, 2, "converged"), "slots=2": (5, 4, 8, "x")}
    d = Driver(tmp_path, spec(budget_cells=20), answers, {"slots=4": 4, "slots=1": 2, "slots=2": 30})
    seen = d.run_all()
    first = seen[:3]
    assert [b for _, b, _ in first] == [6, 8, 8]             # 20 / 3; 16 / 2; 14, each capped at capacity_budget 8
    extra = seen[3:]
    assert extra and {name for name, _, _ in extra} == {"slots=2"}          # the only contender that ran out
    assert sum(min(d.cost[n], b) for n, b, _ in [seen[0], seen[1], extra[-1]]) <= 20


def test_the_time_budget_stops_the_tune_and_says_which_configs_were_not_run(tmp_path):
    now = [0.0]

    def clock() -> float:
        return now[0]

    answers = {n: (2, 2, 3, "converged") for n in ("slots=4", "slots=1", "slots=2")}
    d = Driver(tmp_path, spec(budget_minutes=1), answers, {n: 3 for n in answers}, clock)
    visits = d.tune.visits(d.order)
    assert next(visits).name == "slots=4"
    d.store.save_search(d.run, d.ids["slots=4"], d.record("slots=4", 8))
    now[0] = 61.0
    assert d.tune.halt(d.order[1], d.base, [], fresh=True) == "time"
    assert d.tune.halt(d.order[1], d.base, [], fresh=False) is None      # a stored cell is replayed, not run
    with pytest.raises(StopIteration):
        next(visits)
    configs = {c.name: c for c in d.store.configs(d.run)}
    assert configs["slots=1"].message == "not run: the time budget was spent" and configs["slots=1"].status == "pending"


def test_the_best_is_confirmed_last_and_one_that_dies_or_misses_there_gives_way_to_the_next(tmp_path):
    """The ranking's best (slots=2) dies on its confirmation, the next (slots=4) misses the tier there, the third
    (slots=1) holds it: each is confirmed once, in the ranking's order, with a sustain cell of the default
    length (sustain_s None) and one cell more than its search; slots=1 is the answer."""
    answers = {"slots=4": (4, 4, 5, "converged"), "slots=1": (2, 2, 3, "converged"),
               "slots=2": (6, 6, 7, "converged")}
    d = Driver(tmp_path, spec(no_confirm=False), answers, {"slots=4": 3, "slots=1": 2, "slots=2": 3})
    seen = d.run_all(sustains={"slots=4": False, "slots=1": True})
    assert [name for name, _, _ in seen] == ["slots=4", "slots=1", "slots=2", "slots=2", "slots=4", "slots=1"]
    assert [b for _, b, _ in seen[3:]] == [4, 4, 3]
    tuning = d.tune.judged()
    assert tuning is not None and tuning.recommended == "slots=1"
    assert [(c.config, c.outcome) for c in tuning.confirmations] == [("slots=2", "died"), ("slots=4", "missed"),
                                                                       ("slots=1", "confirmed")]
    again = TuneSearches(d.store, d.run, d.tune.spec, d.order)           # a resume finds it confirmed: no visit
    assert [c.name for c in again._confirm()] == []


def test_a_config_that_dies_in_its_search_is_never_visited_again_nor_recommended(tmp_path):
    answers = {"slots=4": (4, 4, 5, "converged"), "slots=1": (2, 2, 3, "converged"), "slots=2": (8, 6, 9, "x")}
    d = Driver(tmp_path, spec(no_confirm=False, budget_cells=30), answers, {"slots=4": 3, "slots=1": 2, "slots=2": 3})
    seen = d.run_all(dies=frozenset({"slots=2"}), sustains={"slots=4": True})
    assert [name for name, _, _ in seen] == ["slots=4", "slots=1", "slots=2", "slots=4"]
    tuning = d.tune.judged()
    assert tuning is not None and tuning.recommended == "slots=4"
    assert tuning.rankings[0].of("slots=2").verdict == "died"
    assert not d.tune.relaunch_after_death(d.order[2], Death(failure=LaunchFailure(cause="out_of_memory")))
    assert judged.rivals(d.tune.entrants(), d.tune.spec.capacity_tiers()) == {"slo": 4}
