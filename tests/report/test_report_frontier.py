"""The frontier (issue 26 item 4): every cell an operating point, tok/s per user (1000 / mean TPOT) against
tok/s per device (devices = TP x DP x PP), each with its 95 % interval; dominated points judged and greyed;
tokens per joule where power was sampled; in the report, in `compare`, and for imported published figures
(Study A's TP=1 vs TP=2)."""

from __future__ import annotations

import random
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokenbench.client.records import RequestRecord
from tokenbench.formats.importers import import_file
from tokenbench.judge import frontier as fr
from tokenbench.judge import hardware
from tokenbench.judge.intervals import Book
from tokenbench.judge.views import load_run
from tokenbench.metrics.cell_summary import CellSummary, Metric
from tokenbench.metrics.summary import summarize
from tokenbench.report import markdown
from tokenbench.report.build import build_report
from tokenbench.report.compare import compare
from tokenbench.report.document import Figure, Table
from tokenbench.spec.bench import Load
from tokenbench.spec.deploy_profile import Profile
from tokenbench.spec.server_facts import ServerFacts
from tokenbench.store.rows import CellRow

from .report_fixtures import ENV, FIXTURES, facts

MS = 1_000_000
PAIR = (64, 24)


def prof(tp: int = 1, dp: int = 1, args: dict | None = None) -> Profile:
    return Profile.model_validate({"name": "p", "engine": "vllm", "accelerator": "cpu",
                                   "model": {"bundled": "smollm2-135m-instruct", "params_b": 0.135},
                                   "parallelism": {"tp": tp, "dp": dp}, "args": args or {}})


def closed_loop(c: int, itl_ms: float, seed: int, n: int = 48) -> list[RequestRecord]:
    """n requests of PAIR over c streams, TTFT 20 ms and every gap `itl_ms`, each jittered by 4 %."""
    rng, free, out = random.Random(seed), [1_000 * MS] * c, []
    for i in range(n):
        slot = min(range(c), key=lambda k: free[k])
        start = free[slot]
        t = start + int(rng.gauss(20, 0.8) * MS)
        times = [t]
        for _ in range(PAIR[1] - 1):
            t += int(rng.gauss(itl_ms, 0.04 * itl_ms) * MS)
            times.append(t)
        out.append(RequestRecord(index=i, phase="measure", input_len=PAIR[0], output_len=PAIR[1], intended_ns=start,
                                 sent_ns=start + 10_000, end_ns=t + 20_000, status=200, token_times_ns=times,
                                 token_counts=[1] * PAIR[1], prompt_tokens=PAIR[0], completion_tokens=PAIR[1],
                                 cached_tokens=0, usage_source="server", finish_reason="length"))
        free[slot] = t + 30_000
    return out


def stored(store, run_id: str, configs: dict[str, tuple[Profile, dict[int, float]]], power_w: float | None = None,
           bad: tuple[str, int] | None = None, name: str | None = None) -> str:
    """A run with one config per entry: its profile and, per concurrency, the token interval (ms)."""
    spec = {"name": name} if name else {}
    store.create_run("sweep", "http://127.0.0.1:8000", spec, ["tokenbench", "sweep"], ENV, run_id=run_id)
    for k, (name, (profile, itls)) in enumerate(configs.items()):
        cid = store.upsert_config(run_id, name, overrides={}, profile=profile, facts=facts(1 << 20), status="done")
        for c, itl in itls.items():
            recs = closed_loop(c, itl, seed=10 * k + c)
            summary = summarize(recs, Load(concurrency=c, num_prompts=len(recs)), *PAIR)
            if power_w is not None:
                summary = CellSummary.from_dict({**summary.to_dict(), "monitor_accel_power_mean_w": power_w})
            status = "failed" if bad == (name, c) else "ok"
            store.save_cell(run_id, cid, CellRow(key=f"{PAIR[0]}:{PAIR[1]}/c={c}", input_len=PAIR[0],
                                                 output_len=PAIR[1], status=status, summary=summary, concurrency=c,
                                                 message="" if status == "ok" else "3/48 requests failed"), recs)
    store.set_run_status(run_id, "done")
    return run_id


