"""Job figures as headline figures (docs/metrics.md, "Jobs"): a `Metric` reads a statistic over a cell's jobs,
is keyed like the request figures and marked as the request figure its turns are made of; repeats of a cell
merge their jobs as every figure merges: each statistic the mean of the repeats', with the interval of that mean,
which is the one the report's interval book gives, so a merged cell's job figure keeps its interval."""

from __future__ import annotations

import numpy as np
import pytest

from tokenbench.metrics import uncertainty as u
from tokenbench.metrics.cell_summary import CellSummary, Metric
from tokenbench.metrics.summary import _job_stats, mean_of_repeats
from tokenbench.metrics.summary_groups import FigureHealth, FigureMark, JobFigures


def jobs(each: list[float], tool: float = 0.1) -> JobFigures:
    n = len(each)
    return JobFigures(started=n, complete=n, incomplete=0, completion_ms=_job_stats(each),
                      ttft_max_ms=_job_stats([x / 10 for x in each]), tpot_max_ms=_job_stats([x / 100 for x in each]),
                      turns_mean=3.0, turns_max=3, server_share=1 - tool, tool_share=tool, client_share=0.0,
                      ids=[f"s-{i}" for i in range(n)], each_completion_ms=each, each_server_ms=each,
                      each_tool_ms=[0.0] * n, each_ttft_max_ms=[x / 10 for x in each],
                      each_tpot_max_ms=[x / 100 for x in each], each_turns=[3] * n)


def summary(each: list[float], **kw) -> CellSummary:
    return CellSummary(completed=3 * len(each), mean_e2el_ms=10.0, p95_e2el_ms=12.0).with_(jobs(each, **kw))


def test_a_job_figure_is_read_keyed_and_marked_like_a_request_figure():
    s = summary([100.0, 120.0, 140.0, 160.0, 400.0])
    assert Metric("job", "p95").of(s) == pytest.approx(float(np.percentile([100, 120, 140, 160, 400], 95)))
    assert Metric("job_ttft", "p50").of(s) == pytest.approx(14.0) and Metric("job_tpot", "mean").of(s) == pytest.approx(1.84)
    assert Metric("job", "p50").key == "median_job_ms" and Metric("job_tpot", "p95").key == "p95_job_tpot_ms"
    assert not Metric("job", "mean").higher_is_better
    assert Metric("job", "p95").of(CellSummary(completed=3)) is None            # a cell without sessions
    marked = s.with_(FigureHealth(client_marks={"p95_e2el_ms": FigureMark(cause="client_cpu", bound=9.0, tolerance=1.0)}))
    health = marked.figures
    assert health.mark("p95_job_ms") == health.mark("p95_e2el_ms") is not None   # its turns' end figure's mark
    assert health.mark("p95_job_ttft_ms") is None and health.mark("median_job_ms") is None


def test_repeats_merge_their_jobs_into_the_mean_with_the_interval_of_the_mean():
    a, b = [100.0, 110.0, 130.0, 160.0], [90.0, 150.0, 170.0, 175.0, 180.0]
    merged = mean_of_repeats([summary(a, tool=0.1), summary(b, tool=0.3)], [])
    j = merged.jobs
    assert j is not None and j.tool_share == pytest.approx(0.2) and j.complete == pytest.approx(4.5)
    for stat in ("mean", "p50", "p95"):
        iv = u.interval([a, b], stat, len(a) + len(b))
        assert j.completion_ms[stat].value == pytest.approx((u.point([a], stat) + u.point([b], stat)) / 2)
        assert (j.completion_ms[stat].lo, j.completion_ms[stat].hi) == pytest.approx((iv.lo, iv.hi))
    assert j.each_completion_ms == a + b and j.ids == [f"s-{i}" for i in range(4)] + [f"s-{i}" for i in range(5)]
    stored = CellSummary.from_dict(merged.to_dict()).jobs                     # and it is stored as it reads
    assert stored is not None and stored.completion_ms == j.completion_ms and stored.each_turns == j.each_turns
    one = mean_of_repeats([summary(a)], []).jobs                              # one repeat: its own, unchanged
    assert one is not None and one.completion_ms == jobs(a).completion_ms
