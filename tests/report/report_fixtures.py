"""Stored runs built with the Store API from hand-made, tiny integer-ns RequestRecords (shared by the
report tests; a module of its own so its name cannot clash with other test folders' conftest)."""

from __future__ import annotations

import json
from pathlib import Path

from tokenbench.client.records import RequestRecord
from tokenbench.metrics.summary import summarize
from tokenbench.monitor.samples import Sample
from tokenbench.monitor.summary import summarize as monitor_summary
from tokenbench.monitor.window import CellWindow
from tokenbench.spec.bench import Load
from tokenbench.spec.deploy_profile import Profile
from tokenbench.spec.server_facts import ServerFacts
from tokenbench.store.db import Store
from tokenbench.store.rows import CellRow

MS = 1_000_000
FIXTURES = Path(__file__).parent / "fixtures"
ENV = {"os": "Debian GNU/Linux 12 (bookworm)", "kernel": "6.1.0-test", "arch": "x86_64",
       "cpu": "AMD EPYC 7B13", "cpu_count": 2, "memory_gb": 23.5, "python": "3.11.2",
       "packages": {"tokenbench": "0.1.0", "xllamacpp": "2026.10.11549"}}
PAIRS = ((128, 32), (512, 64))
CONCURRENCY = (1, 2, 4)
EVIL = "<script>alert('x')</script> & | *bold*"


def profile(slots: int) -> Profile:
    return Profile.model_validate({"name": "cpu-smollm2", "engine": "llamacpp", "accelerator": "cpu",
            "model": {"bundled": "smollm2-135m-instruct", "params_b": 0.135, "bytes_per_param": 0.56},
            "parallelism": {"tp": 1, "dp": 1, "slots": slots, "threads": 1}, "args": {"ctx-size": 4096},
            "env": {}, "extra_args": []})


def facts(kv: int) -> ServerFacts:
    return ServerFacts.from_dict({"engine": "llamacpp", "version": "b6500", "model": "SmolLM2-135M-Instruct",
                                  "ctx_per_seq": 2048, "kv_capacity_tokens": kv, "slots": None, "source": {},
                                  "raw": {}})


def records(c: int, input_len: int, output_len: int, slots: int, *, fail: bool = False,
            text: str = "") -> list[RequestRecord]:
    """A closed loop of concurrency c on a server with `slots` parallel slots: waves of requests; the
    requests beyond the slots wait one decode of their predecessor (queueing, visible in TTFT)."""
    out = []
    prefill, tpot = 2 * MS + input_len * 200_000, 10 * MS + c * 2 * MS
    for i in range(2 * c):
        wave, pos = divmod(i, c)
        queued = pos // slots
        length = prefill + (output_len - 1) * tpot
        start = 1_000 * MS + wave * length * (1 + queued)
        first = start + prefill + queued * length
        times = [first + k * tpot for k in range(output_len)]
        r = RequestRecord(index=i, phase="measure", input_len=input_len, output_len=output_len,
                          intended_ns=start, sent_ns=start + 20_000, end_ns=times[-1] + 100_000,
                          status=200, token_times_ns=times, token_counts=[1] * output_len,
                          prompt_tokens=input_len, completion_tokens=output_len, cached_tokens=0,
                          usage_source="server", finish_reason="length", text=text or f"tokens of request {i}",
                          worker=pos)
        out.append(r)
    if fail:
        bad = out[-1]
        bad.error_kind, bad.error_detail, bad.token_times_ns, bad.token_counts = "timeout", "timed out", [], []
        bad.completion_tokens, bad.finish_reason = None, None
    return out


def monitor_samples(recs: list[RequestRecord], slots: int) -> list[tuple]:
    t0, t1 = min(r.sent_ns for r in recs), max(r.end_ns for r in recs)
    out = []
    for k in range(11):
        t = t0 + (t1 - t0) * k // 10
        running = sum(1 for r in recs if r.sent_ns <= t < r.end_ns)
        out += [(t, "server", "running", float(min(running, slots)), "{}"),
                (t, "server", "waiting", float(max(running - slots, 0)), "{}"),
                (t, "server", "kv_usage", min(running, slots) * 0.2, "{}")]
    return out


