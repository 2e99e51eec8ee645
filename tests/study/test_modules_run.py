"""One stored `bench` run (8 streams, 32 requests, reference server) calls functions of at most 100 of the
package's modules (bench/modules_run.py counts, with sys.setprofile, the modules one of whose functions is
called while no module is being imported: where an import sits does not move the count), and what a
random-ids closed-loop cell does not use is not called: the sessions tally and the conversations, the capacity
search, other tools' result files, the worker processes and Ray actors, the dataset kinds' modules, the
compare and report models, the accelerator tools' parsers on a host without the tools, a launch's modules for
a server tokenbench did not start, the length distributions of exact lengths, the peers' flag folding (no peer
flag given)."""

from __future__ import annotations

import pytest
from bench.modules_run import called, run

NOT_CALLED = ("tokenbench.workload.sessions", "tokenbench.client.returned", "tokenbench.study.capacity",
              "tokenbench.metrics.capacity", "tokenbench.study.result_files", "tokenbench.load.workers",
              "tokenbench.load.ray_workers", "tokenbench.client.raw_log", "tokenbench.workload.images",
              "tokenbench.workload.trace_replay",
              "tokenbench.workload.prefix", "tokenbench.workload.text_corpus", "tokenbench.judge.views",
              "tokenbench.judge.intervals", "tokenbench.judge.plausibility", "tokenbench.judge.bottleneck",
              "tokenbench.monitor.npu_smi", "tokenbench.monitor.nvidia_smi", "tokenbench.deploy.lifecycle",
              "tokenbench.deploy.local", "tokenbench.workload.lengths", "tokenbench.peers.serve")


@pytest.mark.slow
def test_a_bench_run_calls_at_most_100_modules_and_not_what_it_does_not_use():
    mods = run(streams=8, requests=32)
    calls = called(mods)
    assert len(calls) <= 100, calls
    assert [m for m in NOT_CALLED if m in calls] == []
    assert {"tokenbench.metrics.cell", "tokenbench.metrics.tally", "tokenbench.load.cell"} <= set(calls)
