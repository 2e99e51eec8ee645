"""Could the server's prefix cache hold a cell's prompts when the cell started? Decided by the study's runner
before each cell, from what tokenbench did and what the results database says was sent, in this order
(docs/metrics.md, "Prefix-cache state"):

- cold, `reset`: tokenbench emptied the engine's prefix cache before the cell (its adapter's reset endpoint
  answered 2xx), as `sglang.bench_serving --flush-cache` does;
- cold, `fresh_launch`: tokenbench launched the server for this run: nothing but this run reached it, and no
  two cells of a run send the same prompts;
- warm, `sent_before`: a stored cell with the same prompts (the same key and repeat, seed, API and workload, and
  salt: none, or this run's own, an earlier attempt of a resumed cell) went to the same target after its server
  process started (where that start is known);
- cold, `fresh_prompts`: the run's prompts are salted (the default without --seed): nothing sent before can
  share them;
- unknown, `no_evidence`: reproducible prompts to a server tokenbench neither launched nor reset, which nothing
  stored sent them to.
"""

from __future__ import annotations

import math
from datetime import datetime

from tokenbench.metrics.summary_groups import CacheState
from tokenbench.spec.study import StudySpec
from tokenbench.store.db import Store


def same_prompts(spec: StudySpec, stored: dict) -> bool:
    """Whether a stored run's spec makes the prompts this study makes (cell by cell): the same salt (none, or
    this run's own), seed, API and workload."""
    return (stored.get("prompt_salt") == spec.prompt_salt and stored.get("seed") == spec.seed
            and stored.get("api") == spec.api and stored.get("workload") == spec.workload.model_dump(mode="json"))


def _epoch(iso: str) -> float | None:
    try:
        return datetime.fromisoformat(iso).timestamp()
    except ValueError:
        return None


def sent_before(store: Store, target: str, spec: StudySpec, key: str, repeat: int,
                since: float | None = None) -> str | None:
    """The run that sent this cell's prompts to `target` before (the first stored after `since`, the server
    process's start, where it is known), or None. A cell's finish is stored to the whole second (truncated): one
    stored in the second the process started counts as after it (a short run can finish within that second)."""
    start = math.floor(since) if since is not None else None
    for send in store.sends(target, key, repeat):
        stored = _epoch(send.finished_at)
        if same_prompts(spec, send.spec) and (start is None or (stored is not None and stored >= start)):
            return send.run_id
    return None


def decide(reset: bool, ours: bool, salted: bool, sent_by: str | None) -> CacheState:
    """The cell's prefix-cache state from what tokenbench did and found (module doc), in that order."""
    prompts = "salted" if salted else "seeded"
    if reset:
        return CacheState(state="cold", reason="reset", prompts=prompts)
    if ours:
        return CacheState(state="cold", reason="fresh_launch", prompts=prompts)
    if sent_by is not None:
        return CacheState(state="warm", reason="sent_before", prompts=prompts, sent_by=sent_by)
    if salted:
        return CacheState(state="cold", reason="fresh_prompts", prompts=prompts)
    return CacheState(state="unknown", reason="no_evidence", prompts=prompts)