def build_run(store: Store, run_id: str = "20260102-030405-fixed", with_samples: bool = True) -> str:
    store.create_run("sweep", "http://127.0.0.1:8000", {"pairs": [list(p) for p in PAIRS],
                                                       "concurrency": list(CONCURRENCY), "planned_cells": 12},
                     ["tokenbench", "sweep", "spec.yaml"], ENV, run_id=run_id)
    for name, slots, kv in (("slots2", 2, 1024), ("slots4", 4, 2048)):
        cid = store.upsert_config(run_id, name, overrides={"slots": slots}, profile=profile(slots), facts=facts(kv),
                                  status="done")
        for il, ol in PAIRS:
            for c in CONCURRENCY:
                fail = (name, il, c) == ("slots2", 128, 2)
                text = EVIL if (name, il, c) == ("slots2", 512, 4) else ""
                recs = records(c, il, ol, slots, fail=fail, text=text)
                summary = summarize(recs, Load(concurrency=c, num_prompts=len(recs)), il, ol)
                demand = c * (il + ol)
                cell = CellRow(key=f"{il}:{ol}/c={c}", input_len=il, output_len=ol, status="ok", summary=summary,
                               concurrency=c, kv_demand=demand, kv_capacity=kv, over_capacity=demand > kv)
                samples = monitor_samples(recs, slots) if with_samples and c == 4 else ()
                store.save_cell(run_id, cid, cell, recs, samples)
    store.set_run_status(run_id, "done")
    store.db.execute("UPDATE runs SET created_at='2026-01-02T03:04:05+00:00', tool_version='0.1.0' WHERE id=?",
                     (run_id,))
    return run_id


def build_mixed_run(store: Store, run_id: str = "20260102-030405-mixed", closed=(1, 2, 4), rates=(1.0, 3.0),
                    cap: int | None = None, configs=("slots2", "slots4")) -> str:
    """Closed-loop cells at `closed` and open-loop cells at `rates` (requests/s, at most `cap` in flight) of
    one pair (128/32) per config; the config's last digit is its slot count."""
    store.create_run("sweep", "http://127.0.0.1:8000", {}, ["tokenbench", "sweep"], ENV, run_id=run_id)
    for name in configs:
        slots = int(name[-1])
        cid = store.upsert_config(run_id, name, overrides={"slots": slots}, profile=profile(slots),
                                  facts=facts(1 << 20), status="done")
        loads = [Load(concurrency=c, num_prompts=2 * c) for c in closed]
        loads += [Load(request_rate=r, max_concurrency=cap, num_prompts=4) for r in rates]
        for load in loads:
            recs = records(load.concurrency or 2, 128, 32, slots)
            summary = summarize(recs, load, 128, 32)
            store.save_cell(run_id, cid, CellRow(key=f"128:32/{load.label}", input_len=128, output_len=32, status="ok",
                                                 summary=summary, concurrency=load.concurrency,
                                                 request_rate=load.request_rate), recs)
    store.set_run_status(run_id, "done")
    return run_id


def build_bench_run(store: Store, run_id: str = "20260102-030405-bench", local_engine: bool = False,
                    cells: tuple[int, ...] = (4,)) -> str:
    """A plain `bench` of a server tokenbench did not start (no profile, no monitor): one closed-loop cell
    of 128/32 per concurrency in `cells`, 2 x c requests each."""
    iso = {"client_cpus": "not pinned", "engine_cpus": "not pinned", "client_nice": 0, "engine_nice": 0,
           "note": "" if local_engine else "client not pinned: the server is not one tokenbench deployed here",
           "local_engine": local_engine}
    store.create_run("bench", "http://127.0.0.1:8000", {}, ["tokenbench", "bench"], {**ENV, "isolation": iso},
                     run_id=run_id)
    cid = store.upsert_config(run_id, "default", facts=ServerFacts.from_dict(
        {"engine": "reference", "version": "0.1.0", "model": "reference-model", "ctx_per_seq": 4096,
         "kv_capacity_tokens": None, "slots": None, "source": {}, "raw": {}}), status="done")
    for c in cells:
        recs = records(c, 128, 32, 4)
        summary = summarize(recs, Load(concurrency=c, num_prompts=len(recs)), 128, 32)
        store.save_cell(run_id, cid, CellRow(key=f"128:32/c={c}", input_len=128, output_len=32, status="ok",
                                             summary=summary, concurrency=c), recs)
    store.set_run_status(run_id, "done")
    return run_id


