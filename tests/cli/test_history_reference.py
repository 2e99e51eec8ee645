"""A series against the reference server: runs given one name (`--series`), each on a server process of its
own, are a history; after five runs of one server, a sixth of a server whose token interval is half again as
long is outside the band the first five give, on the figures it moves; `tokenbench history` prints and writes
it (markdown, HTML, an SVG per cell and figure, both languages) and the last run's report shows it. No wall-clock
bound: the server's timings are the truth."""

from __future__ import annotations

import pytest

from tests.study.helpers import added, ids
from tokenbench.cli.main import main
from tokenbench.judge.history import history, runs_of
from tokenbench.judge.views import load_run
from tokenbench.metrics.cell_summary import Metric
from tokenbench.report.build import build_report
from tokenbench.report.history import REPORT_METRICS
from tokenbench.store.db import Store
from tokenbench.testing.reference_server import ReferenceConfig, ReferenceProcess

pytestmark = pytest.mark.slow
SERIES = "nightly-ref"


def bench(config: ReferenceConfig, db, series: str = SERIES) -> str:
    before = ids(db)
    with ReferenceProcess(config) as server:            # a launch of its own
        assert main(["bench", "--base-url", server.url, "--input-len", "16", "--output-len", "12",
                     "--concurrency", "4", "--num-prompts", "32", "--series", series, "--db", str(db),
                     "--disable-tqdm"]) == 0
    return added(db, before)


def test_a_changed_server_at_the_end_of_a_series_is_outside_its_band(tmp_path, capsys):
    db = tmp_path / "results.db"
    same = ReferenceConfig(ttft_ms=30, itl_ms=8)
    ids = [bench(same, db) for _ in range(5)]
    other = bench(same, db, series="another")             # not of this series
    ids.append(bench(ReferenceConfig(ttft_ms=30, itl_ms=12), db))
    store = Store(db)
    assert [r.id for r in runs_of(store, SERIES)] == ids and store.run(ids[0]).spec["series"] == SERIES
    h = history(SERIES, runs_of(store, SERIES), (Metric("tpot", "mean"), Metric("itl", "p50"),
                                                  Metric("output_throughput")))
    assert len(h.tracks) == 3 and h.runs == tuple(ids)
    for tr in h.tracks:
        states = [p.state for p in tr.points]
        assert states[:3] == ["learning"] * 3 and all(p.band is not None for p in tr.points[3:])
        last = tr.points[-1]
        assert last.state == "worse", (tr.metric, states, last)
        assert (last.value > last.band.hi) if not tr.metric.higher_is_better else (last.value < last.band.lo)
        assert last.band.noise.units == 5 and last.band.noise.df == 4

    capsys.readouterr()
    assert main(["history", SERIES, "--db", str(db), "--figures", "tpot:mean,ttft:p50", "-o", str(tmp_path / "h")]) == 0
    out = capsys.readouterr().out
    assert "Series nightly-ref: 6 runs" in out and "outside: worse" in out and other not in out
    md = (tmp_path / "h" / "history.md").read_text()
    assert "TPOT (ms) mean" in md and md.count("| " + ids[-1]) == 2 and "![" in md
    svgs = sorted((tmp_path / "h").glob("*.svg"))
    assert svgs and all("<polygon class=\"band\"" in p.read_text() for p in svgs)
    assert any("outside the band" in p.read_text() for p in svgs)
    html = (tmp_path / "h" / "history.html").read_text()
    assert "<svg" in html and "outside: worse" in html
    assert main(["history", SERIES, "--db", str(db), "--figures", "tpot:mean", "--lang", "zh", "-o",
                 str(tmp_path / "h"), "--format", "md"]) == 0
    assert "区间外：更差" in (tmp_path / "h" / "history.zh.md").read_text()

    # the last run's report shows its series up to it; a run of no series shows none
    run = load_run(store, ids[-1])
    from tokenbench.judge.history import of_run
    doc = build_report(run, "en", [], "T", series=of_run(store, run, REPORT_METRICS))
    headings = [b.text for b in doc.blocks if type(b).__name__ == "Heading"]
    assert any(h.endswith("Series history") for h in headings)
    earlier = load_run(store, ids[2])
    assert len(of_run(store, earlier, REPORT_METRICS).runs) == 3        # up to the run itself

    capsys.readouterr()
    assert main(["history", "no-such-series", "--db", str(db)]) == 2
    assert "no run of the series 'no-such-series'" in capsys.readouterr().err
