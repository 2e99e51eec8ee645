"""npu-smi info: every real capture parses to the numbers read off it by eye; layout variants agree."""

from __future__ import annotations

import re

import pytest

from tokenbench.errors import UsageError
from tokenbench.monitor.npu_smi import NpuProcess, npu_samples, parse_npu_smi

from .helpers import fixture_files, fixture_text


def parse(name: str):
    return parse_npu_smi(fixture_text(f"npu-smi/{name}"))


def chip(info, npu: int, chip_id: int):
    return next(c for c in info.chips if c.npu == npu and c.chip == chip_id)


def by_name(samples, name, **labels):
    return [s.value for s in samples if s.name == name
            and all(s.labels.get(k) == v for k, v in labels.items())]


def test_23_0_atlas300_memory_usage_is_the_main_memory_without_hbm():
    info = parse("23.0.0-atlas300-310-idle.txt")
    assert info.version == "23.0.0"
    (only,) = info.chips
    assert (only.npu, only.chip, only.phy_id, only.name, only.health) == (0, 0, 0, "310", "OK")
    assert (only.power_w, only.temp_c, only.aicore_pct) == (12.8, 61.0, 0.0)
    assert (only.ddr_used_mb, only.ddr_total_mb) == (577.0, 7759.0)
    assert only.hbm_total_mb is None and only.bus_id == "0000:01:00.0"
    assert info.processes == () and info.idle_npus == (0,)
    samples = npu_samples(info, 5)
    assert by_name(samples, "mem_used_mb") == [577.0] and by_name(samples, "mem_total_mb") == [7759.0]
    assert by_name(samples, "ddr_used_mb") == []
    assert {s.t_ns for s in samples} == {5} and {s.source for s in samples} == {"npu"}


def test_24_1_910a_reports_hbm_as_memory_and_ddr_beside_it():
    info = parse("24.1.0-910a-ddr-and-hbm-no-process-table.txt")
    assert info.version == "24.1.0" and len(info.chips) == 8
    first, last = chip(info, 0, 0), chip(info, 7, 0)
    assert (first.hbm_used_mb, first.hbm_total_mb, first.ddr_used_mb, first.ddr_total_mb) == (1365, 32768, 1197, 13553)
    assert (last.power_w, last.temp_c, last.bus_id, last.ddr_used_mb) == (65.6, 33.0, "0000:02:00.0", 1777)
    samples = npu_samples(info, 0)
    assert by_name(samples, "mem_used_mb", device="0") == [1365.0]
    assert by_name(samples, "ddr_used_mb", device="0") == [1197.0]
    assert info.processes == () and info.idle_npus == ()


def test_24_1_rc3_a3_two_chips_per_npu_power_only_on_chip_0():
    info = parse("24.1.rc3.5-a3-16chips-idle.txt")
    assert info.version == "24.1.rc3.5" and len(info.chips) == 16
    assert [(c.npu, c.chip, c.phy_id) for c in info.chips[-2:]] == [(7, 0, 14), (7, 1, 15)]
    assert chip(info, 1, 0).power_w == 185.9 and chip(info, 1, 1).power_w is None
    assert chip(info, 3, 1).hbm_used_mb == 3191 and chip(info, 3, 1).bus_id == "0000:93:00.0"
    assert sum(c.power_w for c in info.chips if c.power_w is not None) == pytest.approx(1429.5)
    assert info.idle_npus == tuple(range(8)) and info.processes == ()
    samples = npu_samples(info, 0)
    assert len(by_name(samples, "power_w")) == 8  # '-' is unknown, not 0
    assert by_name(samples, "util_pct", device="2", chip="1") == [0.0]


def test_25_2_910b3_one_process_without_a_name():
    info = parse("25.2.0-910b3-one-process.txt")
    assert [c.name for c in info.chips] == ["910B3"] * 8
    assert chip(info, 2, 0).hbm_used_mb == 41052 and chip(info, 2, 0).hbm_total_mb == 65536
    assert chip(info, 6, 0).power_w == 91.0
    assert info.processes == (NpuProcess(2, 0, 1333928, "", 37709.0),)
    assert info.idle_npus == (0, 1, 3, 4, 5, 6, 7)
    samples = npu_samples(info, 0)
    assert by_name(samples, "proc_mem_mb", device="2", pid="1333928") == [37709.0]


def test_25_2_910b4_masked_bus_ids_and_a_cut_off_table():
    info = parse("25.2.0-910b4-1-masked-bus-truncated.txt")
    assert [(c.npu, c.name, c.bus_id, c.power_w, c.temp_c) for c in info.chips] == [
        (0, "910B4-1", "0000:xx:00.0", 91.3, 33.0), (1, "910B4-1", "0000:xx:00.0", 88.1, 32.0)]
    assert [c.hbm_used_mb for c in info.chips] == [3197, 3197]
    assert info.processes == () and info.idle_npus == ()


def test_25_2_3_a3_busy_with_several_processes_per_chip():
    info = parse("25.2.3-a3-busy.txt")
    assert len(info.chips) == 16
    busy = {c.npu for c in info.chips if c.aicore_pct == 17}
    assert busy == {0, 1, 6, 7}
    assert chip(info, 0, 0).hbm_used_mb == 53444 and chip(info, 7, 1).hbm_used_mb == 50242
    assert chip(info, 6, 0).power_w == 243.3
    assert len(info.processes) == 14
    on_npu0 = [(p.chip, p.pid, p.mem_mb) for p in info.processes if p.npu == 0]
    assert on_npu0 == [(0, 3325989, 50128), (0, 3330598, 132), (0, 3328327, 133), (0, 3333165, 132),
                       (1, 3328327, 50119)]
    assert info.idle_npus == (2, 3, 4, 5)


