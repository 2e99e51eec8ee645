"""Why a cell is slow, when graph capture is the reason: a reference server with captured batch sizes
(1, 2, 4, 8) and an eager penalty (x 2) above them, swept over real HTTP. The 16-stream cell is marked `^`
(its batch runs eager) and its TPOT cliff from 8 streams is labelled graph capture, in the judgement and
in the report's scaling table. The server tells its captured sizes in /get_server_info, and the run
stores them with its facts."""

from __future__ import annotations

import re

import pytest

from tokenbench.cli.main import main
from tokenbench.judge.bottleneck import label
from tokenbench.judge.views import load_run
from tokenbench.store.db import Store
from tokenbench.testing.reference_server import ReferenceConfig, ReferenceProcess

pytestmark = pytest.mark.slow   # a real server and a sweep


def test_the_tpot_cliff_is_labelled_graph_capture(tmp_path):
    cfg = ReferenceConfig(ttft_ms=10, itl_ms=10, itl_per_running_ms=0.5, captured_batch_sizes=(1, 2, 4, 8),
                          eager_itl_factor=2.0)
    db = tmp_path / "db.sqlite"
    with ReferenceProcess(cfg) as ref:
        assert main(["sweep", "--base-url", ref.url, "--pairs", "32:24", "--concurrency", "2,4,8,16",
                     "--db", str(db)]) == 0
    store = Store(db)
    [run] = store.runs()
    data = load_run(store, run.id)
    assert data.configs[0].facts.graphs is not None and data.configs[0].facts.graphs.max_size == 8
    cells = {c.concurrency: c for c in data.cells_of("default")}
    assert [c for c, cell in cells.items() if cell.eager] == [16]
    found = label(data, cells[16], None)
    assert (found.kind, found.evidence) == ("graph", "graph_cliff") and found.values["max"] == 8
    assert found.values["times"] > 2      # (10 + 8) x 2 = 36 ms against 14 ms at 8 streams
    assert label(data, cells[8], None).kind != "graph"
    assert main(["report", run.id, "--db", str(db), "-o", str(tmp_path / "r")]) == 0
    page = (tmp_path / "r" / "report.md").read_text()
    row = next(line for line in page.splitlines() if line.startswith("| c=16"))
    assert row.startswith("| c=16^ |") and "graph capture: TPOT x" in row
    assert re.search(r"crossed the largest captured graph size 8 and runs eager", row)
    assert "^ = the cell's decode batch is above the largest captured graph size of its server" in page
    assert "/get_server_info cuda_graph_bs" in page
