"""One stored `bench` run (8 streams, 32 requests, reference server) executes at most 100 of the package's
modules (bench/modules_run.py counts them with sys.setprofile: a module whose function or class body runs),
and what a random-ids closed-loop cell does not use is not on its path: the sessions tally and the
conversations, the capacity search, other tools' result files, the worker processes and Ray actors, the
dataset kinds' modules, the compare and report models, the accelerator tools' parsers on a host without the
tools, a launch's modules for a server tokenbench did not start, the length distributions of exact lengths."""

from __future__ import annotations

import pytest
from bench.modules_run import run

NOT_ON_THE_PATH = ("tokenbench.workload.sessions", "tokenbench.client.returned", "tokenbench.study.capacity",
                   "tokenbench.metrics.capacity", "tokenbench.study.result_files", "tokenbench.load.workers",
                   "tokenbench.load.ray_workers", "tokenbench.client.raw_log", "tokenbench.workload.images",
                   "tokenbench.workload.trace_replay",
                   "tokenbench.workload.prefix", "tokenbench.workload.text_corpus", "tokenbench.judge.views",
                   "tokenbench.judge.intervals", "tokenbench.judge.plausibility", "tokenbench.judge.bottleneck",
                   "tokenbench.monitor.npu_smi", "tokenbench.monitor.nvidia_smi", "tokenbench.deploy.lifecycle",
                   "tokenbench.deploy.local", "tokenbench.workload.lengths")
NOT_RUN = ("tokenbench.peers.serve",)      # imported for its flag parsers; no peer flag given, nothing folded


@pytest.mark.slow
def test_a_bench_run_executes_at_most_100_modules_and_not_what_it_does_not_use():
    mods = run(streams=8, requests=32)
    executed = sorted(m for m, ran in mods.items() if ran)
    assert len(executed) <= 100, executed
    assert [m for m in NOT_ON_THE_PATH if m in mods] == []
    assert [m for m in NOT_RUN if mods.get(m)] == []
    assert {"tokenbench.metrics.cell", "tokenbench.metrics.tally", "tokenbench.load.cell"} <= set(executed)
