"""judge/cost.py at each rule's edge (docs/metrics.md, "Cost"): a price only where the spec states a positive
number (never a bool), the server's phase times from its spans only where some joined, else its histograms'
means (one request where they count none), a split by time only where some time was measured, else by tokens
only where both counts are known, and the input split only where the cell's duration is known."""

from __future__ import annotations

import dataclasses

import pytest

from tokenbench.judge import cost as co
from tokenbench.metrics.cell_summary import CellSummary
from tokenbench.metrics.summary_groups import PhaseLedger, ServerMeans
from tokenbench.store.rows import CellRow


def cell(**figures) -> CellRow:
    summary = CellSummary(**{"total_input_tokens": 3000, "total_output_tokens": 1000, "duration": 10.0,
                             "output_throughput": 100.0, **figures})
    return CellRow(key="k", input_len=300, output_len=100, status="ok", summary=summary, concurrency=4, id=1,
                   config="c")


@pytest.mark.parametrize(("value", "want"), [(2, co.Price(2.0)), (0.01, co.Price(0.01)), (0, None), (-1.5, None),
                                             (True, None), ("3", None), (None, None)])
def test_a_price_is_a_positive_number_the_spec_states(value, want):
    assert co.Price.of({"price_per_hour": value}) == want
    if want is not None:
        assert co.Price.of({"price_per_hour": value, "price_basis": "node"}).basis == "node"
        assert co.Price.of({"price_per_hour": value, "price_basis": "rack"}).basis == "device"


def test_phase_times_from_joined_spans_else_histogram_means():
    spans = PhaseLedger(joined=4, mean_ms={"prefill": 250.0, "decode": 500.0})
    assert co.phase_times(dataclasses.replace(cell(), summary=cell().summary.with_(spans))) == co.PhaseTimes(1.0, 2.0)
    none_joined = spans.model_copy(update={"joined": 0})
    means = ServerMeans(prefill_ms=100.0, decode_ms=300.0)
    both = cell().summary.with_(none_joined, means)
    assert co.phase_times(dataclasses.replace(cell(), summary=both)) == co.PhaseTimes(0.1, 0.3, "histograms")
    no_decode = spans.model_copy(update={"mean_ms": {"prefill": 250.0}})
    assert co.phase_times(dataclasses.replace(cell(), summary=cell().summary.with_(no_decode))) is None
    counted = means.model_copy(update={"requests": 5})
    assert co.phase_times(dataclasses.replace(cell(), summary=cell().summary.with_(counted))) == co.PhaseTimes(
        0.5, 1.5, "histograms")
    half = ServerMeans(prefill_ms=100.0)
    assert co.phase_times(dataclasses.replace(cell(), summary=cell().summary.with_(half))) is None


def test_the_input_share_by_time_where_some_was_measured_else_by_tokens():
    assert co.input_share(cell(), co.PhaseTimes(1.0, 3.0)) == (0.25, "spans")
    assert co.input_share(cell(), co.PhaseTimes(0.0, 0.0)) == (0.75, "tokens")
    assert co.input_share(cell(), co.PhaseTimes(0.0, 2.0, "histograms")) == (0.0, "histograms")
    assert co.input_share(cell(), None) == (0.75, "tokens")
    assert co.input_share(cell(total_input_tokens=0), None) is None
    assert co.input_share(cell(total_output_tokens=None), None) is None


def test_the_cost_of_a_cell():
    got = co.cell_cost(cell(), co.Price(3.6), 2)
    assert got.usd_per_hour == 7.2 and got.per_m_output == pytest.approx(7.2 / (100 * 3600) * 1e6)
    assert got.input_share == 0.75 and got.split_by == "tokens"
    assert got.per_m_input_split == pytest.approx(7.2 * 0.75 / (300 * 3600) * 1e6)
    assert got.per_m_output_split == pytest.approx(7.2 * 0.25 / (100 * 3600) * 1e6)
    assert got.output_per_usd == pytest.approx(100 * 3600 / 7.2)
    undated = co.cell_cost(cell(duration=None), co.Price(3.6), 2)
    assert undated.per_m_input_split is None and undated.per_m_output_split == got.per_m_output_split
    unsplit = co.cell_cost(cell(total_input_tokens=0), co.Price(3.6), 2)
    assert (unsplit.input_share, unsplit.split_by, unsplit.per_m_input_split, unsplit.per_m_output_split) == (
        None, None, None, None)
    assert co.cell_cost(cell(output_throughput=0.0), co.Price(3.6), 2) is None
    assert co.per_million(3.6, 1.0) == pytest.approx(1000.0) and co.SECONDS_PER_HOUR == 3600 and co.MILLION == 10**6
