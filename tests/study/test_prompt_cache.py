"""The prefix-cache state a cell records (study/prompt_cache.py): the order of the rules, by value, and what the
database says was sent before, read from a real store."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from tokenbench.spec.study import StudySpec
from tokenbench.store.db import Store
from tokenbench.store.rows import CellRow
from tokenbench.study.prompt_cache import decide, sent_before

TARGET = "http://127.0.0.1:8000"
KEY = "64:8/c=2"


def test_the_state_follows_what_tokenbench_did_and_found_in_that_order():
    assert (decide(True, True, False, "r1").state, decide(True, True, False, "r1").reason) == ("cold", "reset")
    assert decide(False, True, False, "r1").reason == "fresh_launch"
    warm = decide(False, False, False, "r1")
    assert (warm.state, warm.reason, warm.sent_by, warm.prompts) == ("warm", "sent_before", "r1", "seeded")
    assert decide(False, False, True, "r1").state == "warm"          # a resumed salted cell sent before
    fresh = decide(False, False, True, None)
    assert (fresh.state, fresh.reason, fresh.prompts) == ("cold", "fresh_prompts", "salted")
    unknown = decide(False, False, False, None)
    assert (unknown.state, unknown.reason) == ("unknown", "no_evidence")


def spec(**more) -> StudySpec:
    return StudySpec.model_validate({"target": {"base_url": TARGET}, "pairs": [[64, 8]], "concurrency": [2],
                                     "seed": 7, **more})


def stored(store: Store, s: StudySpec, key: str = KEY, repeat: int = 0, target: str = TARGET,
           status: str = "ok") -> str:
    run_id = store.create_run("bench", target, s.model_dump(mode="json"), [], {})
    config = store.upsert_config(run_id, "default")
    store.save_cell(run_id, config, CellRow(key=key, input_len=64, output_len=8, status=status, repeat=repeat, concurrency=2), [])
    return run_id


def test_the_same_prompts_to_the_same_target_were_sent_before(tmp_path):
    store = Store(tmp_path / "runs.db")
    assert sent_before(store, TARGET, spec(), KEY, 0) is None
    other_seed = stored(store, spec(seed=8))
    elsewhere = stored(store, spec(), target="http://127.0.0.1:9000")
    other_cell = stored(store, spec(), key="64:8/c=4")
    other_repeat = stored(store, spec(), repeat=1)
    salted = stored(store, spec(prompt_salt="abc"))
    assert sent_before(store, TARGET, spec(), KEY, 0) is None, (other_seed, elsewhere, other_cell, other_repeat, salted)
    first = stored(store, spec(), status="failed")                  # a failed cell sent its prompts too
    assert sent_before(store, TARGET, spec(), KEY, 0) == first
    assert sent_before(store, TARGET, spec(), KEY, 0, since=datetime.now(timezone.utc).timestamp() + 60) is None
    earlier = (datetime.now(timezone.utc) - timedelta(minutes=5)).timestamp()
    assert sent_before(store, TARGET, spec(), KEY, 0, since=earlier) == first
    # a salted run's own earlier attempt (a resume) sent the same prompts; another salt's did not
    assert sent_before(store, TARGET, spec(prompt_salt="abc"), KEY, 0) == salted
    assert sent_before(store, TARGET, spec(prompt_salt="xyz"), KEY, 0) is None
