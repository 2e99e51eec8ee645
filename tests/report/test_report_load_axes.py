"""Each load dimension on its own axis (issue 28 item 5): closed-loop concurrency, users (sessions) and
open-loop request rate are never drawn on one axis, never share a table column and are never compared with
each other; a capped rate stays on the rate axis with its cap named."""

from __future__ import annotations

import math
import re
from dataclasses import replace

import pytest

from tokenbench.judge.load_axes import LoadKey, load_key
from tokenbench.judge.views import RunData, load_run
from tokenbench.metrics.summary_groups import SessionFigures
from tokenbench.report import markdown, plots, svg
from tokenbench.report.build import build_report
from tokenbench.report.compare import compare
from tokenbench.report.document import Table

from .report_fixtures import build_mixed_run

PAIR = (128, 32)


def stored(store, run_id: str, **kw) -> str:
    return build_mixed_run(store, run_id, **kw)


def _ticks(chart: str) -> list[tuple[float, float]]:
    """(pixel x, value) of the x-axis tick labels."""
    y = svg.f(svg.TOP + (svg.H - svg.TOP - svg.BOTTOM) + 19)
    return [(float(px), float(v)) for px, v in re.findall(rf'<text x="([\d.]+)" y="{y}" text-anchor="middle">([\d.]+)<',
                                                        chart)]


def x_values(chart: str) -> set[float]:
    """The data x of every point drawn, read back through the log2 axis from its tick labels."""
    (p0, v0), (p1, v1) = _ticks(chart)[0], _ticks(chart)[-1]
    scale = (math.log2(v1) - math.log2(v0)) / (p1 - p0)
    cx = [float(x) for x in re.findall(r'<circle [^>]*cx="([\d.]+)"', chart)]
    return {round(2 ** (math.log2(v0) + (x - p0) * scale), 2) for x in cx}


def _axis_title(chart: str) -> str:
    return re.search(rf'<text x="[\d.]+" y="{svg.H - 12}" text-anchor="middle">([^<]+)<', chart).group(1)


def test_closed_loop_and_rate_cells_get_a_panel_each_with_the_right_x(store):
    run = load_run(store, stored(store, "L-1"), requests=False)
    figs = {f.name: f for f in plots.load_figures(run, "en")}
    assert list(figs) == ["throughput", "ttft", "tpot", "throughput-rate", "ttft-rate", "tpot-rate",
                          "latency-throughput"]
    for stem in ("throughput", "ttft", "tpot"):
        assert x_values(figs[stem].svg) == {1.0, 2.0, 4.0}
        assert x_values(figs[f"{stem}-rate"].svg) == {1.0, 3.0}
    assert _axis_title(figs["throughput"].svg) == "concurrency (requests in flight)"
    assert _axis_title(figs["throughput-rate"].svg) == "request rate (requests/s)"
    assert figs["throughput-rate"].title == "Output throughput vs request rate"
    tips = re.findall(r'data-tip="([^"]+)"', figs["throughput-rate"].svg)
    assert tips and all("/s" in tip and " c=" not in tip for tip in tips)


def test_a_capped_rate_stays_on_the_rate_axis_with_its_cap_named(store):
    run = load_run(store, stored(store, "L-2", closed=(), rates=(0.5, 2.0), cap=8), requests=False)
    figs = {f.name: f for f in plots.load_figures(run, "en")}
    assert "throughput" not in figs and x_values(figs["throughput-rate"].svg) == {0.5, 2.0}
    assert _axis_title(figs["throughput-rate"].svg) == "request rate (requests/s), at most 8 in flight"
    assert "2/s cap 8" in figs["throughput-rate"].svg
    zh = {f.name: f for f in plots.load_figures(run, "zh")}
    assert _axis_title(zh["throughput-rate"].svg) == "请求速率（请求/秒），在途请求上限 8"