TWO = {"tp1": (prof(tp=1), {1: 10.0, 2: 12.0, 4: 16.0}), "tp2": (prof(tp=2), {1: 8.0, 2: 9.0, 4: 30.0})}


def _front(store, run_id) -> fr.Frontier:
    run = load_run(store, run_id, requests=False)
    [one] = fr.frontiers(fr.run_members(run))
    return one


def _by(front: fr.Frontier) -> dict[str, fr.Point]:
    return {p.label: p for p in front.points}


def test_each_point_is_1000_over_tpot_and_throughput_per_device_with_intervals(store):
    run_id = stored(store, "F-1", TWO)
    run = load_run(store, run_id, requests=False)
    book = Book(run)
    points = _by(fr.frontiers(fr.run_members(run, book))[0])
    for cfg, devices in (("tp1", 1), ("tp2", 2)):
        for c in run.cells_of(cfg):
            p = points[f"{cfg} c={c.concurrency}"]
            tpot, out = c.summary.mean_tpot_ms, c.summary.output_throughput
            assert p.devices == devices
            assert p.per_user.value == pytest.approx(1000 / tpot) and not p.per_user.derived
            assert p.per_device.value == pytest.approx(out / devices) and not p.per_device.derived
            iv_t, iv_o = book.interval(c, Metric("tpot")), book.interval(c, Metric("output_throughput"))
            assert (p.per_user.lo, p.per_user.hi) == pytest.approx((1000 / iv_t.hi, 1000 / iv_t.lo))
            assert (p.per_device.lo, p.per_device.hi) == pytest.approx((iv_o.lo / devices, iv_o.hi / devices))
            assert p.per_user.lo < p.per_user.value < p.per_user.hi
            assert p.per_joule is None and p.per_kw is None            # no power sampled


def test_a_point_beaten_on_both_axes_is_dominated_by_the_widest_margin(store):
    front = _front(store, stored(store, "F-2", TWO))
    points = _by(front)
    # tp2 at 4 streams: 30 ms gaps (33 tok/s per user) and its throughput split over 2 devices
    assert points["tp2 c=4"].dominated_by is not None and points["tp2 c=4"].clearly
    assert points["tp1 c=4"].on_front and points["tp2 c=1"].on_front          # fastest per user
    for p in front.points:
        for q in front.points:
            beats = (q.per_user.value >= p.per_user.value and q.per_device.value >= p.per_device.value
                     and (q.per_user.value, q.per_device.value) != (p.per_user.value, p.per_device.value))
            assert not (beats and p.on_front), (q.label, p.label)
        if p.dominated_by is not None:
            d = p.dominated_by
            assert d.per_user.value >= p.per_user.value and d.per_device.value >= p.per_device.value
    assert [p.label for p in front.front()] == sorted((p.label for p in front.front()),
                                                      key=lambda s: -points[s].per_user.value)


def _pt(u: float, d: float, ok: bool = True) -> fr.Point:
    cell = CellRow(key="k", input_len=1, output_len=1, status="ok" if ok else "failed", summary=CellSummary(),
                   concurrency=1, id=0, config="x")
    return fr.Point(owner="x", cell=cell, devices=1, per_user=fr.Estimate(u), per_device=fr.Estimate(d))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 6), st.integers(1, 6), st.booleans()), min_size=1, max_size=9))
def test_the_frontier_is_exactly_the_set_no_ok_point_beats(raw):
    points = fr.judge_points([_pt(u, d, ok) for u, d, ok in raw])
    ok = [(p.per_user.value, p.per_device.value) for p in points if p.ok]
    for p in points:
        xy = (p.per_user.value, p.per_device.value)
        beaten = any(q[0] >= xy[0] and q[1] >= xy[1] and q != xy for q in ok)
        assert p.on_front == (p.ok and not beaten)
        assert (p.dominated_by is not None) == (p.ok and beaten)
        if p.dominated_by is not None:
            assert p.dominated_by.ok


