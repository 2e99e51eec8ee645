"""Repeats of different server configs are interleaved (A B, B A, ...), the order shuffled by the seed."""

from __future__ import annotations

from tokenbench.spec.study import StudySpec
from tokenbench.store.db import Store
from tokenbench.study.configs import StudyRunner
from tokenbench.study.plan import plan, visits


def _spec(repeats: int, seed: int = 0, configs: int = 2) -> StudySpec:
    return StudySpec(target={"profile": "cpu-smollm2-llamacpp"}, pairs=[[64, 16]], concurrency=[1, 4],
                     vary={"slots": list(range(1, configs + 1))}, repeats=repeats, seed=seed)


def test_rounds_visit_every_config_once_per_repeat_in_a_seeded_order():
    v = visits(plan(_spec(4)))
    assert [r for _, r in v] == [0, 0, 1, 1, 2, 2, 3, 3]
    rounds = [tuple(c.name for c, r in v if r == k) for k in range(4)]
    assert all(sorted(r) == ["slots=1", "slots=2"] for r in rounds)
    assert len(set(rounds)) == 2                          # not always A B: the order is shuffled
    assert visits(plan(_spec(4))) == v                    # ... by the seed, deterministically


def test_one_config_or_one_repeat_keeps_each_config_in_one_visit():
    assert [r for _, r in visits(plan(_spec(1)))] == [None, None]
    assert [(c.name, r) for c, r in visits(plan(_spec(3, configs=1)))] == [("slots=1", None)]


def test_the_runner_deploys_per_round_with_that_repeats_cells(tmp_path):
    store = Store(tmp_path / "r.db")
    p = plan(_spec(3))
    run_id = store.create_run("sweep", "profile", p.spec.model_dump(mode="json"), ["tokenbench"], {})
    runner = StudyRunner(p, store, run_id)
    seen = []

    def fake_run_config(config):
        todo = runner.pending(config)
        seen.append((config.name, sorted({c.repeat for c in todo}), len(todo)))
        runner.attempted |= {(config.name, c.key, c.repeat) for c in todo}

    runner._run_config = fake_run_config
    assert runner.run() == []
    assert [(r, n) for _, r, n in seen] == [([0], 2), ([0], 2), ([1], 2), ([1], 2), ([2], 2), ([2], 2)]
    assert [name for name, _, _ in seen[:2]] != [name for name, _, _ in seen[2:4]] or \
        [name for name, _, _ in seen[2:4]] != [name for name, _, _ in seen[4:]]
    store.close()
