"""judge/frontier.py against docs/metrics.md ("Frontier"): a point's speed per user (1000 / mean TPOT, its interval
turned over; or a closed loop's output tok/s / concurrency, derived), its throughput per device (Little's law
where a file gives none), tokens per joule and per kW, tokens per $; dominance against a brute-force Pareto
reference over any set of points (the widest-margin beater named, "clearly" only when both intervals clear),
cells not ok never dominating, and the basis chosen for the most points."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokenbench.judge import frontier as fr
from tokenbench.judge.intervals import Book
from tokenbench.judge.views import ConfigInfo, RunData
from tokenbench.metrics.cell_summary import CellSummary
from tokenbench.metrics.summary_groups import DeviceFigures, FigureHealth, FigureMark, MonitorFigures
from tokenbench.spec.server_facts import ServerFacts
from tokenbench.store.rows import CellRow

CONFIG = ConfigInfo(id=1, name="default", overrides={}, profile=None,
                    facts=ServerFacts(engine="reference"), status="done", message="")


def cell(cid: int = 1, status: str = "ok", concurrency: int | None = 4, rate: float | None = None,
         **figures) -> CellRow:
    return CellRow(key=f"k{cid}", input_len=16, output_len=8, status=status, summary=CellSummary(**figures),
                   concurrency=concurrency, request_rate=rate,
                   id=cid, config="default")


def member(cells: list[CellRow], spec: dict | None = None, config: ConfigInfo = CONFIG) -> fr.Member:
    run = RunData(id="r", created_at="2026-03-01", kind="bench", status="done", target="http://x",
                  tool_version="test", spec=spec or {}, command=[], environment={}, message="", configs=[config],
                  cells=cells, reader=lambda _cid: [])
    return fr.Member("m", run, config, Book(run))


NO_RECORDS = member([]).book


# ---- speed per user, throughput, energy, price ---------------------------------------------------
def test_speed_per_user_is_1000_over_the_mean_tpot():
    got = fr.per_user(NO_RECORDS, cell(mean_tpot_ms=8.0))
    assert got == fr.Estimate(125.0) and not got.has_interval
    assert fr.per_user(NO_RECORDS, cell(mean_tpot_ms=0.0)) is None and fr.per_user(NO_RECORDS, cell()) is None


def test_per_stream_speed_is_a_closed_loops_throughput_over_its_concurrency_derived():
    got = fr.per_user(NO_RECORDS, cell(output_throughput=400.0), "per_stream")
    assert got == fr.Estimate(100.0, derived=True)
    assert fr.per_user(NO_RECORDS, cell(output_throughput=400.0, concurrency=None, rate=2.0), "per_stream") is None
    assert fr.per_user(NO_RECORDS, cell(), "per_stream") is None


def test_an_estimate_scales_with_its_interval():
    assert fr.Estimate(10.0, 8.0, 12.0).scaled(0.5) == fr.Estimate(5.0, 4.0, 6.0)
    assert fr.Estimate(10.0, None, 12.0).scaled(2.0) == fr.Estimate(20.0)
    assert fr.Estimate(10.0, 8.0, None, derived=True).scaled(2.0) == fr.Estimate(20.0, derived=True)
    assert fr.Estimate(1.0, 0.5, 2.0).has_interval and not fr.Estimate(1.0, 0.5).has_interval


@pytest.mark.parametrize(("figures", "want"), [
    ({"mean_e2el_ms": 500.0}, 4 * 8 / 0.5),
    ({"mean_ttft_ms": 100.0, "mean_tpot_ms": 20.0}, 4 * 8 / ((100 + 7 * 20) / 1000)),
    ({"mean_e2el_ms": 400.0, "mean_ttft_ms": 100.0, "mean_tpot_ms": 20.0}, 4 * 8 / 0.4),
    ({"mean_ttft_ms": 100.0}, None), ({"mean_e2el_ms": 0.0}, None)])
def test_a_closed_loop_without_a_throughput_takes_littles_law(figures, want):
    got = fr.throughput(NO_RECORDS, cell(**figures))
    assert (got is None) if want is None else (got == fr.Estimate(pytest.approx(want), derived=True))
    assert fr.throughput(NO_RECORDS, cell(concurrency=None, rate=1.0, **figures)) is None


def test_a_stated_throughput_wins_over_littles_law():
    assert fr.throughput(NO_RECORDS, cell(output_throughput=77.0, mean_e2el_ms=500.0)) == fr.Estimate(77.0)


@pytest.mark.parametrize(("monitor", "want"), [
    ({"accel_tokens_per_joule": 0.5, "accel_power_mean_w": 999.0}, 0.5),
    ({"accel_power_mean_w": 400.0}, 200.0 / 400.0),
    ({"accel_power_mean_w": 0.0}, None), ({"accel_tokens_per_joule": 0.0}, None), ({}, None)])
def test_tokens_per_joule_from_the_energy_else_the_mean_power_and_per_kw(monitor, want):
    summary = CellSummary(output_throughput=200.0).with_(MonitorFigures(**monitor))
    per_kw, per_joule = fr._energy(CellRow(key="k", input_len=16, output_len=8, status="ok", summary=summary,
                                           concurrency=4), fr.Estimate(200.0, 180.0, 220.0))
    if want is None:
        assert per_kw is None and per_joule is None
        return
    assert per_joule.value == pytest.approx(want) and per_kw.value == pytest.approx(1000 * want)
    assert (per_joule.lo, per_joule.hi) == (pytest.approx(180.0 * want / 200), pytest.approx(220.0 * want / 200))


def test_no_energy_without_an_output():
    c = CellRow(key="k", input_len=16, output_len=8, status="ok",
                summary=CellSummary().with_(MonitorFigures(accel_power_mean_w=100.0)), concurrency=4)
    assert fr._energy(c, fr.Estimate(0.0)) == (None, None)


def test_a_point_per_device_and_per_dollar_at_the_runs_price():
    c = cell(mean_tpot_ms=10.0, output_throughput=800.0)
    config = ConfigInfo(id=1, name="default", overrides={}, profile=None,
                        facts=ServerFacts(engine="reference", devices=4), status="done", message="")
    p = fr.point(member([c], {"price_per_hour": 2.0}, config), c)
    assert p.devices == 4 and p.per_user == fr.Estimate(100.0) and p.per_device == fr.Estimate(200.0)
    assert p.per_usd == fr.Estimate(pytest.approx(800.0 * 3600 / 8.0))
    node = fr.point(member([c], {"price_per_hour": 2.0, "price_basis": "node"}, config), c)
    assert node.per_usd == fr.Estimate(pytest.approx(800.0 * 3600 / 2.0))
    assert fr.point(member([c], {}, config), c).per_usd is None


def test_a_cell_without_speed_or_throughput_has_no_point_and_says_which():
    m = member([])
    assert fr.point(m, cell(output_throughput=10.0)) == "no_speed"
    assert fr.point(m, cell(mean_tpot_ms=10.0, concurrency=None, rate=2.0)) == "no_throughput"


def test_devices_seen_by_the_monitor_only_where_nothing_states_them():
    sampled = cell().summary.with_(MonitorFigures(devices=[DeviceFigures(source="gpu", device=str(i)) for i in range(3)]))
    c = CellRow(key="k", input_len=16, output_len=8, status="ok", summary=sampled, concurrency=4)
    assert fr.seen(CONFIG, c) == 3 and fr.devices(CONFIG, c) == 3
    assert fr.devices(CONFIG, cell()) == 1 and fr.devices(CONFIG) == 1 and fr.seen(CONFIG, None) is None
    stated = ConfigInfo(id=1, name="d", overrides={}, profile=None,
                        facts=ServerFacts(engine="reference", devices=2), status="done", message="")
    assert fr.seen(stated, c) is None and fr.devices(stated, c) == 2
    nonsense = ConfigInfo(id=1, name="d", overrides={}, profile=None,
                          facts=ServerFacts(engine="reference", devices=-2), status="done", message="")
    assert fr.devices(nonsense, c) == 1                                    # a stated count below 1: one device


# ---- dominance -----------------------------------------------------------------------------------
def _pt(i: int, user: float, device: float, ok: bool = True, user_iv: tuple | None = None,
        device_iv: tuple | None = None) -> fr.Point:
    c = cell(i, "ok" if ok else "failed")
    return fr.Point(owner=f"p{i}", cell=c, devices=1, per_user=fr.Estimate(user, *(user_iv or (None, None))),
                    per_device=fr.Estimate(device, *(device_iv or (None, None))))


axis = st.integers(0, 6).map(float)


def _margin(q: fr.Point, p: fr.Point) -> float:
    """How far q beats p: the smaller of its two ratios (a figure of 0 divides as 1e-12)."""
    return min(q.per_user.value / max(p.per_user.value, 1e-12), q.per_device.value / max(p.per_device.value, 1e-12))


@settings(deadline=None)
@given(st.lists(st.tuples(axis, axis, st.booleans()), min_size=1, max_size=8))
def test_dominance_is_brute_force_pareto_over_the_ok_points(raw):
    points = [_pt(i, u, d, ok) for i, (u, d, ok) in enumerate(raw)]
    judged = fr.judge_points(points)
    for p, j in zip(points, judged, strict=True):
        beaters = [q for q in points if q.ok and p.ok and q.per_user.value >= p.per_user.value
                   and q.per_device.value >= p.per_device.value
                   and (q.per_user.value, q.per_device.value) != (p.per_user.value, p.per_device.value)]
        assert (j.dominated_by is None) == (not beaters)
        if beaters:
            assert _margin(j.dominated_by, p) == max(_margin(q, p) for q in beaters)
        assert j.on_front == (p.ok and not beaters)


def test_equal_points_do_not_dominate_each_other_and_one_axis_equal_does():
    a, b, c = _pt(1, 5.0, 5.0), _pt(2, 5.0, 5.0), _pt(3, 5.0, 4.0)
    judged = fr.judge_points([a, b, c])
    assert judged[0].on_front and judged[1].on_front and judged[2].dominated_by is not None


def test_the_widest_margin_beater_is_named():
    p = _pt(1, 1.0, 1.0)
    near, far = _pt(2, 1.5, 4.0), _pt(3, 3.0, 2.0)        # margins: min(1.5, 4) = 1.5 and min(3, 2) = 2
    assert fr.judge_points([p, near, far])[0].dominated_by is far


def test_a_point_at_0_is_beaten_by_the_margin_over_a_tiny_figure():
    zero = _pt(1, 0.0, 1.0)
    judged = fr.judge_points([zero, _pt(2, 1.0, 1.0), _pt(3, 2.0, 1.5)])
    assert judged[0].dominated_by.owner == "p3"


def test_a_failed_cell_never_dominates_and_is_never_on_the_front():
    bad, good = _pt(1, 9.0, 9.0, ok=False), _pt(2, 1.0, 1.0)
    judged = fr.judge_points([bad, good])
    assert judged[1].on_front and judged[0].dominated_by is None and not judged[0].on_front


@pytest.mark.parametrize(("q_user", "q_device", "clearly"), [((5.0, 6.0), (5.0, 6.0), True),
                                                              ((4.9, 6.0), (5.0, 6.0), False),
                                                              ((5.0, 6.0), (4.9, 6.0), False),
                                                              (None, (5.0, 6.0), False)])
def test_clearly_dominated_when_both_lower_bounds_clear_the_upper_bounds(q_user, q_device, clearly):
    p = _pt(1, 4.0, 4.0, user_iv=(3.0, 5.0), device_iv=(3.0, 5.0))
    q = _pt(2, 5.5, 5.5, user_iv=q_user, device_iv=q_device)
    assert fr.judge_points([p, q])[0].clearly == clearly


def test_a_point_moved_by_a_mark_on_tpot_or_throughput_is_not_ok_one_on_ttft_is():
    mark = FigureMark(cause="host_contention", bound=9.0, tolerance=1.0)
    for key, ok in (("mean_tpot_ms", False), ("output_throughput", False), ("mean_ttft_ms", True)):
        s = CellSummary().with_(FigureHealth(client_marks={key: mark}))
        p = fr.Point(owner="o", cell=CellRow(key="k", input_len=16, output_len=8, status="ok", summary=s,
                                             concurrency=4), devices=1, per_user=fr.Estimate(1.0),
                                             per_device=fr.Estimate(1.0))
        assert p.ok == ok and (p.state.kind == ("ok" if ok else "moved"))
    assert _pt(1, 1.0, 1.0).label == "p1 c=4"


# ---- a frontier --------------------------------------------------------------------------------
def test_a_frontier_of_one_pair_with_its_missing_cells_and_front_order():
    cells = [cell(1, mean_tpot_ms=10.0, output_throughput=100.0), cell(2, mean_tpot_ms=20.0, output_throughput=300.0),
             cell(3, mean_tpot_ms=25.0, output_throughput=200.0), cell(4, mean_ttft_ms=5.0),
             cell(5, "failed", mean_ttft_ms=5.0), cell(6, "failed", mean_tpot_ms=5.0, output_throughput=900.0)]
    cells = [dataclasses.replace(c, concurrency=c.id) for c in cells]             # one load each
    got = fr.frontier([member(cells)], (16, 8))
    assert got.basis == "tpot" and got.pair == (16, 8)
    assert [p.cell.id for p in got.front()] == [1, 2]          # cell 6 failed: drawn, never on the front
    assert [p.cell.id for p in got.points] == [1, 2, 3, 6] and got.points[2].dominated_by.cell.id == 2
    assert [(c.id, why) for _, c, why in got.missing] == [(4, "no_speed"), (5, "not_ok")]
    assert fr.frontier([member(cells)], (32, 8)) is None
    assert [f.pair for f in fr.frontiers([member(cells)])] == [(16, 8)]
    assert not got.has_power and not got.has_price


def test_the_basis_is_tpot_unless_per_stream_places_more_cells():
    tpot_only = [(NO_RECORDS, cell(1, mean_tpot_ms=10.0))]
    stream_only = [(NO_RECORDS, cell(2, output_throughput=100.0))]
    both = [(NO_RECORDS, cell(3, mean_tpot_ms=10.0, output_throughput=100.0))]
    assert fr.choose_basis(tpot_only) == "tpot" and fr.choose_basis(stream_only) == "per_stream"
    assert fr.choose_basis([*tpot_only, *stream_only]) == "tpot"               # a tie keeps TPOT
    assert fr.choose_basis([*stream_only, *stream_only, *tpot_only]) == "per_stream"
    assert fr.choose_basis(both) == "tpot"
