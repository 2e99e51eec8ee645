"""study/capacity.py at the edges a held-out mutation draw (seed 3) found untested: a load the client stalled at
leaves the answer open only where it lies strictly between the passing and the failing load (or past the one that
is missing), never below the pass or above the fail; a tier bisecting toward such a load refines, so another
tier's bracket goes first (0 bracket, 1 refine)."""

from __future__ import annotations

import pytest

from tests.study.test_capacity_search import drive, linear, tiers
from tokenbench.study.capacity import Settings, _between


@pytest.mark.parametrize(("loads", "low", "high", "open_"), [
    ([6.0], 4.0, 8.0, True), ([4.0], 4.0, 8.0, False), ([8.0], 4.0, 8.0, False), ([2.0], 4.0, 8.0, False),
    ([9.0], 4.0, 8.0, False), ([2.0, 9.0], 4.0, 8.0, False), ([2.0, 5.0], 4.0, 8.0, True),
    ([9.0], 4.0, None, True), ([3.0], 4.0, None, False), ([3.0], None, 8.0, True), ([9.0], None, 8.0, False),
    ([1.0], None, None, True), ([], None, None, False)])
def test_a_client_load_leaves_the_answer_open_only_between_the_pass_and_the_fail(loads, low, high, open_):
    assert _between(loads, low, high) is open_


def test_a_refine_toward_the_clients_load_waits_for_another_tiers_bracket():
    # the first tier passes up to 4/s, where the client stalls in every cell: it bisects toward 4 (refine);
    # the second tier fails from 1/s on and brackets down to the floor first
    s = Settings(dimension="rate", tiers=tiers("tpot:mean<=100", "tpot:mean<=5"), start=1.0, sustain_s=0)
    rec, probes = drive(s, linear(10, 0.4), stalled=lambda k, p: p.load >= 4)
    roles = [p.role for p in probes if p.role != "remeasure"]
    assert max(i for i, r in enumerate(roles) if r == "bracket") < roles.index("refine")   # every bracket first
    assert [p.load for p in probes if p.role == "bracket" and p.load < 1] == [0.5, 0.25, 0.125, 0.0625, 0.0312,
                                                                              0.015625]
    assert (rec.answers[0].reason, rec.answers[1].reason) == ("client", "below_min")