def test_rates_with_different_caps_are_separate_series(store):
    run = load_run(store, stored(store, "L-3", closed=(), rates=(1.0,), configs=("slots2",)), requests=False)
    capped = replace(run.cells[0], id=99, summary=run.cells[0].summary.model_copy(update={"max_concurrency": 4}))
    run2 = RunData(**{**run.__dict__, "cells": [*run.cells, capped], "_merged": {}})
    [fig] = [f for f in plots.load_figures(run2, "en") if f.name == "throughput-rate"]
    assert "128/32 cap 4" in fig.svg and _axis_title(fig.svg) == "request rate (requests/s); each series names its in-flight cap"


def test_users_cells_get_their_own_axis(store):
    run = load_run(store, stored(store, "L-4", rates=(), configs=("slots2",)), requests=False)
    users = [replace(c, id=100 + i, concurrency=u, summary=c.summary.with_(SessionFigures(users=u)))   # users as stored
             for i, (c, u) in enumerate(zip(run.cells, (2, 8), strict=False))]
    run2 = RunData(**{**run.__dict__, "cells": [*run.cells, *users], "_merged": {}})
    figs = {f.name: f for f in plots.load_figures(run2, "en")}
    assert x_values(figs["throughput"].svg) == {1.0, 2.0, 4.0}
    assert x_values(figs["throughput-users"].svg) == {2.0, 8.0}
    assert _axis_title(figs["throughput-users"].svg) == "users (concurrent sessions)"


def test_tables_and_comparisons_never_pair_a_rate_with_a_concurrency(store):
    run_id = stored(store, "L-5", closed=(1, 3), rates=(3.0,))
    run = load_run(store, run_id, requests=False)
    assert run.cell_at("slots2", PAIR, 3).concurrency == 3
    assert run.cell_at("slots2", PAIR, load_key(None, 3.0)).request_rate == 3.0
    doc = build_report(run, "en", [], "T")
    matrix = next(b for b in doc.blocks if isinstance(b, Table) and b.role == "matrix")
    assert matrix.headers[1:4] == ["c=1", "c=3", "3/s"]
    cmp = next(b for b in doc.blocks if isinstance(b, Table) and b.role == "configcmp")
    assert sorted({row[1] for row in cmp.rows}) == ["3/s", "c=1", "c=3"] and len(cmp.rows) == 9
    other = stored(store, "L-6", closed=(3,), rates=(1.0,), configs=("slots2",))
    cdoc, _ = compare(store, [f"{run_id}:slots2", other], "en", "T")
    loads = {row[0] for b in cdoc.blocks if isinstance(b, Table) and b.role == "verdicts" for row in b.rows}
    assert loads == {"c=3"}                   # 1 req/s of the other run is no neighbour of c=1 here
    names = [f.name for f in cdoc.figures()]
    assert "cmp-throughput" in names and "cmp-throughput-rate" in names
    assert "![Output throughput vs request rate](cmp-throughput-rate.svg)" in markdown.render(cdoc)


def test_load_keys_sort_by_dimension_then_value_and_say_their_unit():
    keys = [load_key(None, 0.5, cap=8), load_key(4, None), load_key(None, 3.0), load_key(2, None),
            load_key(None, None, users=16), load_key(None, None)]
    assert [k.label for k in sorted(keys)] == ["c=2", "c=4", "users=16", "0.5/s cap 8", "3/s", "replay"]
    assert load_key(3, None) != load_key(None, 3.0) and isinstance(load_key(1, None), LoadKey)
    sessions = load_key(None, 2.0, sessions=True)          # sessions (agents) started per second: an axis of its own
    assert sessions.dimension == "session_rate" and sessions.label == "2 sessions/s"
    assert sessions != load_key(None, 2.0) and sorted([sessions, load_key(None, 8.0), load_key(None, None)]) == [
        load_key(None, 8.0), sessions, load_key(None, None)]
    with pytest.raises(AttributeError):
        load_key(1, None).rank = 2           # frozen: a key never changes under a dict
