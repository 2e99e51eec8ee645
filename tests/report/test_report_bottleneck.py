"""Each cell's bottleneck label and its evidence, in the order the checks are made."""

from __future__ import annotations

from dataclasses import replace

from tokenbench.judge.bottleneck import label
from tokenbench.judge.hardware import Device
from tokenbench.judge.plausibility import ModelSize, Roofline
from tokenbench.judge.views import load_run
from tokenbench.report.explain import evidence

# 0.08 GB of weights: 1 GB/s gives 12.5 tok/s per stream, 1e-3 TFLOP/s gives 3.7 tok/s of compute
SLOW = Roofline(Device("slow", "slow", 1.0, 1e-3, "test"), 1, ModelSize(0.135, 0.56))
FAST = Roofline(Device("fast", "fast", 1e6, 1e6, "test"), 1, ModelSize(0.135, 0.56))


def _cell(run, cfg, pair, c):
    return run.cell_at(cfg, pair, c)


def test_labels_from_kv_queueing_client_and_roofline(store, stored_run):
    run = load_run(store, stored_run)
    kv = label(run, _cell(run, "slots2", (512, 64), 2), None)
    assert kv.kind == "kv" and "KV demand 1,152 > capacity 1,024" in evidence(kv)
    queued = label(run, _cell(run, "slots4", (128, 32), 4), None)
    assert queued.kind == "queueing" and "waiting peak 4" in evidence(queued)
    grown = label(run, _cell(run, "slots2", (128, 32), 4), None)       # TTFT x11.6 and waiting at the server
    assert grown.kind == "queueing"
    one = _cell(run, "slots4", (128, 32), 1)
    assert label(run, one, None).kind == "unknown"                     # nothing near any bound
    assert "roofline" in evidence(label(run, one, None))
    assert label(run, one, SLOW).kind == "compute"                     # 80 tok/s against a 3.7 tok/s bound
    assert label(run, one, FAST).kind == "unknown" and "0% of the roofline" in evidence(label(run, one, FAST))
    assert "屋顶线" in evidence(label(run, one, FAST), "zh")
    invalid = replace(one, status="invalid", message="client overloaded: event-loop lag p99 80 ms > 50 ms")
    assert label(run, invalid, SLOW).kind == "client"
    failed = replace(one, status="failed", message="8/8 requests failed")
    assert label(run, failed, SLOW).kind == "unknown"


def test_ttft_growth_without_monitor_samples_is_queueing(store):
    from .report_fixtures import build_run
    run = load_run(store, build_run(store, with_samples=False))
    lab = label(run, _cell(run, "slots2", (128, 32), 4), None)
    assert lab.kind == "queueing" and evidence(lab).startswith("mean TTFT x11.6 vs c=1")
    bw = Roofline(Device("bw", "bw", 0.5, 1e6, "test"), 1, ModelSize(0.135, 0.56))    # 6.6 tok/s per stream
    assert label(run, _cell(run, "slots4", (128, 32), 1), bw).kind == "bandwidth"


def _with_cpu(cell, **shares):
    from tokenbench.metrics.summary_groups import CpuShares
    return replace(cell, summary=cell.summary.with_(CpuShares(count=2, **shares)))


def test_a_full_host_is_said_as_who_took_it_never_the_host_when_other_work_did(store, stored_run):
    """Issue 43, item 6: on a CPU server (no accelerator samples) the host's CPUs full over the window are said
    by the cell's CPU shares: other work at half a core or more is contention, never "host CPU-bound"; the
    server and the client filling it is; a server not seen here cannot be told from other work."""
    run = load_run(store, stored_run)
    one = _cell(run, "slots4", (128, 32), 1)
    held = label(run, _with_cpu(one, host_pct=196.0, client_pct=30.0, server_pct=66.0, other_pct=100.0,
                                psi_some_pct=80.0), None)
    assert (held.kind, held.evidence) == ("contention", "host_others")
    assert evidence(held) == ("other work took 100% of one core, the server 66%, the client 30% (host CPU 98% of 2 "
                              "CPUs; CPU pressure 80%)")
    assert "其他进程占用单核的 100%" in evidence(held, "zh")
    at_edge = label(run, _with_cpu(one, host_pct=196.0, client_pct=46.0, server_pct=100.0, other_pct=50.0), None)
    assert at_edge.kind == "contention"
    server = label(run, _with_cpu(one, host_pct=196.0, client_pct=46.0, server_pct=100.1, other_pct=49.9), None)
    assert (server.kind, server.evidence) == ("host", "server_cpu")
    assert evidence(server).startswith("host CPU 98% of 2 CPUs: the server took 100% of one core") and "pressure -" in evidence(server)
    unseen = label(run, _with_cpu(one, host_pct=196.0, client_pct=30.0, server_seen="remote"), None)
    assert (unseen.kind, unseen.evidence) == ("unknown", "host_unsplit")
    quiet = label(run, _with_cpu(one, host_pct=100.0, client_pct=30.0, server_pct=20.0, other_pct=50.0), None)
    assert (quiet.kind, quiet.evidence) == ("unknown", "quiet_split")
    assert evidence(quiet).startswith("nothing saturated: host CPU 50% of 2 CPUs (the server 20% of one core")