def test_26_0_five_column_process_table_and_wide_values():
    info = parse("26.0.rc2-a3-5col-processes-excerpt.txt")
    assert info.version == "26.0.rc2"
    assert [(c.npu, c.chip, c.phy_id) for c in info.chips] == [(0, 0, 0), (0, 1, 1), (7, 1, 15)]
    assert chip(info, 0, 0).power_w == 162.6 and chip(info, 7, 1).hbm_used_mb == 31877
    assert info.processes == (NpuProcess(0, 0, 632268, "python3.1", 197.0),)
    assert info.idle_npus == (1,)


def test_26_1_910b3_five_column_process_table():
    info = parse("26.1.0-910b3-5col-one-process.txt")
    assert info.version == "26.1.0" and len(info.chips) == 8
    first = chip(info, 0, 0)
    assert (first.power_w, first.temp_c, first.hbm_used_mb, first.bus_id) == (100.0, 50.0, 8676, "0000:C1:00.0")
    assert chip(info, 7, 0).hbm_used_mb == 3403
    assert info.processes == (NpuProcess(0, 0, 485946, "pytest", 5175.0),)
    assert info.idle_npus == (1, 2, 3, 4, 5, 6, 7)


@pytest.mark.parametrize("path", fixture_files("npu-smi"), ids=lambda p: p.name)
def test_every_capture_gives_health_and_memory_for_every_chip(path):
    info = parse_npu_smi(path.read_text())
    samples = npu_samples(info, 0)
    assert len(by_name(samples, "health_ok")) == len(info.chips)
    assert by_name(samples, "health_ok") == [1.0] * len(info.chips)
    assert len(by_name(samples, "mem_used_mb")) == len(info.chips)


# --- layout variants derived from the real captures -------------------------------------------

BASE = "25.2.3-a3-busy.txt"


def signature(info):
    return [(c.npu, c.chip, c.power_w, c.temp_c, c.aicore_pct, c.hbm_used_mb, c.hbm_total_mb)
            for c in info.chips], [(p.npu, p.chip, p.pid, p.mem_mb) for p in info.processes]


@pytest.mark.parametrize("transform", [
    lambda t: re.sub(r" {2,}", " ", t),                    # narrow columns
    lambda t: t.replace("|", "   |   "),                    # wider columns
    lambda t: t.replace("\n", "\r\n"),                      # CRLF
    lambda t: "\n".join("    " + line for line in t.splitlines()),  # indented (pasted in docs)
    lambda t: "\n".join(x for x in t.splitlines() if not x.startswith("+")),  # no rules
], ids=["narrow", "wide", "crlf", "indented", "no-rules"])
def test_reflowed_tables_parse_the_same(transform):
    text = fixture_text(f"npu-smi/{BASE}")
    assert signature(parse_npu_smi(transform(text))) == signature(parse_npu_smi(text))


def test_rows_without_any_header_use_the_classic_column_order():
    text = fixture_text(f"npu-smi/{BASE}")
    rows = [x for x in text.splitlines() if not re.search(r"Health|Bus-Id|Process id", x)]
    assert signature(parse_npu_smi("\n".join(rows))) == signature(parse_npu_smi(text))


def test_values_follow_their_header_names_when_columns_move():
    text = (
        "| NPU   Name   | Health | Temp(C)   Power(W)  |\n"
        "| Chip         | Bus-Id | HBM-Usage(MB)   AICore(%) |\n"
        "| 3     910B2  | OK     | 41        250.5     |\n"
        "| 0            | 0000:C1:00.0 | 1000 / 65536   88 |\n"
    )
    (only,) = parse_npu_smi(text).chips
    assert (only.npu, only.temp_c, only.power_w, only.hbm_used_mb, only.aicore_pct) == (3, 41, 250.5, 1000, 88)


def test_header_without_hugepages_or_hbm_columns():
    # the 26.0.rc1 layout seen on a 910B1 box: Power/Temp on the head row, AICore/Memory below
    text = (
        "| NPU   Name                | Health        | Power(W)             Temp(C)           |\n"
        "| Chip                      | Bus-Id        | AICore(%)            Memory-Usage(MB)  |\n"
        "| 0     910B1               | OK            | 98.1                 48                |\n"
        "| 0                         | 0000:C1:00.0  | 100                  0    / 0          |\n"
    )
    (only,) = parse_npu_smi(text).chips
    assert (only.power_w, only.temp_c, only.aicore_pct, only.ddr_total_mb) == (98.1, 48, 100, 0)
    samples = npu_samples(parse_npu_smi(text), 0)
    assert by_name(samples, "mem_used_mb") == []  # 0 / 0 is "no such memory", not an empty one


def test_second_chip_row_under_one_head_row():
    text = (
        "| 0     Ascend910           | OK            | 176.9       46                0    / 0             |\n"
        "| 0     0                   | 0000:9C:00.0  | 0           0    / 0          3343  / 65536        |\n"
        "| 1     1                   | 0000:9D:00.0  | 95          0    / 0          40000 / 65536        |\n"
    )
    chips = parse_npu_smi(text).chips
    assert [(c.npu, c.chip, c.aicore_pct, c.power_w) for c in chips] == [(0, 0, 0, 176.9), (0, 1, 95, None)]


@pytest.mark.parametrize("text", [
    "", "npu-smi: command not found", "dcmi module initialize failed. ret is -8005",
    fixture_text("prometheus/sglang-0.5.1-issue-13485-excerpt.txt"),
])
def test_text_without_device_rows_is_a_usage_error(text):
    with pytest.raises(UsageError, match="no npu-smi device rows"):
        parse_npu_smi(text)
