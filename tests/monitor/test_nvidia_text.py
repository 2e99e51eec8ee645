"""nvidia-smi's other outputs, read from real captures: `-q` (three drivers, 1 and 8 GPUs), the default table
(the 79- and 89-column layouts, a GPU without power readings), `dmon`, `topo -m`; and CSV variants of the
columns the GPU kit captures (`power.draw` preferred over its average and instant)."""

from __future__ import annotations

import json

import pytest

from tokenbench.cli.main import main
from tokenbench.monitor.nvidia_smi import parse_nvidia_smi
from tokenbench.monitor.nvidia_text import (
    parse_any,
    parse_dmon,
    parse_query_log,
    parse_table,
    parse_topology,
)

from .helpers import FIXTURES, fixture_text

SMI = "nvidia-smi/"


def test_query_log_of_an_h200():
    log = parse_query_log(fixture_text(SMI + "h200-gls-q.txt"))
    assert (log.driver, log.cuda, len(log.gpus)) == ("550.90.12", "12.4", 1)
    g = log.gpus[0]
    assert (g.reading.name, g.reading.mem_total_mb, g.reading.power_w, g.reading.temp_c) == (
        "NVIDIA H200", 143771.0, 74.58, 28.0)
    assert (g.persistence, g.mig, g.ecc, g.ecc_pending) == ("Enabled", "Disabled", "Enabled", "Enabled")
    assert (g.power_limit_w, g.power_default_w, g.power_max_w) == (700.0, 700.0, 700.0)
    assert (g.sm_clock_max_mhz, g.bus_id, g.throttles) == (1980.0, "00000000:03:00.0", ())


def test_query_log_of_eight_gpus_keeps_their_order():
    log = parse_query_log(fixture_text(SMI + "h100-sxm-x8-gls-q.txt"))
    assert [g.reading.index for g in log.gpus] == list(range(8))
    assert len({g.reading.uuid for g in log.gpus}) == 8 and log.cuda == "12.7"


def test_query_log_of_an_old_driver_reads_unknown_as_unknown():
    log = parse_query_log(fixture_text(SMI + "gtx680-gls-q.txt"))      # 470: "Power Readings", all N/A
    g = log.gpus[0]
    assert log.driver == "470.256.02" and g.persistence == "Disabled" and g.mig == "N/A"
    assert g.reading.power_w is None and g.power_limit_w is None and g.reading.util_pct is None


def test_query_log_names_active_clock_event_reasons_but_idle():
    text = fixture_text(SMI + "h200-gls-q.txt").replace(
        "        SW Power Cap                      : Not Active", "        SW Power Cap                      : Active")
    assert parse_query_log(text).gpus[0].throttles == ("SW Power Cap",)


@pytest.mark.parametrize("name,expected", [
    ("h200-gls-table.txt", [(0, "NVIDIA H200", 0.0, 1.0, 143771.0, 74.0, 28.0)]),
    ("gtx680-gls-table.txt", [(0, "NVIDIA GeForce ...", None, 0.0, 2000.0, None, 35.0)]),
    ("diamorphine-13-v100-table-excerpt.txt", [(0, "Tesla V100-DGXS...", 0.0, 449.0, 32478.0, 49.0, 38.0)]),
])
def test_default_table(name, expected):
    got = [(r.index, r.name, r.util_pct, r.mem_used_mb, r.mem_total_mb, r.power_w, r.temp_c)
           for r in parse_table(fixture_text(SMI + name))]
    assert got == expected


def test_default_table_of_eight_gpus_agrees_with_its_query_log():
    table = parse_table(fixture_text(SMI + "h100-sxm-x8-gls-table.txt"))
    log = parse_query_log(fixture_text(SMI + "h100-sxm-x8-gls-q.txt"))
    assert [r.index for r in table] == list(range(8))
    assert [r.mem_total_mb for r in table] == [g.reading.mem_total_mb for g in log.gpus]