def test_devices_are_tp_x_dp_x_pp_or_what_the_facts_state():
    none = ServerFacts(engine="vllm")
    assert hardware.device_count(prof(tp=2, dp=2), none) == 4
    assert hardware.device_count(prof(tp=2, args={"pipeline-parallel-size": 2}), none) == 4
    assert hardware.device_count(prof(tp=4, dp=2, args={"pp-size": 2}), none) == 16
    assert hardware.device_count(prof(tp=2), ServerFacts(engine="vllm", devices=8)) == 8


def _figure(doc, stem: str) -> Figure:
    return next(f for f in doc.figures() if f.name == stem)


def test_the_report_draws_intervals_greys_dominated_points_and_joins_the_frontier(store):
    run_id = stored(store, "F-3", TWO)
    run = load_run(store, run_id)
    front = fr.frontiers(fr.run_members(run))[0]
    svg = _figure(build_report(run, "en", [], "T"), f"frontier-{PAIR[0]}-{PAIR[1]}").svg
    assert len(re.findall(r'class="pt ', svg)) == len(front.points) == 6
    dominated = [p for p in front.points if p.dominated_by is not None]
    assert len(re.findall(r'class="pt dominated', svg)) == len(dominated) >= 1
    assert 'fill="#cfcfcf"' in svg
    with_iv = sum(p.per_user.has_interval for p in front.points) + sum(p.per_device.has_interval for p in front.points)
    assert len(re.findall(r'class="iv iv[xy]"', svg)) == with_iv == 12
    drawn = sorted((float(x), float(y)) for x, y in
                   re.findall(r'class="pt front" [^>]*data-x="([^"]+)" data-y="([^"]+)"', svg))
    expected = sorted((p.per_user.value, p.per_device.value) for p in front.front())
    assert drawn == [(pytest.approx(x, rel=1e-5), pytest.approx(y, rel=1e-5)) for x, y in expected]
    line = re.search(r'<polyline class="frontier" points="([^"]+)"', svg).group(1).split()
    assert len(line) == len(front.front())
    md = markdown.render(build_report(run, "en", [], "T"))
    assert "| tp2 | c=4 | dominated by tp" in md and "beyond both intervals" in md


def test_a_cell_that_is_not_ok_is_hollow_and_never_on_the_frontier(store):
    run_id = stored(store, "F-4", TWO, bad=("tp2", 1))
    front = _front(store, run_id)
    p = _by(front)["tp2 c=1"]
    assert not p.ok and not p.on_front and p.dominated_by is None
    assert not p.per_user.has_interval                         # a cell that is not ok gets no interval
    run = load_run(store, run_id)
    svg = _figure(build_report(run, "en", [], "T"), f"frontier-{PAIR[0]}-{PAIR[1]}").svg
    assert len(re.findall(r'class="pt notok', svg)) == 1


def test_sampled_power_gives_tokens_per_joule_and_a_per_kw_frontier(store):
    run_id = stored(store, "F-5", TWO, power_w=250.0)
    front = _front(store, run_id)
    for p in front.points:
        out = p.cell.summary.output_throughput
        assert p.per_joule.value == pytest.approx(out / 250.0) and p.per_kw.value == pytest.approx(out * 4)
    doc = build_report(load_run(store, run_id), "en", [], "T")
    assert {f.name for f in doc.figures()} >= {"frontier-64-24", "frontier-kw-64-24"}
    table = next(b for b in doc.blocks if isinstance(b, Table) and b.role == "frontier")
    assert table.headers[-2:] == ["tokens per joule", "tok/s per kW"]


