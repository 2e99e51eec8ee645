"""The stored request is the measured request: every RequestRecord field comes back from the results
database equal (a property over any record), and the JSON result's request is the same record minus the
generated text and the worker number. A version-3 database is migrated with the new columns."""

from __future__ import annotations

import dataclasses
import sqlite3
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from tokenbench.client.records import ERROR_KINDS, RequestRecord
from tokenbench.store.db import Store
from tokenbench.store.records import FIELDS, NOT_IN_JSON, REQUEST_COLUMNS, from_dict, to_dict
from tokenbench.store.rows import CellRow
from tokenbench.store.schema import MIGRATIONS, V1_DDL

NS = st.integers(0, 2**53)
TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=40)
OPT = st.none() | st.integers(0, 2**31)


@st.composite
def records(draw, index: int = 0) -> RequestRecord:
    intended = draw(NS)
    sent = intended + draw(st.integers(0, 10**9))
    times = sorted(draw(st.lists(st.integers(sent, sent + 10**10), max_size=8)))
    end = max([sent, *times]) + draw(st.integers(0, 10**9))
    return RequestRecord(
        index=index, phase=draw(st.sampled_from(["warmup", "measure"])), input_len=draw(st.integers(0, 10**6)),
        output_len=draw(st.integers(0, 10**6)), intended_ns=intended, sent_ns=sent, end_ns=end,
        status=draw(st.none() | st.integers(100, 599)), token_times_ns=times,
        token_counts=draw(st.lists(st.integers(0, 64), min_size=len(times), max_size=len(times))),
        prompt_tokens=draw(OPT), completion_tokens=draw(OPT), cached_tokens=draw(OPT),
        images=draw(st.integers(0, 16)), image_bytes=draw(st.integers(0, 2**40)), image_count=draw(OPT),
        usage_source=draw(st.sampled_from(["server", "chunks", "none"])),
        finish_reason=draw(st.none() | st.sampled_from(["stop", "length"])),
        error_kind=draw(st.none() | st.sampled_from(ERROR_KINDS)), error_detail=draw(TEXT), length_error=draw(TEXT),
        text=draw(TEXT), worker=draw(st.integers(0, 64)),
        first_content_ns=draw(st.none() | st.integers(sent, sent + 10**10)),
        reasoning_tokens=draw(st.integers(0, 10**6)), count_source=draw(st.sampled_from(["none", "usage", "chunks"])),
        expected_prompt_tokens=draw(OPT), connect_ns=draw(st.integers(0, 10**9)), connect_in_ttft=draw(st.booleans()),
        session_id=draw(st.none() | TEXT), turn=draw(st.none() | st.integers(0, 1000)),
        **draw(server_timings()))


SIGNED = st.none() | st.integers(-2**62, 2**62)


@st.composite
def server_timings(draw) -> dict:
    """A request's server-side fields: none (no span joined), or any values a span can give."""
    if not draw(st.booleans()):
        return {"trace_id": draw(st.none() | st.text("0123456789abcdef", min_size=32, max_size=32))}
    names = ("server_arrival_ns", "server_queue_ns", "server_prefill_ns", "server_ttft_ns", "server_decode_ns",
             "server_e2e_ns", "clock_offset_ns", "clock_offset_error_ns")
    return {"trace_id": draw(st.text("0123456789abcdef", min_size=32, max_size=32)),
            "server_request_id": draw(st.none() | TEXT), **{n: draw(SIGNED) for n in names}}


def _store_one(store: Store, rec: RequestRecord) -> RequestRecord:
    run = store.create_run("bench", "http://x", {}, [], {})
    config = store.upsert_config(run, "default")
    cell_id = store.save_cell(run, config, CellRow(key="k", input_len=1, output_len=1, status="ok"), [rec])
    return store.requests(cell_id, rec.phase)[0]


def test_every_record_field_has_its_column():
    assert {f.name for f in FIELDS} == {f.name for f in dataclasses.fields(RequestRecord)}
    with tempfile.TemporaryDirectory() as d:
        have = {r[1] for r in Store(Path(d) / "t.db").db.execute("PRAGMA table_info(requests)")}
    assert set(REQUEST_COLUMNS) <= have


