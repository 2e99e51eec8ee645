"""Who used the host's CPUs (monitor/cpu.py): the kernel's files read by value, the window's shares from
counter readings, and the process trees against real processes whose own CPU time is the reference (no test
here depends on the machine being quiet: each compares a counter with the same processes' own accounting)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import psutil
import pytest

from tokenbench.monitor import cpu
from tokenbench.monitor.cpu import CpuSampler, ProcessTree, host_times, pressure, shares
from tokenbench.monitor.samples import Sample
from tokenbench.monitor.window import CellWindow

S = 1_000_000_000
TICK = cpu.TICK_S
BUSY = "import time\nwhile True:\n    pass\n"


def test_proc_stat_busy_is_all_but_idle_and_iowait_steal_included(tmp_path):
    f = tmp_path / "stat"
    # user nice system idle iowait irq softirq steal guest guest_nice (ticks)
    f.write_text("cpu  100 5 40 800 30 2 3 20 7 0\ncpu0 1 2 3 4 5 6 7 8 9 10\n")
    busy, total = host_times(f)
    assert total == pytest.approx(1000 * TICK)                 # guest is inside user already: not added again
    assert busy == pytest.approx((1000 - 800 - 30) * TICK)
    assert host_times(tmp_path / "missing") is None


def test_pressure_reads_the_totals_in_seconds(tmp_path):
    f = tmp_path / "cpu"
    f.write_text("some avg10=1.00 avg60=2.00 avg300=3.00 total=2500000\n"
                 "full avg10=0.00 avg60=0.00 avg300=0.00 total=125000\n")
    assert pressure(f) == (2.5, 0.125)
    f.write_text("some avg10=1.00 avg60=2.00 avg300=3.00 total=42\n")      # before Linux 5.13: no full line
    assert pressure(f) == (42e-6, None)
    assert pressure(tmp_path / "none") is None


def _series(name: str, points: list[tuple[float, float]]) -> list[Sample]:
    return [Sample(int(t * S), cpu.SOURCE, name, v) for t, v in points]


def test_shares_are_the_counters_increases_over_the_window_in_percent_of_one_core():
    """Counters read at 0 s and 4 s, the window 1-3 s: each increase is interpolated at its edges (a counter
    growing evenly gives half its increase), then divided by the 2 s window."""
    samples = (_series(cpu.BUSY, [(0, 10), (4, 16)]) + _series(cpu.TOTAL, [(0, 100), (4, 108)])
               + _series(cpu.CLIENT, [(0, 1), (4, 2)]) + _series(cpu.SERVER, [(0, 0), (4, 2)])
               + _series(cpu.SERVER_WAIT, [(0, 0), (4, 0.4)]) + _series(cpu.PSI_SOME, [(0, 5), (4, 7)]))
    got = shares(samples, CellWindow(1 * S, 3 * S), "local")
    assert got is not None
    assert (got.window_s, got.count) == (2.0, 2)
    assert got.host_pct == pytest.approx(150.0)             # 3 s busy of 2 s: 1.5 cores
    assert got.client_pct == pytest.approx(25.0)
    assert got.server_pct == pytest.approx(50.0)
    assert got.other_pct == pytest.approx(75.0)             # host - client - server
    assert got.server_wait_pct == pytest.approx(10.0)
    assert got.psi_some_pct == pytest.approx(50.0)
    assert got.psi_full_pct is None and got.client_wait_pct is None
    assert got.idle_pct() == pytest.approx(50.0)
    assert got.server_seen == "local"


def test_without_the_server_other_work_is_not_told_and_without_edges_nothing_is():
    samples = _series(cpu.BUSY, [(0, 0), (2, 2)]) + _series(cpu.TOTAL, [(0, 0), (2, 4)]) + _series(cpu.CLIENT, [(0, 0), (2, 1)])
    got = shares(samples, CellWindow(0, 2 * S), "remote")
    assert got is not None and got.server_pct is None and got.other_pct is None and got.client_pct == 50.0
    assert shares(samples, CellWindow(0, 3 * S)) is None     # no reading at or after the window's end
    assert shares(samples, CellWindow()) is None


def _cpu_s(pid: int) -> float:
    t = psutil.Process(pid).cpu_times()
    return t.user + t.system


def _spin(s: float) -> None:
    end = time.thread_time() + s
    while time.thread_time() < end:
        pass


def _busy_child() -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", BUSY], stdin=subprocess.DEVNULL)


def test_a_tree_counts_its_live_children_and_keeps_what_a_reaped_one_used():
    """A child's CPU is in its parent's tree while it runs (its own accounting is the reference) and stays
    there once it has ended and been reaped: the counter never falls."""
    child = subprocess.Popen([sys.executable, "-c", "import time\nend = time.process_time() + 0.3\n"
                              "while time.process_time() < end:\n    pass\ntime.sleep(30)\n"])
    tree = ProcessTree(os.getpid())
    first = tree.read()
    assert first is not None
    while _cpu_s(child.pid) < 0.3:
        time.sleep(0.02)
    used = _cpu_s(child.pid)
    live = tree.read()
    assert live is not None and live[0] - first[0] >= used - 2 * TICK
    child.kill()
    child.wait()                                             # reaped: its time moves to our children's
    after = tree.read()
    assert after is not None and after[0] >= live[0]
    assert after[0] - first[0] < used + 1.0                  # counted once, not twice (ours is small here)


def test_the_servers_subtree_is_not_the_clients_even_when_it_is_our_child():
    """The server tokenbench started is its child: its CPU is the server's, never the client's, while it runs
    and after it is reaped (its whole lifetime's CPU then lands in our children's times)."""
    server = _busy_child()
    try:
        sampler = CpuSampler(server_pid=server.pid, seen="deployed")
        before = sampler.sample()
        while _cpu_s(server.pid) < 0.3:
            time.sleep(0.05)
        used = _cpu_s(server.pid)
        during = sampler.sample()
    finally:
        server.kill()
        server.wait()
    after = sampler.sample()
    value = {(s.name, i): s.value for i, batch in enumerate((before, during, after)) for s in batch}
    server_grew = value[(cpu.SERVER, 1)] - value[(cpu.SERVER, 0)]
    client_grew = value[(cpu.CLIENT, 2)] - value[(cpu.CLIENT, 0)]
    assert server_grew >= used - value[(cpu.SERVER, 0)] - 2 * TICK
    assert client_grew < used / 2, (client_grew, used)       # the reaped server did not become the client's


def test_other_work_is_what_neither_tree_used():
    """Three processes: a sleeping one stands for the client, a busy one for the server, a busy one for other
    work. The sampler's clock also reads the server's and the other process's own CPU time, so each reading is
    bracketed by their accounting: the server's share lies between those brackets, and other work took at
    least what the third process used (whatever else runs on this machine only adds to it)."""
    client = subprocess.Popen([sys.executable, "-c", "import time\ntime.sleep(60)\n"])
    server, other = _busy_child(), _busy_child()
    refs: list[tuple[float, float]] = []

    def clock() -> int:
        refs.append((_cpu_s(server.pid), _cpu_s(other.pid)))
        return time.perf_counter_ns()

    try:
        sampler = CpuSampler(server_pid=server.pid, seen="local", clock=clock, client_pid=client.pid)
        first = sampler.sample()
        while refs[-1][0] - refs[0][0] < 0.5 or refs[-1][1] - refs[0][1] < 0.5:
            time.sleep(0.05)
            clock()
        last = sampler.sample()
    finally:
        for p in (client, server, other):
            p.kill()
            p.wait()
    w = CellWindow(first[0].t_ns, last[0].t_ns)             # the readings' own times: no interpolation
    got = shares(first + last, w, "local")
    assert got is not None and got.window_s
    wall = got.window_s
    (s_start0, _), (s_end0, o_end0) = refs[0], refs[1]             # around the first reading
    (s_start1, o_start1), (s_end1, _) = refs[-2], refs[-1]         # around the last
    assert got.client_pct is not None and got.client_pct <= 100 * 2 * TICK / wall
    assert got.server_pct is not None
    assert 100 * (s_start1 - s_end0 - 2 * TICK) / wall <= got.server_pct <= 100 * (s_end1 - s_start0 + 2 * TICK) / wall
    assert got.other_pct is not None and got.other_pct >= 100 * (o_start1 - o_end0) / wall - 10


def _spin() -> None:
    while True:
        pass


def test_the_client_is_tokenbench_and_its_workers_not_its_callers_other_children():
    """A library caller's own child (a server a test fixture started) is not the client's; a process
    multiprocessing started (a --workers process) is: each against the process's own accounting."""
    import multiprocessing as mp
    theirs = _busy_child()
    ours = mp.get_context("spawn").Process(target=_spin, daemon=True)
    ours.start()
    try:
        sampler = CpuSampler()
        first = {s.name: s.value for s in sampler.sample()}
        start = (_cpu_s(theirs.pid), _cpu_s(ours.pid))
        while _cpu_s(theirs.pid) - start[0] < 0.5 or _cpu_s(ours.pid) - start[1] < 0.5:
            time.sleep(0.05)
        last = {s.name: s.value for s in sampler.sample()}
        end = (_cpu_s(theirs.pid), _cpu_s(ours.pid))
    finally:
        theirs.kill()
        theirs.wait()
        ours.kill()
        ours.join()
    grew = last[cpu.CLIENT] - first[cpu.CLIENT]
    assert grew >= end[1] - start[1] - 0.1 - 2 * TICK    # the worker's time (read a little before and after)
    assert grew < end[1] - start[1] + 0.4                 # and not the caller's other child's 0.5 s or more
