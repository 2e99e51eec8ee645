"""Nothing measured is lost on the way through the results database, over real HTTP against the reference
server: a chat bench with images, stored, then `export --requests`, gives every request exactly as the
bench's own JSON result (`--output`) wrote it; and a run killed after its first cell and resumed writes the
JSON result an uninterrupted run writes (apart from ids and times), its first cell exactly as the killed
process wrote it."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tokenbench.cli.main import main
from tokenbench.testing.reference_server import ReferenceConfig, ReferenceProcess

pytestmark = pytest.mark.slow   # a reference server process, and a bench killed in a subprocess

IMAGES = ["--kind", "image", "--api", "chat", "--image-count", "2", "--image-width", "32", "--image-height", "24",
          "--input-len", "8", "--output-len", "6", "--warmup-requests", "1", "--seed", "3", "--allow-client-lag"]
PER_REQUEST = ("ttft_ms", "tpot_ms", "e2el_ms", "stream_tail_ms")     # export adds these beside the record


def _bench(url: str, db: Path, out: Path, *extra: str) -> list[str]:
    return ["bench", "--base-url", url, *IMAGES, "--db", str(db), "--output", str(out), *extra]


def _export(db: Path, run_id: str, tmp: Path) -> dict:
    path = tmp / f"export-{run_id}.json"
    assert main(["export", run_id, "--requests", "--db", str(db), "-o", str(path)]) == 0
    return json.loads(path.read_text())


def test_export_requests_equal_the_json_result_of_a_chat_bench_with_images(tmp_path):
    with ReferenceProcess(ReferenceConfig(ttft_ms=3, itl_ms=2)) as ref:
        db, out = tmp_path / "r.db", tmp_path / "out.json"
        assert main(_bench(ref.url, db, out, "--concurrency", "1,2", "--num-prompts", "4")) == 0
    result = json.loads(out.read_text())
    exported = _export(db, result["run_id"], tmp_path)
    assert len(result["cells"]) == len(exported["cells"]) == 2
    for mine, stored in zip(result["cells"], exported["cells"], strict=True):
        assert mine["summary"] == {k: stored[k] for k in mine["summary"]}
        requests = [{k: v for k, v in r.items() if k not in PER_REQUEST} for r in stored["requests"]]
        assert requests == mine["requests"]
        assert [r["index"] for r in requests] == sorted(r["index"] for r in requests)   # as a resumed run lists them
        assert all(r["images"] == 2 and r["image_count"] == 2 and r["image_bytes"] > 0 for r in requests)
        assert all(r["first_content_offset_ns"] and r["count_source"] != "none" for r in requests)
        assert all(r["expected_prompt_tokens"] == r["prompt_tokens"] for r in requests)


def _wait_for_first_cell(out: Path, proc: subprocess.Popen, timeout_s: float = 60) -> dict:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            doc = json.loads(out.read_text())
        except (OSError, ValueError):
            doc = {}
        if doc.get("cells"):
            return doc
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        time.sleep(0.01)
    raise AssertionError("the first cell was never written")


TIMES = ("_ns", "_ms", "_s", "duration", "throughput", "goodput", "concurrency_", "achieved_concurrency",
         "sustained_concurrency", "client_", "stall_", "host_steal", "chunks_after_stall", "created_at", "monitor_",
         "message",                                       # the client's health: what held its loop, and when
         "slice_")                                        # timeslices: what fell in each 10 s of the clock
SOMETIMES = ("client_lag_tolerated", "client_marks", "client_bounds")   # the figures the client's delays moved
IDS = ("run_id",)


def _apart_from_ids_and_times(doc, key: str = ""):
    """The document with every id and every figure measured in time (or derived from one) blanked."""
    timed = key.endswith(TIMES) or key.startswith(TIMES)
    if isinstance(doc, dict) and timed:
        return "~"               # timings by cause (stall_ms): which causes occurred is itself timing
    if isinstance(doc, dict):
        return {k: _apart_from_ids_and_times(v, k) for k, v in doc.items() if k not in SOMETIMES}
    if isinstance(doc, list):
        return [_apart_from_ids_and_times(v, key) for v in doc]
    if key in IDS or timed or isinstance(doc, float):
        return "~"
    return doc


def _differences(a, b, at: str = "") -> list[str]:
    """Where two JSON documents differ, one line each (a readable failure)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return [d for k in sorted(set(a) | set(b)) for d in _differences(a.get(k, "<absent>"), b.get(k, "<absent>"),
                                                                          f"{at}.{k}")]
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [d for i, (x, y) in enumerate(zip(a, b, strict=True)) for d in _differences(x, y, f"{at}[{i}]")]
    return [] if a == b else [f"{at}: {str(a)[:80]} != {str(b)[:80]}"]


@pytest.mark.timeout(240)
def test_a_run_killed_after_its_first_cell_and_resumed_writes_the_uninterrupted_json(tmp_path):
    slow = ReferenceConfig(ttft_ms=5, itl_ms=60)         # the second cell takes seconds: the kill lands in it
    cells = ["--concurrency", "2,1", "--num-prompts", "4"]
    with ReferenceProcess(slow) as ref:
        db, first = tmp_path / "killed.db", tmp_path / "killed.json"
        proc = subprocess.Popen([sys.executable, "-m", "tokenbench.cli.main", *_bench(ref.url, db, first, *cells)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        killed = _wait_for_first_cell(first, proc)
        proc.kill()
        proc.communicate()
        assert len(killed["cells"]) == 1, "the kill came after the second cell"
        resumed = tmp_path / "resumed.json"
        assert main(["bench", "--resume", killed["run_id"], "--db", str(db), "--output", str(resumed)]) == 0
        whole = tmp_path / "whole.json"
        assert main(_bench(ref.url, tmp_path / "whole.db", whole, *cells)) == 0
    got, want = json.loads(resumed.read_text()), json.loads(whole.read_text())
    assert _differences(got["cells"][0], killed["cells"][0]) == []    # read back from the store: times and all
    assert _differences(_apart_from_ids_and_times(got), _apart_from_ids_and_times(want)) == []
    stored = {c["key"]: c["requests"] for c in _export(db, killed["run_id"], tmp_path)["cells"]}
    for cell in got["cells"]:
        assert _differences(cell["requests"], [{k: v for k, v in r.items() if k not in PER_REQUEST}
                                               for r in stored[cell["key"]]]) == []