@settings(max_examples=150, deadline=None)
@given(records())
def test_a_record_comes_back_from_the_store_equal_in_every_field(rec):
    with tempfile.TemporaryDirectory() as d:
        store = Store(Path(d) / "t.db")
        back = _store_one(store, rec)
        store.close()
    assert back == rec
    assert back.queue_ns == rec.queue_ns and back.ttfc_ns == rec.ttfc_ns


@settings(max_examples=150, deadline=None)
@given(records())
def test_the_json_result_holds_every_field_but_text_and_worker(rec):
    back = from_dict(to_dict(rec))
    blank = RequestRecord(index=0, phase="measure", input_len=0, output_len=0, intended_ns=0, sent_ns=0, end_ns=0)
    assert back == dataclasses.replace(rec, **{k: getattr(blank, k) for k in NOT_IN_JSON})


def test_connection_set_up_is_not_read_back_as_queue_time(tmp_path):
    """The case that was lost: a new connection of 700 ns before a send 1000 ns late is 300 ns of queue."""
    rec = RequestRecord(index=0, phase="measure", input_len=8, output_len=8, intended_ns=1_000, sent_ns=2_000,
                        end_ns=9_000, connect_ns=700)
    back = _store_one(Store(tmp_path / "t.db"), rec)
    assert back.queue_ns == rec.queue_ns == 300 and back.connect_ns == 700


def test_a_version_3_database_gets_the_new_columns_and_keeps_its_requests(tmp_path):
    path = tmp_path / "v3.db"
    con = sqlite3.connect(path)
    con.executescript(V1_DDL)
    for version, sql in MIGRATIONS:
        if version <= 3:
            con.executescript(sql)
    con.execute("INSERT INTO runs (id, created_at, kind, status, target, tool_version, spec_json, command_json,"
                " environment_json, clock_json) VALUES ('r', 'x', 'bench', 'done', 't', '0', '{}', '[]', '{}', '{}')")
    con.execute("INSERT INTO server_configs (run_id, name) VALUES ('r', 'default')")
    con.execute("INSERT INTO cells (run_id, config_id, key, input_len, output_len, status, summary_json, finished_at)"
                " VALUES ('r', 1, 'k', 4, 4, 'ok', '{}', 'x')")
    con.execute("INSERT INTO requests (cell_id, phase, idx, input_len, output_len, intended_ns, sent_ns, end_ns,"
                " usage_source, token_offsets_json, token_counts_json) VALUES (1, 'measure', 0, 4, 4, 10, 20, 90,"
                " 'server', '[30,40]', '[1,1]')")
    con.execute("PRAGMA user_version = 3")
    con.commit()
    con.close()
    back = Store(path).requests(1)[0]
    assert back.token_times_ns == [50, 60] and back.images == 0 and back.connect_ns == 0
    assert back.first_content_ns is None and back.count_source == "none" and back.connect_in_ttft is False


def test_profiles_and_server_facts_come_back_as_the_types_they_were_written_as(tmp_path):
    from tokenbench.deploy.profiles import load_profile
    from tokenbench.spec.server_facts import ServerFacts
    store = Store(tmp_path / "t.db")
    run = store.create_run("sweep", "http://x", {}, [], {})
    profile = load_profile("cpu-smollm2-llamacpp")
    facts = ServerFacts(engine="llamacpp", version="b1", model="m", ctx_per_seq=2048, kv_capacity_tokens=4096, slots=2,
                        prefix_cache="enabled", speculative={"running": "x"}, metrics={"slots": "/props"},
                        source={"a": 1})
    imported = {"engine": "vllm", "model": "m", "workload": {"temperature": None, "ignore_eos": True},
                "hardware": "h100", "speculative_num_draft_tokens": 4}
    store.upsert_config(run, "mine", profile=profile, facts=facts)
    store.upsert_config(run, "theirs", facts=ServerFacts.from_dict(imported))
    mine, theirs = store.configs(run)
    assert mine.profile == profile and mine.facts == facts and mine.facts.to_dict() == facts.to_dict()
    assert theirs.profile is None and theirs.facts.to_dict() == imported          # stored as stated, no more
    assert theirs.facts.workload.ignore_eos is True and theirs.facts.other == {"speculative_num_draft_tokens": 4}
