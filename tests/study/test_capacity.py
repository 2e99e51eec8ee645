"""`--find-capacity` over real HTTP against the reference server's load model, whose SLO boundary is known in
closed form (tokenbench.testing.expect): each search's interval holds the true boundary, names the binding
SLO and stays within its cell budget; two tiers are answered from one set of cells; the search is stored
and reported; a resume replays it without a new cell. The load models are chosen so the loads next to the
boundary sit 5-40 % from the limit (a busy host moves a mean TPOT by well under that: the server's deadlines
are absolute, and a late read moves one chunk of ~20)."""

from __future__ import annotations

import json

import pytest

from tokenbench.cli.main import main
from tokenbench.store.db import Store
from tokenbench.testing import expect as X
from tokenbench.testing.reference_server import ReferenceConfig, ReferenceProcess

pytestmark = pytest.mark.slow   # subprocesses, real servers: tens of seconds per search

# TPOT = 10 + 0.5 x (the batch padded to 1, 2, 4, 8, 16); above 16 eager x 1.5: mean <= 16 up to 8 streams
# (9 pads to 16: 18 ms), mean <= 20 up to 16 (17 runs eager: 27.75 ms)
GRAPHS = ReferenceConfig(ttft_ms=20, itl_ms=10, itl_per_running_ms=0.5, captured_batch_sizes=(1, 2, 4, 8, 16),
                         eager_itl_factor=1.5)
# TPOT = 10 + running, constant arrivals: mean <= 20 up to 25 requests/s, <= 24 up to 29.4
LINEAR = ReferenceConfig(ttft_ms=20, itl_ms=10, itl_per_running_ms=1.0)
SHAPE = X.Shape(prompt_tokens=64, output_tokens=20)


def _search(db, run_id=None):
    store = Store(db)
    run = store.run(run_id) if run_id else store.runs()[-1]
    [row] = store.searches(run.id)
    return run, row.record, store.cells(run.id)


def _answer(record, tier):
    return next(a for a in record.answers if a.tier == tier)


def test_concurrency_two_tiers_hold_their_closed_form_boundaries(tmp_path, capsys):
    true = {"slo": X.max_concurrency(GRAPHS, [X.Slo("tpot", "mean", 16)], SHAPE),
            "wide": X.max_concurrency(GRAPHS, [X.Slo("tpot", "mean", 20)], SHAPE)}
    assert true == {"slo": 8, "wide": 16}
    db = tmp_path / "db.sqlite"
    with ReferenceProcess(GRAPHS) as ref:
        assert main(["sweep", "--base-url", ref.url, "--pairs", "64:20", "--find-capacity", "--slo", "tpot:mean<=16",
                     "--slo-tier", "wide=tpot:mean<=20", "--capacity-max", "32", "--capacity-budget", "18",
                     "--sustain-s", "3", "--db", str(db)]) == 0
    out = capsys.readouterr().out
    run, record, cells = _search(db)
    assert record.dimension == "concurrency" and len(record.tried) <= 18 and len(cells) == len(record.tried)
    for tier, boundary in true.items():
        a = _answer(record, tier)
        assert a.lo is not None and a.hi is not None and a.lo <= boundary < a.hi, (tier, a)
        assert a.capacity == boundary and a.binding is not None and a.binding.margin < 0
        assert a.binding.limit.text == ("tpot:mean<=16" if tier == "slo" else "tpot:mean<=20")
        assert f"(tier {tier}: {a.binding.limit.text}): {boundary} streams, boundary in [{a.lo:g}, {a.hi:g}]" in out
    assert record.sustain is not None and record.sustain.load == 8 and record.sustain.duration_s == 3
    assert {"bracket", "refine", "sustain"} <= {t.role for t in record.tried}


