"""Cost per million tokens: the identity $/M = $/h / (tok/s x 3600) x 10^6 for any price, basis, device
count and cell; the split charges the window's cost exactly once, by measured prefill and decode time where
the server's phase timings exist, else by token share; the price as a run states it."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tokenbench.deploy.profiles import load_profile
from tokenbench.judge.cost import PhaseTimes, Price, cell_cost, per_million, phase_times
from tokenbench.judge.frontier import devices, seen
from tokenbench.judge.views import ConfigInfo
from tokenbench.metrics.cell_summary import CellSummary
from tokenbench.metrics.summary_groups import DeviceFigures, MonitorFigures, PhaseLedger, ServerMeans
from tokenbench.spec.server_facts import ServerFacts
from tokenbench.store.rows import CellRow


def cell(tokens_in: int, tokens_out: int, duration: float) -> CellRow:
    summary = CellSummary(total_input_tokens=tokens_in, total_output_tokens=tokens_out, duration=duration,
                          output_throughput=tokens_out / duration, completed=10)
    return CellRow(key="k", input_len=128, output_len=32, status="ok", summary=summary, concurrency=4, id=1, config="c")


prices = st.floats(min_value=0.01, max_value=500)
counts = st.integers(min_value=1, max_value=10**7)
durations = st.floats(min_value=0.1, max_value=10**5)


@given(price=prices, n=st.integers(1, 64), basis=st.sampled_from(["device", "node"]), tokens_in=counts,
       tokens_out=counts, duration=durations)
def test_the_identity_and_a_split_that_charges_the_cost_once(price, n, basis, tokens_in, tokens_out, duration):
    c = cell(tokens_in, tokens_out, duration)
    cost = cell_cost(c, Price(price, basis), n)
    hourly = price * n if basis == "device" else price
    tok_s = tokens_out / duration
    assert cost.usd_per_hour == pytest.approx(hourly)
    assert cost.per_m_output == pytest.approx(hourly / (tok_s * 3600) * 1e6, rel=1e-12)
    window_cost = hourly * duration / 3600
    charged = (cost.per_m_input_split * tokens_in + cost.per_m_output_split * tokens_out) / 1e6
    assert charged == pytest.approx(window_cost, rel=1e-9)
    assert cost.split_by == "tokens" and cost.input_share == pytest.approx(tokens_in / (tokens_in + tokens_out))
    assert cost.output_per_usd * cost.per_m_output == pytest.approx(1e6, rel=1e-12)


@given(prefill=st.floats(min_value=0.001, max_value=1e4), decode=st.floats(min_value=0.001, max_value=1e4))
def test_a_phase_split_charges_prefill_time_to_input_tokens(prefill, decode):
    c = cell(4096, 256, 20.0)
    cost = cell_cost(c, Price(2.5), 8, PhaseTimes(prefill, decode))
    assert cost.split_by == "spans" and cost.input_share == pytest.approx(prefill / (prefill + decode))
    hourly = 2.5 * 8
    assert cost.per_m_input_split == pytest.approx(per_million(hourly * cost.input_share, 4096 / 20.0))
    charged = (cost.per_m_input_split * 4096 + cost.per_m_output_split * 256) / 1e6
    assert charged == pytest.approx(hourly * 20.0 / 3600)


def test_price_as_the_run_states_it():
    assert Price.of({}) is None and Price.of({"price_per_hour": 0}) is None
    assert Price.of({"price_per_hour": 2.5}) == Price(2.5, "device")
    assert Price.of({"price_per_hour": 98.32, "price_basis": "node"}).hourly(8) == 98.32
    assert Price(2.5).hourly(8) == 20.0


def test_no_throughput_no_cost():
    c = cell(10, 10, 1.0)
    empty = CellRow(key="k", input_len=128, output_len=32, status="failed", summary=CellSummary(), concurrency=4, id=1,
                    config="c")
    assert cell_cost(empty, Price(2.5), 1) is None and cell_cost(c, Price(2.5), 1) is not None


def test_the_split_reads_the_servers_spans_else_its_histogram_means():
    base = cell(4096, 256, 20.0)
    ledger = PhaseLedger(requests=10, joined=10, mean_ms={"prefill": 20.0, "decode": 180.0})
    means = ServerMeans(prefill_ms=30.0, decode_ms=170.0, requests=10)
    traced = dataclasses.replace(base, summary=base.summary.with_(ledger, means))
    scraped = dataclasses.replace(base, summary=base.summary.with_(means))
    assert phase_times(traced) == PhaseTimes(0.2, 1.8, "spans")
    assert phase_times(scraped) == PhaseTimes(0.3, 1.7, "histograms")
    assert phase_times(base) is None
    by_spans, by_means = cell_cost(traced, Price(2.5), 1), cell_cost(scraped, Price(2.5), 1)
    assert (by_spans.split_by, by_spans.input_share) == ("spans", pytest.approx(0.1))
    assert (by_means.split_by, by_means.input_share) == ("histograms", pytest.approx(0.15))
    assert by_spans.per_m_output == by_means.per_m_output == cell_cost(base, Price(2.5), 1).per_m_output


def _monitored(gpus: int) -> CellRow:
    c = cell(4096, 1024, 10.0)
    devices = [DeviceFigures(source="gpu", device=str(d)) for d in range(gpus)]
    return dataclasses.replace(c, summary=c.summary.with_(MonitorFigures(devices=devices)))


@pytest.mark.parametrize("basis", ["device", "node"])
@pytest.mark.parametrize("stated", [None, 4], ids=["base-url", "stated"])
def test_a_server_whose_devices_nothing_states_is_priced_on_the_devices_its_monitor_sampled(basis, stated):
    profile = load_profile("nvidia-vllm", ("parallelism.tp=4",)) if stated else None
    config = ConfigInfo(id=1, name="c", overrides={}, profile=profile, facts=ServerFacts(engine="vllm"), status="done",
                        message="")
    c = _monitored(2)
    n = devices(config, c)
    assert n == (stated or 2) and bool(seen(config, c)) == (stated is None)
    assert devices(config, cell(1, 1, 1.0)) == (stated or 1)            # nothing sampled, nothing stated: 1
    cost = cell_cost(c, Price(2.5, basis), n)
    assert cost.usd_per_hour == (2.5 * n if basis == "device" else 2.5)
    assert cost.per_m_output == pytest.approx(cost.usd_per_hour / (1024 / 10.0 * 3600) * 1e6, rel=1e-12)
