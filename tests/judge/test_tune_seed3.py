"""judge/tune.py at an edge a held-out mutation draw (seed 3) found untested: a stored tune with no search (every
config failed to start) is judged on its spec's tiers and the load dimension the spec searched, rate included;
a spec without one is in concurrency."""

from __future__ import annotations

import pytest

from tokenbench.judge import tune as tn
from tokenbench.logs.launch import LaunchFailure

OOM = LaunchFailure(cause="out_of_memory", message="out of memory")


class Stored:
    """A stored config: one that did not start (`launch`: its failure), or one never reached (None)."""

    def __init__(self, name: str, launch: LaunchFailure | None = OOM) -> None:
        self.name, self.overrides, self.profile, self.message, self.deaths = name, {}, None, "", ()
        self.launch = launch


@pytest.mark.parametrize("dimension", ["rate", "concurrency"])
def test_a_tune_of_configs_that_never_started_keeps_the_dimension_its_spec_searched(dimension):
    spec = {"find_capacity": dimension, "target": {"profile": "p"}, "tune": {"baseline": None},
            "slo": {"tpot_ms": 50}, "pairs": [[32, 16]]}
    got = tn.of_run(spec, [Stored("default"), Stored("b")], [])
    assert got is not None and got.dimension == dimension and got.baseline == "default"
    assert [r.tier.name for r in got.rankings] == ["slo"] and got.rankings[0].best is None
