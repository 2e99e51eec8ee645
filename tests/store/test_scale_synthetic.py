"""bench/scale.py's synthetic rows (a cell of N plausible records written straight into a results database,
for sizes a run cannot reach here) store a cell that reads back: N requests, its summary counting N."""

from __future__ import annotations

from bench import scale

from tokenbench.store.db import Store


def test_a_synthetic_row_stores_a_cell_of_n_requests(tmp_path, monkeypatch):
    monkeypatch.setattr(scale, "SUMMARY_SAMPLE", 40)      # the summary from 40 records, 100 written, the rest copied
    monkeypatch.setattr(scale, "WRITE_MAX", 100)
    row = scale.synthetic_row(250, tmp_path / "s.db", output_len=8, streams=4)
    store = Store(tmp_path / "s.db")
    [cell] = store.cells(row["run"])
    assert (cell.key, cell.status, cell.concurrency) == ("32:8/c=4", "ok", 4)
    assert cell.summary.completed == cell.summary.num_prompts == 250 and cell.summary.mean_ttft_ms is not None
    assert store.request_count(cell.id) == 250 and row["db_per_req"] > 0
