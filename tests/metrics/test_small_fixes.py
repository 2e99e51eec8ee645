"""Issue 15, Build 5: arrivals across workers, goodput as vLLM defines it, and the other small fixes."""

import random
import time

from tokenbench.client.records import RequestRecord
from tokenbench.client.request import PreparedRequest
from tokenbench.load.arrivals import offsets_ns, schedule
from tokenbench.load.runner import Phases
from tokenbench.load.workers import make_jobs
from tokenbench.metrics.request import meets_slo
from tokenbench.metrics.summary import summarize
from tokenbench.metrics.summary_groups import ClientHealth
from tokenbench.spec.bench import SLO, Load

MS = 1_000_000


def prepared(n: int) -> list[PreparedRequest]:
    return [PreparedRequest(url="http://x/v1/completions", body=b"{}", headers={}, input_len=4, output_len=2,
                            expected_prompt_tokens=4) for _ in range(n)]


def measured(n: int, load: Load, seed: int) -> Phases:
    """A cell of n requests and no warmup."""
    return Phases(key="4:2/cell", warmup=[], warmup_load=None, measure=prepared(n), load=load, seed=seed, count=n,
                  limit=n)


def test_constant_arrivals_interleave_across_workers():
    load = Load(request_rate=10.0, arrival="constant", num_prompts=6)
    jobs = make_jobs(2, measured(6, load, seed=0), timeout_s=10)
    assert [j.offsets for j in jobs] == [[0, 200 * MS, 400 * MS], [100 * MS, 300 * MS, 500 * MS]]


def test_worker_schedules_together_are_the_one_process_schedule():
    load = Load(request_rate=7.0, num_prompts=9)
    jobs = make_jobs(3, measured(9, load, seed=5), timeout_s=10)
    merged = sorted(o for j in jobs for o in j.offsets)
    assert merged == list(offsets_ns(7.0, "poisson", random.Random(5), 9))


def test_closed_loop_jobs_have_no_schedule():
    jobs = make_jobs(2, measured(4, Load(concurrency=2, num_prompts=4), seed=0), timeout_s=10)
    assert all(j.offsets is None for j in jobs)


def test_burstiness_shapes_the_schedule():
    even = schedule(Load(request_rate=10.0, num_prompts=400, burstiness=8.0), 1, 400)
    plain = schedule(Load(request_rate=10.0, num_prompts=400), 1, 400)
    gaps = lambda o: [b - a for a, b in zip(o, o[1:], strict=False)]  # noqa: E731
    spread = lambda g: max(g) / (sum(g) / len(g))  # noqa: E731
    assert spread(gaps(even)) < spread(gaps(plain))


def record(tokens: int, ttft_ms: float = 10, e2el_ms: float = 50) -> RequestRecord:
    times = [int(ttft_ms * MS)] if tokens else []
    return RequestRecord(index=0, phase="measure", input_len=4, output_len=tokens, intended_ns=0, sent_ns=0,
                         end_ns=int(e2el_ms * MS), token_times_ns=times, token_counts=[tokens] if tokens else [],
                         completion_tokens=tokens)


def test_goodput_treats_one_token_tpot_as_zero_like_vllm():
    slo = SLO(tpot_ms=5.0)
    assert meets_slo(record(1), slo)
    assert not meets_slo(record(0), SLO(ttft_ms=100.0))          # no token: no TTFT, not good
    s = summarize([record(1), record(1)], Load(concurrency=1, num_prompts=2), 4, 1, slo).to_dict()
    assert s["goodput_fraction"] == 1.0


def test_connect_time_is_its_own_figure_not_queue_time():
    r = record(2)
    r.intended_ns, r.sent_ns, r.connect_ns = 0, 30 * MS, 25 * MS     # 5 ms late, then 25 ms of set-up
    r.token_times_ns = [40 * MS, 50 * MS]
    assert r.queue_ns == 5 * MS and r.ttft_ns == 10 * MS
    s = summarize([r], Load(concurrency=1, num_prompts=1), 4, 2).to_dict()
    assert s["mean_connect_ms"] == 25 and s["mean_queue_ms"] == 5 and s["new_connections"] == 1
    r.connect_in_ttft, r.sent_ns = True, 5 * MS                          # vLLM's clock: before connecting
    assert r.queue_ns == 5 * MS and r.ttft_ns == 35 * MS


def test_a_duration_cell_that_runs_out_of_requests_says_so():
    import asyncio

    from tokenbench.client.records import RawExchange
    from tokenbench.load.cell import exhausted_note
    from tokenbench.load.runner import PhasePlan, run_phase

    async def fake_send(req, intended):          # a server answering in 10 ms (no socket: timing only)
        raw = RawExchange(intended_ns=intended, sent_ns=intended)
        await asyncio.sleep(0.01)
        return raw

    load = Load(concurrency=1, duration_s=1.0)
    started = time.perf_counter()
    run = asyncio.run(run_phase(fake_send, prepared(5), PhasePlan("measure", load)))
    at = run.client_health.prepared_exhausted_s
    assert 0.04 < at <= time.perf_counter() - started and len(run.records) == 5      # after 5 x 10 ms, in the run
    [note] = exhausted_note(run.client_health, load, 5)
    assert "all 5 prepared requests were sent" in note and "1 s duration" in note
    assert exhausted_note(ClientHealth(), load, 5) == []
    full = asyncio.run(run_phase(fake_send, prepared(500), PhasePlan("measure", Load(concurrency=1, duration_s=0.1))))
    assert full.client_health.prepared_exhausted_s is None


def test_duration_cells_are_bounded_by_memory_not_a_fixed_count():
    from tokenbench.load.cell import planned_count
    fast = Load(concurrency=64, duration_s=60)                   # 64 slots x 20/s x 60 s
    assert planned_count(fast, 128, "sharegpt") == 64 * 20 * 60  # well past the old 20,000
    assert planned_count(fast, 128_000, "sharegpt") < 1000       # huge prompts: memory decides
    assert planned_count(fast, 128_000, "random") is None        # made as sent: the duration decides
    assert planned_count(Load(concurrency=4, num_prompts=9), 128, "random") == 9


def test_final_usage_only_leaves_continuous_usage_out_of_the_body():
    import json

    from tokenbench.client.request import Prompt, RequestOptions, prepare
    prompt = Prompt(token_ids=(1, 2, 3), text="a b c", input_len=3, output_len=4, expected_prompt_tokens=3)
    every = json.loads(prepare("http://h:1", "completions", "m", prompt, None).body)["stream_options"]
    final = json.loads(prepare("http://h:1", "chat", "m", prompt, None, RequestOptions(final_usage_only=True)).body)
    final = final["stream_options"]
    assert every == {"include_usage": True, "continuous_usage_stats": True}
    assert final == {"include_usage": True}
