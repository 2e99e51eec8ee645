"""What `sweep` prints for trajectories cells, against the reference server: the corpus once when every cell
replayed the same one, each cell's turns (TTFT, hit rate, the theory beside it) and its jobs once (not its
sessions again), each job figure with its interval and its marks as the stored summary has them."""

from __future__ import annotations

import pytest

from tokenbench.cli.main import main
from tokenbench.store.db import Store
from tokenbench.testing.reference_server import ReferenceConfig, ReferenceProcess

pytestmark = pytest.mark.slow   # a reference server and two cells: a few seconds


def _interval(stat) -> str:
    return f"[{stat.lo:.1f}, {stat.hi:.1f}]{'◊' * stat.unreliable}"


def test_a_trajectories_sweep_says_its_corpus_once_and_each_cells_jobs_once(tmp_path, capsys):
    db = tmp_path / "db.sqlite"
    with ReferenceProcess(ReferenceConfig(ttft_ms=20, itl_ms=5, prefix_cache_blocks=4096, block_size=16)) as ref:
        assert main(["sweep", "--base-url", ref.url, "--dataset-name", "trajectories", "--turns", "3", "--pairs",
                     "48:8", "--num-trajectories", "6", "--users", "1,2", "--db", str(db)]) == 0
    text = " ".join(capsys.readouterr().out.split())         # the console wraps its lines at spaces
    cells = Store(db).cells(Store(db).runs()[-1].id)
    sha = cells[0].summary.facts.corpus_sha256[:16]
    assert text.count(f"sha256 {sha}") == 1
    assert f"every cell: corpus generated sha256 {sha}: 6 of 6 trajectories replayed (18 turns), 1 pass" in text
    assert " completed; by turn" not in text                      # the jobs line says how many completed
    for c in cells:
        assert text.count(f"{c.key}: jobs ") == text.count(f"{c.key}: by turn: ") == 1
        j = c.summary.jobs
        p50, p95 = j.stat("job", "p50"), j.stat("job", "p95")
        moved = ["~" if c.summary.figures and c.summary.figures.mark(key) else "" for key in ("median_job_ms", "p95_job_ms")]
        assert (f"{c.key}: jobs 6 of 6 complete (3.0 turns each): completion ms p50 {p50.value:.1f}{moved[0]} "
                f"{_interval(p50)}, p95 {p95.value:.1f}{moved[1]} {_interval(p95)};") in text
        assert f"{c.key}: by turn: TTFT mean " in text
    assert "(theory 0%, " in text and "16-token blocks)" in text
