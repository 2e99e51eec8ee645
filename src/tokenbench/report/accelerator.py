"""The accelerator section of a run report: per cell, what its devices did over the measured window
(first measured send to last measured byte): utilisation, memory against capacity, power, energy per output
token and per request, tokens per joule, per device and summed over the server's devices; then the host's
CPU and energy. Self-contained: it reads the cells' monitor figures (monitor/summary.py) and nothing else.
Formulas: docs/monitoring.md ("Cell summary"); power and energy marked `◌` where the samples do not cover the
window ("Coverage")."""

from __future__ import annotations

from tokenbench.judge.cells import label_of
from tokenbench.judge.views import RunData
from tokenbench.metrics.cell_summary import known
from tokenbench.metrics.summary_groups import POWER_KEYS, DeviceFigures, MonitorFigures
from tokenbench.report.document import Block, Cell, Para, Table, num
from tokenbench.report.i18n import t
from tokenbench.report.marks import fig, footnotes
from tokenbench.report.sections import Numberer
from tokenbench.store.rows import CellRow

ENERGY = MonitorFigures.PREFIX + "accel_energy_j"      # the key a power or energy column is marked by
MIB_PER_GIB = 1024


def _monitor(c: CellRow) -> MonitorFigures:
    return c.summary.monitor or MonitorFigures()


def accel_cells(run: RunData, config: str) -> list[CellRow]:
    return [c for c in run.cells_of(config) if _monitor(c).devices]


def host_cells(run: RunData, config: str) -> list[CellRow]:
    return [c for c in run.cells_of(config) if known(_monitor(c).host_cpu_mean_pct) is not None]


def shown(run: RunData) -> bool:
    """Whether the run has anything for this section: accelerator devices sampled over some cell."""
    return any(accel_cells(run, cfg) for cfg in run.config_names())


def _gib(mb: float | None) -> str:
    return "-" if mb is None else num(mb / MIB_PER_GIB, 1)


def _pair(a: float | None, b: float | None, digits: int = 0) -> str:
    return f"{num(a, digits)} / {num(b, digits)}"


def _per(value: float | None, count: float | None, digits: int = 3) -> str:
    return num(value / count, digits) if value is not None and count else "-"


def _source(d: DeviceFigures | MonitorFigures, lang: str) -> str:
    source = d.energy_source if isinstance(d, DeviceFigures) else d.accel_energy_source
    coverage = d.coverage_pct if isinstance(d, DeviceFigures) else d.accel_coverage_pct
    if not source:
        return "-"
    words = " + ".join(t(lang, f"accel.src.{s}") for s in source.split("+"))
    return words + (f" ({num(coverage, 0)}%)" if coverage is not None else "")


def _energy_cells(c: CellRow, energy: float | None, power: tuple[float | None, float | None]) -> list[Cell]:
    tokens, requests = known(c.summary.total_output_tokens), known(c.summary.completed)
    tpj = num(tokens / energy, 3) if tokens and energy else "-"
    return [fig(c, _pair(*power), over=False, key=ENERGY), fig(c, num(energy, 0), over=False, key=ENERGY),
            fig(c, _per(energy, tokens), over=False, key=ENERGY), fig(c, _per(energy, requests, 1), over=False,
                                                                        key=ENERGY),
            fig(c, tpj, over=False, key=ENERGY)]


def _device_row(c: CellRow, d: DeviceFigures, lang: str) -> list[str | Cell]:
    memory = f"{_gib(d.mem_used_mean_mb)} / {_gib(d.mem_peak_mb)} / {_gib(d.mem_total_mb)}"
    return [fig(c, label_of(c), over=False), f"{d.source} {d.device}", fig(c, _pair(d.util_mean_pct, d.util_max_pct),
                                                                       over=False),
            fig(c, memory, over=False), *_energy_cells(c, d.energy_j, (d.power_mean_w, d.power_max_w)),
            _source(d, lang)]


def _total_row(c: CellRow, m: MonitorFigures, lang: str) -> list[str | Cell]:
    memory = f"{_gib(m.accel_mem_used_mean_mb)} / {_gib(m.accel_mem_peak_mb)} / {_gib(m.accel_mem_capacity_mb)}"
    return [fig(c, label_of(c), over=False), t(lang, "accel.all", n=len(m.devices or [])),
            fig(c, _pair(m.accel_util_mean_pct, m.accel_util_max_pct), over=False), fig(c, memory, over=False),
            *_energy_cells(c, m.accel_energy_j, (m.accel_power_mean_w, m.accel_power_max_w)), _source(m, lang)]


def _rows(c: CellRow, lang: str) -> list[list[str | Cell]]:
    """One row per device; with several, their sum (the whole server) first."""
    m = _monitor(c)
    devices = m.devices or []
    rows = [_device_row(c, d, lang) for d in devices]
    return rows if len(devices) == 1 else [_total_row(c, m, lang), *rows]


def accel_table(cells: list[CellRow], lang: str) -> Table:
    head = [t(lang, k) for k in ("col.cell", "col.device", "col.accel_util", "col.accel_mem", "col.accel_power",
                                  "col.energy_j", "col.j_per_token", "col.j_per_request", "col.tokens_per_j",
                                  "col.energy_source")]
    rows = [row for c in cells for row in _rows(c, lang)]
    return Table(head, rows, role="accelerator", left=2, footnotes=footnotes(cells, lang, keys=sorted(POWER_KEYS)))


def _host_row(c: CellRow) -> list[str | Cell]:
    m = _monitor(c)
    return [fig(c, label_of(c), over=False), fig(c, _pair(m.host_cpu_mean_pct, m.host_cpu_max_pct), over=False),
            fig(c, f"{num(m.proc_cpu_mean_pct, 0)} / {num(m.proc_rss_peak_mb, 0)}", over=False),
            fig(c, num(m.host_energy_j, 0), over=False),
            fig(c, num(m.host_energy_per_output_token_j, 3), over=False)]


def host_table(cells: list[CellRow], lang: str) -> list[Block]:
    head = [t(lang, k) for k in ("col.cell", "col.host_cpu", "col.server_proc", "col.host_energy_j",
                                  "col.host_j_per_token")]
    out: list[Block] = [Table(head, [_host_row(c) for c in cells], role="host", left=1)]
    notes = sorted({n for c in cells if (n := _monitor(c).host_energy_note)})
    out += [Para(t(lang, "accel.host_note", note=n)) for n in notes]
    return out


def section(run: RunData, lang: str, num_: Numberer) -> list[Block]:
    """Per server config: the accelerator table, then the host's; what the figures cover, once."""
    out: list[Block] = [Para(t(lang, "accel.intro"))]
    for cfg in run.config_names():
        cells, hosts = accel_cells(run, cfg), host_cells(run, cfg)
        if cells:
            out += [num_.sub(t(lang, "h.accel_config", config=cfg)), accel_table(cells, lang)]
        if cells and hosts:
            out += host_table(hosts, lang)
    return out
