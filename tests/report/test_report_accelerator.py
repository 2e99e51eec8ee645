"""The report of a run with accelerator samples (two GPUs, TP=2): a per-cell accelerator table in both
languages and both formats, per device and summed, its power and energy marked where the samples leave a
gap; the host's CPU and RAPL energy; the bottleneck read from these samples; the cost section and tokens per
$ on the frontier at the stated price."""

from __future__ import annotations

import re

import pytest

from tokenbench.judge.bottleneck import label
from tokenbench.judge.cells import label_of
from tokenbench.judge.cost import Price, cell_cost
from tokenbench.judge.frontier import devices
from tokenbench.judge.plausibility import check_run
from tokenbench.judge.views import load_run
from tokenbench.report import markdown, render
from tokenbench.report.build import build_report

from .report_fixtures import ACCEL_POWER, SPARSE_AT, build_accel_run, build_run


def page(store, run_id, lang="en"):
    run = load_run(store, run_id)
    return run, markdown.render(build_report(run, lang, check_run(run), "TEST"))


def section(text: str, head: str) -> str:
    start = text.index(head)
    end = text.find("\n## ", start + 1)
    return text[start:end if end > 0 else None]


def row(text: str, cell: str, device: str) -> list[str]:
    line = next(ln for ln in text.splitlines() if ln.startswith(f"| {cell} | {device} |"))
    return [c.strip() for c in line.strip("|").split("|")]


@pytest.mark.parametrize("lang,head,all2", [("en", "Accelerator and host over each cell", "all 2"),
                                            ("zh", "各测试点的加速卡与主机", "全部 2 卡")])
def test_accelerator_table_per_cell_and_device(store, lang, head, all2):
    run, text = page(store, build_accel_run(store), lang)
    body = section(text, head)
    for c in (1, 2, 4):
        cell = next(x for x in run.cells if x.concurrency == c)
        m = cell.summary.monitor
        total = row(body, label_of(cell), all2)
        gpu0 = row(body, label_of(cell), "gpu 0")
        mark = "◌" if c == SPARSE_AT else ""
        assert total[4] == f"{m.accel_power_mean_w:,.0f} / {2 * ACCEL_POWER[c]:,.0f}{mark}"
        assert total[6] == f"{m.accel_energy_per_output_token_j:,.3f}{mark}"
        assert total[8] == f"{cell.summary.total_output_tokens / m.accel_energy_j:,.3f}{mark}"
        assert gpu0[2] == f"{m.devices[0].util_mean_pct:.0f} / {m.devices[0].util_max_pct:.0f}"
        assert float(gpu0[5].rstrip("◌").replace(",", "")) == pytest.approx(m.devices[0].energy_j, abs=0.5)
    assert body.count("◌") >= 6 and f"c={SPARSE_AT}" in body.split("- ◌")[1]


@pytest.mark.parametrize("lang,said", [("en", "the energy counter's readings around an edge"),
                                       ("zh", "能耗计数器在其")])
def test_an_energy_counter_read_far_from_an_edge_is_marked_saying_so(store, lang, said):
    run, text = page(store, build_accel_run(store, counter=True), lang)
    for cell in run.cells:
        m = cell.summary.monitor
        assert m.accel_energy_source == "counter" and m.power_sparse == (cell.concurrency == SPARSE_AT)
    notes = [line for line in text.splitlines() if line.startswith("- ◌")]
    assert notes and all(said in line and f"c={SPARSE_AT}" in line for line in notes)


def test_energy_per_output_token_is_one_over_tokens_per_joule(store):
    run, text = page(store, build_accel_run(store))
    for cell in run.cells:
        m = cell.summary.monitor
        assert m.accel_energy_per_output_token_j * m.accel_tokens_per_joule == pytest.approx(1.0)
        # the power ramps from idle (70 W) to busy between the samples around each edge of the window: the
        # integral is off P x window by at most that ramp over one interval at each edge
        power = 2 * ACCEL_POWER[cell.concurrency]
        assert abs(m.accel_energy_j - power * m.window_s) <= 2 * (power - 2 * 70.0) * m.interval_s


def test_host_table_and_its_rapl_energy(store):
    run, text = page(store, build_accel_run(store))
    body = section(text, "Accelerator and host over each cell")
    cell = next(x for x in run.cells if x.concurrency == 4)
    line = next(ln for ln in body.splitlines() if ln.startswith(f"| {label_of(cell)} | 40 / 40 |"))
    assert f"{150.0 * cell.summary.monitor.window_s:,.0f}" in line        # 150 W package over the window


def test_a_run_without_accelerator_samples_has_no_such_section(store):
    _, text = page(store, build_run(store))
    assert "Accelerator and host over each cell" not in text and "Cost per million tokens" not in text


def test_bottleneck_reads_the_accelerator_samples(store):
    run = load_run(store, build_accel_run(store))
    busy = label(run, next(c for c in run.cells if c.concurrency == 4), None)
    assert (busy.kind, busy.evidence, busy.values["pct"]) == ("accelerator", "accel_busy", 97.0)
    quiet = label(run, next(c for c in run.cells if c.concurrency == 1), None)
    assert (quiet.kind, quiet.evidence, quiet.values["util"]) == ("unknown", "monitor_quiet", "35")


def test_cost_section_identity_and_split(store):
    run, text = page(store, build_accel_run(store, price=2.5))
    body = section(text, "Cost per million tokens")
    config = run.config("tp2")
    assert devices(config) == 2
    for cell in run.cells:
        cost = cell_cost(cell, Price(2.5), 2)
        s = cell.summary
        # $/M = $/h / (tok/s x 3600) x 10^6, and the split charges the whole cost of the window once
        assert cost.per_m_output == pytest.approx(5.0 / (s.output_throughput * 3600) * 1e6, rel=1e-12)
        window_cost = 5.0 * s.duration / 3600
        assert (cost.per_m_input_split * s.total_input_tokens + cost.per_m_output_split * s.total_output_tokens
                ) / 1e6 == pytest.approx(window_cost, rel=1e-9)
        assert cost.split_by == "tokens" and cost.output_per_usd == pytest.approx(s.total_output_tokens / window_cost)
        line = next(ln for ln in body.splitlines() if ln.startswith(f"| {label_of(cell)} |"))
        assert re.search(r"token share, proportional by construction \(80\.0% to input\)", line)
    assert body.count("their split is proportional by construction") == 1      # said once under the table
    assert "per $" in section(text, "Frontier: speed per user")


def test_html_has_the_accelerator_and_cost_tables_in_both_languages(store, tmp_path):
    run = load_run(store, build_accel_run(store))
    for lang in ("en", "zh"):
        html = render.write(build_report(run, lang, check_run(run), "TEST"), tmp_path / lang, ["html"])[0]
        doc = html.read_text()
        assert doc.count('<table class="accelerator"') == 1 and '<table class="cost"' in doc and "◌" in doc
