"""The summary's groups are a fixed set of typed fields (metrics/cell_summary.py): each group type has one
field, `with_` places a group by its type and takes nothing else, a group without a field fails at run
time and at type-check time, and the stored keys of different groups never collide."""

from __future__ import annotations

import inspect
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import tokenbench
from tokenbench.metrics import summary_groups, timeslices
from tokenbench.metrics.cell_summary import GROUPS, CellSummary, field_of
from tokenbench.metrics.summary_groups import ClientHealth, Group, MonitorFigures, WorkloadFacts


def _declared_groups() -> list[type[Group]]:
    """Every group class the metrics package declares."""
    return [c for m in (summary_groups, timeslices) for _, c in inspect.getmembers(m, inspect.isclass)
            if issubclass(c, Group) and c is not Group and c.__module__ == m.__name__]


def test_every_declared_group_has_exactly_one_field():
    assert sorted(c.__name__ for c in _declared_groups()) == sorted(c.__name__ for c in GROUPS.values())
    assert len(set(GROUPS.values())) == len(GROUPS)
    for name, group in GROUPS.items():
        assert field_of(group) == name
        assert CellSummary.model_fields[name].default is None


@pytest.mark.parametrize("name", list(GROUPS))
def test_with_places_each_group_in_its_field_and_nowhere_else(name):
    group = GROUPS[name]()
    s = CellSummary(completed=3).with_(group, None)
    assert getattr(s, name) is group and s.completed == 3
    assert [n for n in GROUPS if getattr(s, n) is not None] == [name]


def test_with_takes_no_names_and_nothing_but_a_declared_group():
    s = CellSummary()
    with pytest.raises(TypeError):
        s.with_(helth=ClientHealth())                  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        s.with_({"health": ClientHealth()})             # type: ignore[arg-type]

    class Undeclared(Group):
        x: int | None = None

    with pytest.raises(TypeError, match="Undeclared is not a group of CellSummary"):
        s.with_(Undeclared(x=1))


def test_the_groups_stored_keys_never_collide():
    """A stored summary reads back into the same groups whatever their order: no key belongs to two."""
    owners: dict[str, str] = {k: "summary" for k in CellSummary.model_fields if k not in GROUPS}
    for name, group in GROUPS.items():
        for key in group.key_names():
            assert key not in owners, (key, owners.get(key), name)
            owners[key] = name


def test_a_group_round_trips_through_the_stored_form():
    s = CellSummary(completed=2).with_(WorkloadFacts(workload="text", text_corpus_tokens=7),
                                       MonitorFigures(samples=4, accel_chips=1))
    back = CellSummary.from_dict(s.to_dict())
    assert back == s and back.facts == s.facts and back.monitor is not None and back.monitor.samples == 4


@pytest.mark.slow
def test_a_misspelt_group_fails_the_type_check(tmp_path):
    """mypy refuses a group given by name, and a group class that does not exist."""
    src = tmp_path / "misspelt.py"
    src.write_text(textwrap.dedent("""
        from tokenbench.metrics.cell_summary import CellSummary
        from tokenbench.metrics.summary_groups import ClientHealth
        CellSummary().with_(helth=ClientHealth())
        CellSummary().with_(ClientHelth())
        CellSummary().with_(ClientHealth())
    """))
    package_root = Path(tokenbench.__file__).parent.parent
    done = subprocess.run([sys.executable, "-m", "mypy", "--follow-imports=silent", "--cache-dir", str(tmp_path / "c"),
                           str(src)], capture_output=True, text=True, cwd=tmp_path,
                          env={**os.environ, "MYPYPATH": str(package_root)})
    errors = [line for line in done.stdout.splitlines() if ": error:" in line]
    assert [int(line.split(":")[1]) for line in errors] == [4, 5], done.stdout


def test_a_group_is_amended_through_its_named_methods_and_keeps_what_it_is_given():
    """The amendments the load runner, the Ray driver, the workload builder and the cell's monitor make: each a
    method of the group's type, giving exactly those keys (a None given is kept, as the monitor's queue check)."""
    health = ClientHealth(loop_lag_p99_ms=2.0)
    assert health.ran_out(None) is health and health.shifted(7).stalls == health.stalls.shifted(7)
    assert health.ran_out(3.5).stopped(4.0).on_ray([5, -5], ["n1", "n2"]).flat() == {
        "loop_lag_p99_ms": 2.0, "prepared_exhausted_s": 3.5, "stopped_after_s": 4.0, "clock_offsets_ns": [5, -5],
        "ray_nodes": ["n1", "n2"]}
    facts = WorkloadFacts(tokenizer="local /m").of_sessions([10, 30, 50])
    assert facts.flat() == {"workload": "sessions", "input_len_mean": 30.0, "input_len_min": 10, "input_len_max": 50,
                            "tokenizer": "local /m"}
    assert MonitorFigures(samples=4).checked(None).flat() == {"monitor_samples": 4, "monitor_queue_check": None}
    assert MonitorFigures().checked("x", "no powercap").flat() == {"monitor_queue_check": "x",
                                                                  "monitor_host_energy_note": "no powercap"}