def test_study_a_published_tp1_vs_tp2_as_a_frontier(store):
    run = load_run(store, import_file(store, FIXTURES / "study-a-headline.csv"), requests=False)
    fronts = {f.pair: f for f in fr.frontiers(fr.run_members(run))}
    short = fronts[(512, 512)]
    assert short.basis == "per_stream"          # TP=2 states no TPOT: every point placed by tok/s / concurrency
    pts = _by(short)
    assert pts["tp1 c=128"].per_user.value == pytest.approx(6452.2 / 128) and pts["tp1 c=128"].per_user.derived
    assert pts["tp2 c=128"].per_device.value == pytest.approx(4167.4 / 2)
    assert pts["tp2 c=128"].dominated_by.label == "tp1 c=128" and not pts["tp2 c=128"].clearly   # no intervals
    c1 = pts["tp1 c=1"]                         # no throughput published: Little's law over TTFT and TPOT
    assert c1.per_device.derived and c1.per_device.value == pytest.approx(512 / ((75.7 + 511 * 9.44) / 1000))
    long = _by(fronts[(16384, 2048)])
    assert long["tp1 c=96"].on_front and long["tp2 c=96"].on_front      # TP=2: faster per user, less per device
    assert long["tp2 c=96"].per_user.value > long["tp1 c=96"].per_user.value
    assert long["tp2 c=96"].per_device.value == pytest.approx(918.2 / 2)
    assert fronts[(16384, 1024)].basis == "tpot"
    md = markdown.render(build_report(run, "en", [], "T"))
    assert "≈ derived, not measured as such" in md and "| tp2 | c=128 | dominated by tp1 c=128 |" in md


def test_compare_puts_every_column_on_one_frontier(store):
    a = stored(store, "F-A", {"ref": (prof(), {1: 10.0, 4: 14.0})})
    b = stored(store, "F-B", {"ref": (prof(tp=2), {1: 9.0, 4: 12.0})})
    doc, _ = compare(store, [a, b], "en", "T")
    table = next(x for x in doc.blocks if isinstance(x, Table) and x.role == "frontier")
    assert {row[0] for row in table.rows} == {"F-A:ref", "F-B:ref"} and len(table.rows) == 4
    svg = _figure(doc, f"frontier-{PAIR[0]}-{PAIR[1]}").svg
    assert "F-A:ref" in svg and "F-B:ref" in svg and len(re.findall(r'class="pt ', svg)) == 4


def test_long_column_names_letter_their_points_and_the_legend_says_which(store):
    a = stored(store, "F-C", {"default": (prof(), {1: 10.0, 4: 14.0})}, name="llamacpp-one-slot")
    b = stored(store, "F-D", {"default": (prof(), {1: 9.0, 4: 12.0})}, name="llamacpp-two-slots")
    doc, _ = compare(store, [a, b], "en", "T")
    svg = _figure(doc, f"frontier-{PAIR[0]}-{PAIR[1]}").svg
    assert ">A: llamacpp-one-slot (F-C)<" in svg and ">B: llamacpp-two-slots (F-D)<" in svg
    labels = re.findall(r'class="ptlabel"[^>]*>([^<]+)<', svg)
    assert sorted(labels) == ["A c=1", "A c=4", "B c=1", "B c=4"]


def test_a_failed_cell_without_figures_is_listed_not_dropped(store):
    run_id = stored(store, "F-6", {"tp1": (prof(), {1: 10.0})})
    cid = store.upsert_config(run_id, "tp1", profile=prof(), facts=facts(1 << 20), status="done")
    store.save_cell(run_id, cid, CellRow(key=f"{PAIR[0]}:{PAIR[1]}/c=8", input_len=PAIR[0], output_len=PAIR[1],
                                         status="failed", summary=CellSummary(num_prompts=8, completed=0, failed=8),
                                         concurrency=8, message="no request was answered"), [])
    front = _front(store, run_id)
    assert [(owner, c.concurrency, why) for owner, c, why in front.missing] == [("tp1", 8, "not_ok")]
    md = markdown.render(build_report(load_run(store, run_id), "en", [], "T"))
    assert "tp1 64/24 c=8: no point (the cell is not ok and stored no figure to place it by)." in md
