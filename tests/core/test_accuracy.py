"""Acceptance of issue 2: measured TTFT/TPOT against a reference server whose timing is the truth
(TTFT 100 ms, ITL 20 ms by its own send log), over real loopback HTTP. Slow tier."""

import asyncio
import os

import pytest

from tokenbench.load.bench import run_bench
from tokenbench.load.target import resolve
from tokenbench.spec.bench import BenchSpec
from tokenbench.testing.reference_server import ReferenceConfig, ReferenceProcess

pytestmark = pytest.mark.engine


def measure(url: str, concurrency: int, prompts: int):
    spec = BenchSpec(target={"base_url": url}, workload={"input_len": 16, "output_len": 40},
                     cells=[{"concurrency": concurrency, "num_prompts": prompts, "warmup_requests": concurrency}])
    [cell] = asyncio.run(run_bench(spec, resolve(spec.target), lambda r: None))
    assert cell.status == "ok", cell.message
    return cell


@pytest.fixture(scope="module")
def reference():
    cpus = sorted(os.sched_getaffinity(0))
    with ReferenceProcess(ReferenceConfig(ttft_ms=100, itl_ms=20), cpu=cpus[-1] if len(cpus) > 1 else None) as ref:
        yield ref


def test_concurrency_1(reference):
    s = measure(reference.url, 1, 8).summary
    assert s["mean_tpot_ms"] == pytest.approx(20, rel=0.01)
    assert s["mean_ttft_ms"] == pytest.approx(100, rel=0.03)
    assert s["completed"] == 8 and s["total_output_tokens"] == 8 * 40


def test_concurrency_64(reference):
    cell = measure(reference.url, 64, 128)
    s = cell.summary
    assert s["mean_tpot_ms"] == pytest.approx(20, rel=0.01)
    assert s["mean_ttft_ms"] == pytest.approx(100, rel=0.08)
    assert s["p99_ttft_ms"] == pytest.approx(100, rel=0.15)
    assert all(r.prompt_tokens == 16 and r.output_tokens == 40 for r in cell.records)


def test_server_ignoring_ignore_eos_fails_the_cell_with_cause():
    with ReferenceProcess(ReferenceConfig(ttft_ms=5, itl_ms=1, honor_ignore_eos=False)) as ref:
        spec = BenchSpec(target={"base_url": ref.url}, workload={"input_len": 8, "output_len": 20},
                         cells=[{"concurrency": 2, "num_prompts": 4}])
        [cell] = asyncio.run(run_bench(spec, resolve(spec.target), lambda r: None))
    assert cell.status == "failed"
    assert "ignores ignore_eos" in cell.message
    assert all(r.length_error for r in cell.records)