def test_rate_two_tiers_hold_their_closed_form_boundaries_and_are_reported(tmp_path, capsys):
    true = {"slo": X.max_rate(LINEAR, [X.Slo("tpot", "mean", 20)], SHAPE),
            "wide": X.max_rate(LINEAR, [X.Slo("tpot", "mean", 24)], SHAPE)}
    db = tmp_path / "db.sqlite"
    with ReferenceProcess(LINEAR) as ref:
        assert main(["sweep", "--base-url", ref.url, "--pairs", "64:20", "--find-capacity", "rate", "--arrival",
                     "constant", "--slo", "tpot:mean<=20", "--slo-tier", "wide=tpot:mean<=24", "--capacity-start",
                     "8", "--duration", "6", "--capacity-budget", "14", "--sustain-s", "4", "--timeslice-s", "1",
                         "--db", str(db)]) == 0
    run, record, cells = _search(db)
    assert record.dimension == "rate" and len(record.tried) <= 14 and len(cells) == len(record.tried)
    assert {c.request_rate for c in cells} == {t.load for t in record.tried}     # every cell at its asked rate
    for tier, boundary in true.items():
        a = _answer(record, tier)
        assert a.lo is not None and a.hi is not None and a.lo <= boundary <= a.hi, (tier, boundary, a)
        assert a.binding is not None and a.binding.limit.metric == "tpot" and a.binding.margin < 0
    capsys.readouterr()
    assert main(["report", run.id, "--db", str(db), "-o", str(tmp_path / "r")]) == 0
    page = (tmp_path / "r" / "report.md").read_text()
    a = _answer(record, "slo")
    assert "Capacity: the highest load meeting the SLOs" in page and "request rate (requests/s, constant" in page
    assert f"\\[{a.lo:g}, {a.hi:g}\\]" in page and f"tpot:mean&lt;=20 at {a.fail_load:g}: " in page
    assert "Sustain cell 64:20/rate=" in page and "Timeslices and steady state" in page
    assert "| sustain |" in page and "| bracket |" in page
    html = (tmp_path / "r" / "report.html").read_text()
    assert 'class="capacity"' in html and 'class="capacity-cells"' in html


def test_users_search_closed_loop_sessions_to_the_closed_form_of_their_streams(tmp_path, capsys):
    """Users with no think time each keep one turn in flight (but for the client's step between turns), so
    the boundary in users is the closed loop's in streams: TPOT = 10 + 2 x running, mean <= 21 up to 5."""
    cfg = ReferenceConfig(ttft_ms=20, itl_ms=10, itl_per_running_ms=2.0)
    boundary = X.max_concurrency(cfg, [X.Slo("tpot", "mean", 21)], SHAPE)
    assert boundary == 5
    db = tmp_path / "db.sqlite"
    with ReferenceProcess(cfg) as ref:
        assert main(["sweep", "--base-url", ref.url, "--dataset-name", "sessions", "--turns", "3", "--pairs",
                     "64:20", "--assistant-turns", "fixed", "--find-capacity", "users", "--slo", "tpot:mean<=21",
                     "--capacity-max", "16", "--capacity-budget", "12", "--sustain-s", "3", "--db", str(db)]) == 0
    run, record, cells = _search(db)
    [a] = record.answers
    assert record.dimension == "users" and len(record.tried) <= 12 and all("/users=" in c.key for c in cells)
    assert a.lo is not None and a.hi is not None and a.lo <= boundary < a.hi and a.capacity == boundary, a
    assert a.binding is not None and a.binding.limit.text == "tpot:mean<=21"
    assert f"(tier slo: tpot:mean<=21): {boundary} users" in capsys.readouterr().out


def test_the_flag_alone_searches_concurrency_as_before_and_a_resume_replays_the_search(tmp_path, capsys):
    """A server that runs 6 requests at once and queues the rest: TTFT stays ~10 ms up to 6, a queued
    request waits for a running one to end (about 10 + 7 x 20 ms more); `--slo ttft=80` alone judges the
    share of requests meeting it (slo_attainment, 0.9): 6 of 7 at 7 streams."""
    db = tmp_path / "db.sqlite"
    args = ["sweep", "--pairs", "16:8", "--find-capacity", "--slo", "ttft=80", "--sustain-s", "2", "--db", str(db)]
    with ReferenceProcess(ReferenceConfig(ttft_ms=10, itl_ms=20, max_running=6)) as ref:
        assert main([*args[:1], "--base-url", ref.url, *args[1:]]) == 0
        out = capsys.readouterr().out
        run, record, cells = _search(db)
        assert main(["sweep", "--resume", run.id, "--db", str(db)]) == 0
    [a] = record.answers
    assert (a.capacity, a.fail_load, a.lo) == (6, 7, 6) and a.hi is not None and a.hi >= 7
    assert "capacity 16:8 (tier slo: goodput:fraction>=0.9): 6 streams" in out
    assert [c.key for c in cells if c.repeat == 0][:4] == ["16:8/c=1", "16:8/c=2", "16:8/c=4", "16:8/c=6"]
    again = _search(db, run.id)
    assert again[1] == record and len(again[2]) == len(cells)                  # replayed: no new cell
    assert main(["export", run.id, "--db", str(db), "-o", str(tmp_path / "run.json")]) == 0
    exported = json.loads((tmp_path / "run.json").read_text())["searches"]
    assert exported[0]["answers"][0]["capacity"] == 6 and len(exported[0]["tried"]) == len(cells)
