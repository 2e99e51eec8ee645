"""Issue 24, item 3: where tokenbench runs both the client and a local engine, they get disjoint CPU sets
(the client on a core of its own), the client a higher priority where permitted, and the run says so."""

from __future__ import annotations

import os

import psutil
import pytest

from tokenbench.deploy import lifecycle, profiles
from tokenbench.deploy.local import Placement
from tokenbench.errors import SpecError, UsageError
from tokenbench.host import isolation
from tokenbench.host.isolation import CLIENT_NICE, ENGINE_NICE, Isolation, applied, plan
from tokenbench.spec.loader import load_model
from tokenbench.spec.study import Client

from .helpers import SLEEPER, write_profile

TWO, ONE, EIGHT = frozenset({0, 1}), frozenset({0}), frozenset(range(8))


def client(**kw) -> Client:
    return Client(**kw)


def test_two_cores_put_the_client_on_the_last_and_the_engine_on_the_first():
    iso = plan(client(), local_engine=True, available=TWO)
    assert (iso.client_cpus, iso.engine_cpus) == ({1}, {0})
    assert iso.record()["client_cpus"] == "1" and iso.record()["engine_cpus"] == "0"


def test_one_core_is_not_isolated_and_says_so():
    iso = plan(client(), local_engine=True, available=ONE)
    assert iso.client_cpus is None and iso.engine_cpus is None
    assert "not isolated" in iso.note and iso.engine_nice == ENGINE_NICE      # the engine yields to the client


def test_workers_get_a_core_each_and_the_engine_keeps_at_least_one():
    iso = plan(client(workers=3), local_engine=True, available=EIGHT)
    assert iso.client_cpus == {5, 6, 7} and iso.engine_cpus == set(range(5))
    assert plan(client(workers=4), local_engine=True, available=TWO).client_cpus == {1}


def test_client_cpus_chooses_and_the_engine_gets_the_rest():
    iso = plan(client(cpus="2-3,6"), local_engine=True, available=EIGHT)
    assert iso.client_cpus == {2, 3, 6} and iso.engine_cpus == {0, 1, 4, 5, 7}
    assert iso.record()["client_cpus"] == "2-3,6"
    shared = plan(client(cpus="0-1"), local_engine=True, available=TWO)
    assert shared.engine_cpus is None and "share" in shared.note and shared.engine_nice == ENGINE_NICE


def test_nothing_is_pinned_for_a_server_tokenbench_did_not_start_unless_asked():
    remote = plan(client(), local_engine=False, available=TWO)
    assert remote.client_cpus is None and remote.client_nice is None and "not one tokenbench deployed" in remote.note
    asked = plan(client(cpus="1"), local_engine=False, available=TWO)
    assert asked.client_cpus == {1} and asked.engine_cpus is None
    assert plan(client(cpus="all"), local_engine=True, available=TWO).client_cpus is None


def test_bad_cpu_lists_are_one_line_errors_with_the_fix():
    with pytest.raises(SpecError, match="not a CPU list"):
        load_model(Client, {"cpus": "1-"}, "--client-cpus")
    with pytest.raises(UsageError, match="not available to this process") as exc:
        plan(client(cpus="9"), local_engine=True, available=TWO)
    assert "name CPUs among those" in exc.value.hint


def test_priority_is_raised_where_permitted_and_recorded_where_not(monkeypatch):
    monkeypatch.setattr(isolation, "_may_raise_priority", lambda: False)
    iso = plan(client(), local_engine=True, available=TWO)
    assert iso.client_nice is None and "not permitted" in iso.record()["note"]
    monkeypatch.setattr(isolation, "_may_raise_priority", lambda: True)
    assert plan(client(), local_engine=True, available=TWO).client_nice == os.getpriority(os.PRIO_PROCESS, 0) + CLIENT_NICE


def test_applied_pins_this_process_for_the_block_and_puts_it_back():
    before, nice = os.sched_getaffinity(0), os.getpriority(os.PRIO_PROCESS, 0)
    one, lower = min(before), min(nice + 1, 19)    # the suite itself may run at niceness 19 (`nice make test`)
    with applied(Isolation(client_cpus=frozenset({one}), client_nice=lower)):
        assert os.sched_getaffinity(0) == {one} and os.getpriority(os.PRIO_PROCESS, 0) == lower
    assert os.sched_getaffinity(0) == before and os.getpriority(os.PRIO_PROCESS, 0) == nice


@pytest.mark.slow
def test_a_local_engine_starts_on_its_cpus_at_its_niceness(tmp_path, monkeypatch):
    monkeypatch.setenv("TOKENBENCH_STATE", str(tmp_path / "state"))
    prof = profiles.load_profile(str(write_profile(tmp_path, code=SLEEPER)), [])
    cpu = min(os.sched_getaffinity(0))
    dep = lifecycle.launch(prof, tmp_path / "state", how=lifecycle.LaunchOptions(placement=Placement(frozenset({cpu}), 3)))
    try:
        engine = psutil.Process(dep.state.pid)
        assert engine.cpu_affinity() == [cpu]
        assert engine.nice() == min(os.getpriority(os.PRIO_PROCESS, 0) + 3, 19)   # the kernel caps niceness at 19
    finally:
        dep.stop()
