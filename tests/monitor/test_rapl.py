"""Host energy from RAPL (powercap) on a fake sysfs tree: package zones only, unwrapped at their range, and a
stated reason where the host exposes none or only to root; the host sampler emits the counters. The NVIDIA
sampler's NVML path reads the total-energy counter (a stand-in NVML)."""

from __future__ import annotations

import sys

from tokenbench.monitor.rapl import Rapl
from tokenbench.monitor.samplers import HostSampler, NvidiaSmiSampler

from .standins import standin_pynvml


def zone(root, name: str, path: str, uj: int, span: int = 262143328850):
    folder = root / path
    folder.mkdir(parents=True)
    (folder / "name").write_text(name + "\n")
    (folder / "energy_uj").write_text(f"{uj}\n")
    (folder / "max_energy_range_uj").write_text(f"{span}\n")
    return folder / "energy_uj"


def test_package_zones_only_and_unwrapped(tmp_path):
    p0 = zone(tmp_path, "package-0", "intel-rapl:0", 1_000_000, span=10_000_000)
    zone(tmp_path, "package-1", "intel-rapl:1", 5_000_000)
    zone(tmp_path, "dram", "intel-rapl:0:2", 7)            # a sub-zone: part of the package's story, left out
    zone(tmp_path, "psys", "intel-rapl-mmio:0", 9)         # not a package
    rapl = Rapl(tmp_path)
    assert rapl.note is None and rapl.read() == {"package-0": 1.0, "package-1": 5.0}
    p0.write_text("9000000\n")
    assert rapl.read()["package-0"] == 9.0
    p0.write_text("500000\n")                              # wrapped at 10 J: 1 + 0.5 J more
    assert rapl.read()["package-0"] == 10.5


def test_no_counters_and_unreadable_counters_are_stated(tmp_path):
    assert "no RAPL package counter" in Rapl(tmp_path / "absent").note
    bad = zone(tmp_path, "package-0", "intel-rapl:0", 1)
    bad.unlink()
    bad.mkdir()                                             # a read that fails, whoever reads it
    rapl = Rapl(tmp_path)
    assert "not readable" in rapl.note and rapl.read() == {}


def test_host_sampler_emits_each_package_counter(tmp_path):
    zone(tmp_path, "package-0", "intel-rapl:0", 2_000_000)
    samples = HostSampler(powercap=tmp_path).sample()
    energy = [s for s in samples if s.name == "energy_j"]
    assert [(s.value, s.labels) for s in energy] == [(2.0, {"zone": "package-0"})]


def test_nvml_path_reads_the_total_energy_counter(monkeypatch):
    now = [10**9]
    monkeypatch.setitem(sys.modules, "pynvml", standin_pynvml(gpus=2, watts=400.0, clock=lambda: now[0]))
    sampler = NvidiaSmiSampler()
    first = sampler.sample()
    now[0] = 3 * 10**9
    second = sampler.sample()
    energy = [[s.value for s in batch if s.name == "energy_j"] for batch in (first, second)]
    assert energy == [[400.0, 400.0], [1200.0, 1200.0]]   # 400 W x 1 s, then x 3 s (in J)