def test_dmon_reads_each_gpu_per_tick_by_column_name():
    readings = parse_dmon(fixture_text(SMI + "deepspeech-178-dmon-pucvmet.txt"))
    assert [(r.index, r.power_w, r.temp_c, r.util_pct, r.mem_used_mb) for r in readings][:2] == [
        (0, 111.0, 83.0, 25.0, 11651.0), (1, 111.0, 84.0, 18.0, 11653.0)]
    assert len(readings) == 4


def test_dmon_of_newer_drivers_with_date_and_unknowns():
    text = ("#Date       Time        gpu    pwr  gtemp  mtemp     sm    mem    enc    dec\n"
            "#YYYYMMDD   HH:MM:SS    Idx      W      C      C      %      %      %      %\n"
            " 20250101   12:00:00      0    512     61      -     97     40      0      0\n"
            " 20250101   12:00:01      0      -     62      -     98     41      0      0\n")
    got = [(r.power_w, r.temp_c, r.util_pct) for r in parse_dmon(text)]
    assert got == [(512.0, 61.0, 97.0), (None, 62.0, 98.0)]


def test_topology_links_and_affinity():
    nv = parse_topology(fixture_text(SMI + "p4d-24xlarge-topo.txt"))
    assert nv.link(0, 7) == "NV12" and len(nv.links) == 56 and nv.numa[4] == "1" and nv.cpus[0] == "0-23,48-71"
    pcie = parse_topology(fixture_text(SMI + "g6e-12xlarge-topo.txt"))
    assert set(pcie.links.values()) == {"NODE"} and pcie.link(3, 0) == "NODE"
    tabs = parse_topology("\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n"
                          "GPU0\t X \tPHB\t0-63\t0\t\tN/A\nGPU1\tPHB\t X \t0-63\t0\t\tN/A\n")
    assert tabs.link(0, 1) == "PHB" and tabs.cpus == {0: "0-63", 1: "0-63"}


def test_csv_prefers_power_draw_over_average_and_instant():
    text = ("index, power.draw.instant [W], power.draw [W], power.draw.average [W]\n0, 300.00 W, 280.50 W, 275.00 W\n"
            "1, 301.00 W, [N/A], 277.00 W\n")
    assert [r.power_w for r in parse_nvidia_smi(text)] == [280.5, 277.0]


def test_csv_reordered_noheader_with_its_query():
    text = "NVIDIA H200, 512.31 W, 70123 MiB, 3\n"
    (r,) = parse_nvidia_smi(text, ("name", "power.draw", "memory.used", "index"))
    assert (r.index, r.name, r.power_w, r.mem_used_mb) == (3, "NVIDIA H200", 512.31, 70123.0)


@pytest.mark.parametrize("name,form", [("h200-gls-q.txt", "query"), ("h100-sxm-x8-gls-table.txt", "table"),
                                       ("deepspeech-178-dmon-pucvmet.txt", "dmon"),
                                       ("bpytop-26-header-units-extra-columns.csv", "csv")])
def test_every_format_is_recognised(name, form):
    assert parse_any(fixture_text(SMI + name))[0] == form


def test_parse_command_on_a_query_log(capsys):
    assert main(["parse", "nvidia-smi", str(FIXTURES / "nvidia-smi" / "h100-sxm-x8-gls-q.txt")]) == 0
    out = json.loads(capsys.readouterr().out)
    assert (out["format"], out["driver"], out["cuda"], out["gpus"]) == ("query", "565.57.01", "12.7", 8)
    assert {s["name"] for s in out["samples"]} >= {"power_w", "mem_total_mb", "util_pct"}


def test_parse_command_on_text_with_no_gpu_is_one_line(capsys, tmp_path):
    empty = tmp_path / "smi.txt"
    empty.write_text("+----+\n| NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver |\n")
    assert main(["parse", "nvidia-smi", str(empty)]) == 2
    assert "no GPU found" in capsys.readouterr().err
