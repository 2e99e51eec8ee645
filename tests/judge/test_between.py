"""compare's between-run noise counts launches, not repeats (judge/intervals.between): a side whose ok repeats
ran on fewer than two server launches takes its noise floor, unless both sides ran on one and the same launch
(what it drew cancels between them); repeats on two launches or more are their own noise."""

from __future__ import annotations

from types import SimpleNamespace

from tokenbench.judge.intervals import between, one_launch, units
from tokenbench.metrics import noise
from tokenbench.metrics.cell_summary import CellSummary, Metric
from tokenbench.metrics.summary_groups import LaunchFacts
from tokenbench.store.rows import CellRow

TPOT = Metric("tpot", "mean")


def cell(*launches: str | None, status: str = "ok") -> CellRow:
    """A merged cell whose repeats ran on these launches (None: not recorded)."""
    reps = tuple(CellRow(key="k", input_len=1, output_len=1, status=status, repeat=k,
                         summary=CellSummary().with_(LaunchFacts(id=x) if x else None))
                 for k, x in enumerate(launches))
    return CellRow(key="k", input_len=1, output_len=1, status=status, summary=CellSummary(), repeats=reps)


def floor(run, c, metric, exclude) -> noise.Noise:
    return noise.Noise(0.1 if run.id == "A" else 0.2, 9 if run.id == "A" else 5, "learned", 10)


def sides(a: CellRow, b: CellRow):
    return ((SimpleNamespace(run=SimpleNamespace(id="A")), a), (SimpleNamespace(run=SimpleNamespace(id="B")), b))


def test_units_are_distinct_launches_and_an_unrecorded_repeat_is_its_own():
    assert units(cell("L1", "L1", "L1")) == 1
    assert units(cell("L1", "L2", "L1")) == 2
    assert units(cell(None, None)) == 2 and units(cell("L1", None)) == 2
    assert units(cell("L1", "L2", status="failed")) == 0          # no ok repeat
    assert one_launch(cell("L", "L"), cell("L")) and not one_launch(cell("L"), cell("M"))
    assert not one_launch(cell(None), cell(None))


def test_repeats_of_one_launch_a_side_take_the_floor_of_each():
    got = between(sides(cell("L1", "L1", "L1"), cell("L2", "L2", "L2")), TPOT, floor)
    assert (got.variance, got.df, got.source) == (0.1 ** 2 + 0.2 ** 2, 5, "learned")
    only_b = between(sides(cell("L1", "L2"), cell("L3", "L3")), TPOT, floor)
    assert (only_b.variance, only_b.df) == (0.2 ** 2, 5)


def test_repeats_on_two_launches_or_one_shared_launch_are_their_own_noise():
    assert between(sides(cell("L1", "L2"), cell("L3", None)), TPOT, floor).source == "repeats"
    assert between(sides(cell("L", "L"), cell("L", "L", "L")), TPOT, floor).source == "repeats"
    # one shared launch, but a side measured once: its floor
    assert between(sides(cell("L", "L"), cell("L")), TPOT, floor).variance == 0.2 ** 2
    # older runs, no launch recorded: each repeat a launch of its own, as before
    assert between(sides(cell(None, None), cell(None, None)), TPOT, floor).source == "repeats"
