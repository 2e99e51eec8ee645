"""Warmups sized to what they warm, and open sockets within the limit on open files.

A default warmup sends as many requests as the cell runs at once (its concurrency or users, a rate's
--max-concurrency, 1 for a rate without one), never more than the cell's own requests; a given
--warmup-requests is sent as given. A cell that runs more requests at once than a client process may open
sockets is refused before anything is sent, naming `ulimit -n`; a client that runs out of descriptors while
a cell runs says so, not "server unreachable" (docs/reliability.md)."""

from __future__ import annotations

import resource
import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tokenbench.cli.main import main
from tokenbench.errors import UsageError
from tokenbench.spec.bench import MAX_WARMUP, Load
from tokenbench.study.preflight import RESERVE, check_sockets
from tokenbench.testing.reference_server import ReferenceConfig, ReferenceProcess

counts = st.integers(1, 10**7)


@given(concurrency=counts, prompts=st.none() | counts)
def test_a_closed_loop_warmup_is_at_most_the_cell_at_once_and_its_requests(concurrency, prompts):
    load = Load(concurrency=concurrency, num_prompts=prompts, duration_s=None if prompts else 60)
    assert load.warmup_count() == min(concurrency, prompts or concurrency) == load.warmup_width


@given(rate=st.floats(0.01, 1e6), cap=st.none() | counts, prompts=st.none() | counts)
def test_a_rate_warmup_is_at_most_its_cap_and_its_requests(rate, cap, prompts):
    load = Load(request_rate=rate, max_concurrency=cap, num_prompts=prompts, duration_s=None if prompts else 60)
    n = load.warmup_count()
    assert 1 <= n <= (prompts or n) and n <= (cap or 1) and load.warmup_width <= n
    assert n == min(cap or 1, prompts or cap or 1)


@given(given_warmup=st.integers(0, MAX_WARMUP), concurrency=counts)
def test_a_given_warmup_is_sent_as_given(given_warmup, concurrency):
    load = Load(concurrency=concurrency, num_prompts=4, warmup_requests=given_warmup)
    assert load.warmup_count() == given_warmup
    assert load.warmup_width == max(1, min(given_warmup, concurrency, 4))


def test_a_cell_wider_than_the_descriptors_is_refused_naming_ulimit():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY:
        pytest.skip("no hard limit on open files here")
    with pytest.raises(UsageError) as exc:
        check_sockets("8:4/c=huge", hard + 1)
    line = exc.value.one_line()
    assert "ulimit -n" in line and f"{hard + 1:,} requests at once" in line and "--max-concurrency" in line
    check_sockets("8:4/c=fits", max(1, hard - RESERVE))        # raises the soft limit to fit, refuses nothing
    assert resource.getrlimit(resource.RLIMIT_NOFILE)[0] >= min(hard, max(1, hard - RESERVE) + RESERVE)
    check_sockets("8:4/rate", None)                            # an uncapped rate: nothing to check before


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_a_capped_rate_of_four_requests_sends_four_and_its_warmup(tmp_path):
    with ReferenceProcess(ReferenceConfig(ttft_ms=1, itl_ms=1)) as ref:
        assert main(["bench", "--base-url", ref.url, "--input-len", "8", "--output-len", "4", "--request-rate", "4",
                     "--max-concurrency", "64", "--num-prompts", "4", "--db", str(tmp_path / "r.db")]) == 0
        sent = [a for a in ref.arrivals()["arrivals"] if a["path"].endswith("/completions")]
    assert len(sent) == 4 + 4               # the measured four, and a warmup as wide as the cell: four


def limited(files: int, *args: str) -> subprocess.CompletedProcess:
    """`tokenbench ARGS` in a process whose limit on open files (soft and hard) is `files`."""
    def lower() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (files, files))
    return subprocess.run([sys.executable, "-m", "tokenbench.cli.main", *args], capture_output=True, text=True,
                          preexec_fn=lower, timeout=120)


@pytest.mark.slow
@pytest.mark.timeout(200)
def test_too_many_at_once_is_refused_and_running_out_says_ulimit(tmp_path):
    db = str(tmp_path / "r.db")
    with ReferenceProcess(ReferenceConfig(ttft_ms=1, itl_ms=40)) as ref:
        common = ["bench", "--base-url", ref.url, "--input-len", "8", "--output-len", "32", "--db", db]
        before = len(ref.arrivals()["arrivals"])
        refused = limited(128, *common, "--max-concurrency", "1000000", "--num-prompts", "2000000")
        assert refused.returncode == 2 and len(ref.arrivals()["arrivals"]) == before      # nothing sent
        [line] = refused.stderr.strip().splitlines()
        assert "1,000,000 requests at once" in line and "ulimit -n" in line and "128" in line
        ran_out = limited(100, *common, "--request-rate", "1000", "--num-prompts", "400", "--warmup-requests", "0")
    [line] = [x for x in ran_out.stderr.splitlines() if x.startswith("error:")]
    assert ran_out.returncode == 3 and "out of file descriptors" in line and "ulimit -n" in line, ran_out.stderr
    assert "server unreachable" not in line and "Traceback" not in ran_out.stderr
