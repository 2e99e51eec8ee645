"""judge/tune.py at edges a held-out mutation draw (seed 4) found untested: a stored tune with no search is judged
as soon as ANY config was tried (one that failed to start beside one never reached), and a tune whose only config
that met the first tier missed it on its confirmation, no engine having died, has nothing to recommend because
none held, not because none met."""

from __future__ import annotations

from tests.judge.test_tune import SLO, answer, confirmed, entrant
from tests.judge.test_tune_seed3 import Stored
from tokenbench.judge import tune as tn
from tokenbench.judge.tune import judge


def test_a_tune_with_one_config_tried_and_one_never_reached_is_judged():
    spec = {"find_capacity": "concurrency", "target": {"profile": "p"}, "tune": {"baseline": None},
            "slo": {"tpot_ms": 50}, "pairs": [[32, 16]]}
    got = tn.of_run(spec, [Stored("default"), Stored("b", None)], [])
    assert got is not None and got.baseline == "default" and got.recommended is None
    assert tn.of_run(spec, [Stored("default", None), Stored("b", None)], []) is None     # nothing tried yet


def test_nothing_held_when_the_one_config_that_met_missed_its_confirmation_without_a_death():
    held = judge([SLO], [confirmed(entrant("b", answer(SLO, 2, 2, 3)), 2, passes=False)], "b")
    assert held.recommended is None and held.empty == "none_held"