# an NVIDIA run: two GPUs (TP=2) sampled by the monitor, host CPU and RAPL counters, a stated price --------
ACCEL_POWER = {1: 180.0, 2: 260.0, 4: 690.0}     # W per GPU while the cell runs (busier, hotter)
ACCEL_UTIL = {1: 35.0, 2: 60.0, 4: 97.0}
SPARSE_AT = 2                                     # this cell's power samples stop for a good part of its window


def nvidia_profile() -> Profile:
    return Profile.model_validate({"name": "nvidia-tp2", "engine": "vllm", "accelerator": "nvidia",
                                   "model": {"path": "/models/llama", "params_b": 8.0, "bytes_per_param": 2},
                                   "parallelism": {"tp": 2, "dp": 1}})


def gpu_samples(recs: list[RequestRecord], c: int, every_ns: int = 250 * MS, counter: bool = False
                ) -> list[Sample]:
    """Two GPUs sampled every 250 ms from 1 s before the first send to 1 s after the last byte: idle around
    the cell, busy in it; the cell at SPARSE_AT loses its samples for half of its window (`counter`: each GPU
    also reads its energy counter, and the samples are lost from before the window to its middle)."""
    t0, t1 = min(r.sent_ns for r in recs), max(r.end_ns for r in recs)
    quiet = ((t0 - 900 * MS, t0 + (t1 - t0) // 2) if counter else (t0 + (t1 - t0) // 4, t0 + 3 * (t1 - t0) // 4)
             ) if c == SPARSE_AT else None
    out, used = [], 0.0
    for t in range(t0 - 1000 * MS, t1 + 1000 * MS, every_ns):
        busy = t0 <= t <= t1
        used += (ACCEL_POWER[c] if busy else 70.0) * every_ns / 1e9        # the counter counts, read or not
        if quiet and quiet[0] < t < quiet[1]:
            continue
        for d in range(2):
            labels = {"device": str(d), "name": "NVIDIA H100 80GB HBM3", "uuid": f"GPU-{d}"}
            values = {"util_pct": ACCEL_UTIL[c] if busy else 0.0, "mem_used_mb": 70000.0 + 100 * c + d,
                      "mem_total_mb": 81559.0, "power_w": ACCEL_POWER[c] if busy else 70.0, "temp_c": 50.0,
                      **({"energy_j": used} if counter else {})}
            out += [Sample(t, "gpu", k, v, labels) for k, v in values.items()]
        out += [Sample(t, "host", "cpu_pct", 40.0, {}), Sample(t, "host", "energy_j", 150.0 * t / 1e9,
                                                                 {"zone": "package-0"})]
    return out


def build_accel_run(store: Store, run_id: str = "20260102-030405-accel", price: float | None = 2.5,
                    counter: bool = False) -> str:
    spec = {"price_per_hour": price} if price else {}
    store.create_run("sweep", "http://127.0.0.1:8000", spec, ["tokenbench", "sweep"], ENV, run_id=run_id)
    cid = store.upsert_config(run_id, "tp2", overrides={}, profile=nvidia_profile(), facts=facts(1 << 20),
                              status="done")
    for c in CONCURRENCY:
        recs = records(c, 128, 32, slots=8)
        summary = summarize(recs, Load(concurrency=c, num_prompts=len(recs)), 128, 32)
        samples = gpu_samples(recs, c, counter=counter)
        window = CellWindow(min(r.sent_ns for r in recs), max(r.end_ns for r in recs), 0.25,
                            int(summary.total_output_tokens or 0), int(summary.completed or 0))
        summary = summary.with_(monitor_summary(samples, window))
        rows = [(s.t_ns, s.source, s.name, s.value, json.dumps(s.labels)) for s in samples]
        store.save_cell(run_id, cid, CellRow(key=f"128:32/c={c}", input_len=128, output_len=32, status="ok",
                                             summary=summary, concurrency=c), recs, rows)
    store.set_run_status(run_id, "done")
    return run_id


# a tune (study/tune.py): three configs searched, one whose engine died under load, the best confirmed ---------
TUNE_SLO = "tpot:mean<=30"
TUNE_CAPS = {"slots=4": 4, "slots=2": 2, "slots=8": 8}      # the capacity each config's search found


def _tune_record(capacity: int, sustain: bool):
    from tokenbench.metrics.capacity import Answer, Check, SearchRecord, Sustain, TierVerdict, Tried
    from tokenbench.spec.slo import Tier
    tier = Tier(name="slo", limits=[TUNE_SLO])
    answer = Answer(tier="slo", limits=tier.limits, capacity=capacity, fail_load=capacity + 1, lo=capacity,
                    hi=capacity + 1)
    check = Check(limit=tier.limits[0], value=24.0, lo=23.0, hi=25.0, n=200)
    held = Sustain(key=f"128:32/c={capacity}", repeat=1, load=capacity, duration_s=60.0, status="ok",
                   verdicts=[TierVerdict(tier="slo", ok=True, checks=[check])]) if sustain else None
    tried = [Tried(key=f"128:32/c={c}", repeat=0, role="bracket", load=c, status="ok", verdicts=[])
             for c in (1, 2, 4)]
    return SearchRecord(workload="128:32", dimension="concurrency", tiers=[tier], budget=24, precision=0.1,
                        tried=tried, answers=[answer], sustain=held)


def build_tune_run(store: Store, run_id: str = "20260102-030405-tune") -> str:
    """A tune of three configs (slots 4, the baseline; 2; 8), four cells each with a failed one, whose best by
    capacity (slots=8) died under load on its second launch: slots=4 is recommended, confirmed on a fresh launch."""
    from tokenbench.logs.launch import Death, LaunchFailure
    spec = {"target": {"profile": "cpu-smollm2"}, "pairs": [[128, 32]], "find_capacity": "concurrency",
            "slo": {"limits": [TUNE_SLO]}, "vary": {"slots": [4, 2, 8]}, "tune": {"baseline": "slots=4"}}
    store.create_run("tune", "cpu-smollm2", spec, ["tokenbench", "tune", "cpu-smollm2"], ENV, run_id=run_id)
    for name, cap in TUNE_CAPS.items():
        slots = int(name.split("=")[1])
        cid = store.upsert_config(run_id, name, overrides={"parallelism.slots": slots}, profile=profile(slots),
                                  facts=facts(1 << 20), status="done")
        for c in (1, 2, 4, 8):
            recs = records(c, 128, 32, slots, fail=c == 8)
            summary = summarize(recs, Load(concurrency=c, num_prompts=len(recs)), 128, 32)
            store.save_cell(run_id, cid, CellRow(key=f"128:32/c={c}", input_len=128, output_len=32,
                                                 status="failed" if c == 8 else "ok", summary=summary,
                                                 message="1/16 requests failed (timeout=1)" if c == 8 else "",
                                                 concurrency=c), recs)
        store.save_search(run_id, cid, _tune_record(cap, sustain=name == "slots=4"))
    oom = LaunchFailure(cause="out_of_memory", evidence="ggml_aligned_malloc: insufficient memory", exit_code=1,
                        log="/state/cpu-smollm2-8.log")
    store.add_config_death(run_id, "slots=8", Death(launch=2, cell="128:32/c=8", failure=oom))
    store.set_run_status(run_id, "done")
    return run_id


def build_failed_run(store: Store, run_id: str = "20260102-030405-failed") -> str:
    """A `bench` whose four cells all failed before any request completed (the server answered 500)."""
    store.create_run("bench", "http://127.0.0.1:8000", {}, ["tokenbench", "bench"], ENV, run_id=run_id)
    cid = store.upsert_config(run_id, "default", status="done")
    for c in (1, 2, 4, 8):
        recs = records(c, 128, 32, 4)
        for r in recs:
            r.status, r.error_kind, r.error_detail = 500, "http_status", "HTTP 500: injected fault"
            r.token_times_ns, r.token_counts, r.completion_tokens, r.finish_reason = [], [], None, None
        summary = summarize(recs, Load(concurrency=c, num_prompts=len(recs)), 128, 32)
        message = f"{len(recs)}/{len(recs)} requests failed (http_status={len(recs)}); first: HTTP 500: injected fault"
        store.save_cell(run_id, cid, CellRow(key=f"128:32/c={c}", input_len=128, output_len=32, status="failed",
                                             summary=summary, message=message, concurrency=c), recs)
    store.set_run_status(run_id, "failed")
    return run_id
