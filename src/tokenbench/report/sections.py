"""The measurement sections of a run report: environment, baseline, scaling, matrix, config comparison.

Each function returns blocks ([] when the run has nothing to show there); build.py puts them in order and
numbers the headings of the sections that have blocks.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from tokenbench.judge import hardware, plausibility
from tokenbench.judge.bottleneck import label
from tokenbench.judge.cells import label_of, load_label_of, load_of, pair_of
from tokenbench.judge.intervals import Book
from tokenbench.judge.plausibility import Roofline
from tokenbench.judge.views import ConfigInfo, RunData
from tokenbench.metrics import uncertainty as u
from tokenbench.metrics.cell_summary import Metric, known
from tokenbench.metrics.summary_groups import ServerCounters
from tokenbench.report import explain
from tokenbench.report.document import Block, Heading, Para, Table, num, pct, signed_pct
from tokenbench.report.i18n import t
from tokenbench.report.marks import fig, footnotes
from tokenbench.report.verdicts import UNRELIABLE, figure, unreliable_in
from tokenbench.store.rows import CellRow

BASELINE = (Metric("ttft", "mean"), Metric("tpot", "mean"), Metric("e2el", "mean"), Metric("output_throughput", "mean"))


class Adds(Protocol):
    def add(self, *blocks: Block) -> None: ...


class Numberer:
    """'3. Title' for sections, '3.2 Title' for their subsections."""

    def __init__(self) -> None:
        self.n, self.k = 0, 0

    def sec(self, text: str) -> Heading:
        self.n, self.k = self.n + 1, 0
        return Heading(f"{self.n}. {text}", 2)

    def sub(self, text: str) -> Heading:
        self.k += 1
        return Heading(f"{self.n}.{self.k} {text}", 3)

    def section(self, doc: Adds, text: str, make: Callable[[], list[Block]]) -> None:
        """A numbered section of `make()`'s blocks (it may number subsections with `sub`); left out, its
        number unused, when they are none: a section with nothing to show is not shown."""
        saved = self.n, self.k
        head = self.sec(text)
        body = make()
        if body:
            doc.add(head, *body)
        else:
            self.n, self.k = saved


def _cut(text: str, n: int = 300) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


# environment --------------------------------------------------------------------------------------
def environment(run: RunData, lang: str) -> list[Block]:
    env = run.environment
    rows = [("env.run", run.id), ("env.date", run.created_at), ("env.kind", run.kind), ("env.status", run.status),
            ("env.target", run.target), ("env.tool", run.tool_version),
            ("env.command", _cut(" ".join(map(str, run.command)))), ("env.os", env.get("os")),
            ("env.kernel", env.get("kernel")), ("env.cpu", _cpu(env)), ("env.memory", env.get("memory_gb")),
            ("env.python", env.get("python")),
            ("env.packages", ", ".join(f"{k} {v}" for k, v in sorted((env.get("packages") or {}).items()))),
            ("env.accelerators", ", ".join(_acc(a) for a in env.get("accelerators") or [])),
            ("env.isolation", _isolation(env.get("isolation"), lang)),
            ("env.client_ceiling", _ceiling(env.get("client_ceiling"), lang)),
            ("env.source", (run.spec.get("import") or {}).get("source", ""))]
    table = Table([t(lang, "col.item"), t(lang, "col.value")],
                  [[t(lang, k), str(v)] for k, v in rows if v not in (None, "", [])], left=2)
    return [table]


NOT_OURS = ("not one tokenbench deployed", "not tokenbench's")    # notes of runs stored before `local_engine`


def _isolation(iso, lang: str) -> str | None:
    """Where the client ran, and a local engine where tokenbench started one (host/isolation.py), as stored
    with the run: nothing is said of a server tokenbench did not start."""
    if not isinstance(iso, dict):
        return None
    local = iso.get("local_engine")
    if local is None:
        local = not any(n in str(iso.get("note", "")) for n in NOT_OURS)
    text = t(lang, "env.isolation_client", cpus=iso.get("client_cpus", "?"), nice=iso.get("client_nice", "?"))
    if local:
        text += t(lang, "env.isolation_engine", cpus=iso.get("engine_cpus", "?"), nice=iso.get("engine_nice", "?"))
    return f"{text}: {iso['note']}" if iso.get("note") else text


def _ceiling(c, lang: str) -> str | None:
    """This machine's client ceiling when the run started (host/ceiling.py), as stored with the run."""
    if not isinstance(c, dict) or not c.get("streams"):
        return None
    text = t(lang, "env.client_ceiling_value", streams=num(c["streams"]), chunks=num(c.get("chunks_per_s"), 0),
             cpus=c.get("client_cpus", "?"), error=signed_pct(c.get("ttft_error")), date=c.get("measured_at", "?"))
    return text if c.get("bounded", True) else text + t(lang, "env.client_ceiling_open")


def _cpu(env: dict) -> str | None:
    if not env.get("cpu"):
        return None
    return f"{env['cpu']} x {env['cpu_count']}" if env.get("cpu_count") else env["cpu"]


def _acc(a) -> str:
    return str(a.get("name", a)) if isinstance(a, dict) else str(a)


def _size(cfg: ConfigInfo) -> str:
    s = plausibility.model_size(cfg.profile, cfg.facts)
    return f"{s.params_b:g}B x {s.bytes_per_param:g} bytes = {s.weights_gb:.2f} GB" if s else "-"


def configs(run: RunData, lang: str) -> list[Block]:
    head = [t(lang, k) for k in ("col.config", "col.engine", "col.version", "col.model", "col.hardware",
                                  "col.model_size", "col.image", "col.flags", "col.kv_capacity", "col.ctx")]
    rows = []
    for cfg in run.configs:
        hw = hardware.hardware_name(cfg.profile, cfg.facts, run.environment)
        devices = hardware.device_count(cfg.profile, cfg.facts)
        rows.append([cfg.name, cfg.engine, cfg.version or "-", cfg.model or "-",
                     f"{devices} x {hw}" if hw else "-", _size(cfg), cfg.image or "-", cfg.flags() or "-",
                     num(cfg.kv_capacity), num(cfg.ctx_per_seq)])
    notes = [n for cfg in run.configs for n in explain.method_notes(cfg.name, cfg.facts.capabilities, lang)]
    return [Table(head, rows, left=8), *(Para(n) for n in notes)]


# baseline and scaling -----------------------------------------------------------------------------
SCALING_KEYS = ["request_throughput", "output_throughput", "total_token_throughput", "mean_ttft_ms", "p99_ttft_ms",
                "mean_tpot_ms", "p99_tpot_ms", "mean_e2el_ms", "request_goodput"]


def _notes(cells: list[CellRow], shown: list, lang: str) -> list[str]:
    """Why each marked cell or figure is marked, and what ◊ means when a shown p99 carries it."""
    extra = [t(lang, "note.unreliable", mark=UNRELIABLE, n=u.UNRELIABLE_N)] if unreliable_in(shown) else []
    return footnotes(cells, lang, keys=SCALING_KEYS) + extra


def baseline(run: RunData, lang: str, book: Book | None = None) -> list[Block]:
    """Concurrency-1 cells: mean TTFT, TPOT, E2E and output tok/s, each with its 95 % interval."""
    book = book or Book(run)
    head = [t(lang, k) for k in ("col.config", "col.pair", "col.ttft_mean", "col.tpot_mean", "col.e2e_mean",
                                  "col.out_tps")]
    rows, used = [], []
    for cfg in run.config_names():
        for c in run.cells_of(cfg):
            if c.concurrency == 1:
                used.append(c)
                rows.append([cfg, f"{c.input_len}/{c.output_len}", *[figure(book, c, m) for m in BASELINE]])
    if not rows:
        return []
    return [Para(t(lang, "note.headline_intervals")),
            Table(head, rows, role="baseline", left=2, footnotes=footnotes(used, lang, keys=[m.key for m in BASELINE]))]


def _kv_use(c: CellRow) -> str:
    if c.kv_demand is None or not c.kv_capacity:
        return "-"
    return f"{num(c.kv_demand)} / {num(c.kv_capacity)} ({pct(c.kv_demand / c.kv_capacity, 0)})"


def bottleneck_text(run: RunData, c: CellRow, roof: Roofline | None, lang: str) -> str:
    return explain.bottleneck_text(label(run, c, roof), lang)


def _load(c: CellRow) -> str:
    """The load asked; a rate sent off the asked one by more than the tolerance also says the rate sent
    ('20/s → 16.5/s', explained under the table)."""
    r = c.summary.send
    if r is None or r.send_rate_off is None or r.send_rate_achieved is None:
        return load_label_of(c)
    return f"{load_label_of(c)} → {r.send_rate_achieved:.3g}/s"


def cell_notes(cells: list[CellRow], lang: str) -> list[str]:
    """Under a table of these cells: why a cell's sent rate is off the asked one, and a stream tail that
    matters (report/explain.py)."""
    notes = [explain.send_note(f"{c.config} {label_of(c)}", c.summary, lang) for c in cells]
    notes += [explain.schedule_note(f"{c.config} {label_of(c)}", c.summary, lang) for c in cells]
    notes += [explain.tail_note(f"{c.config} {label_of(c)}", c.summary, lang) for c in cells]
    notes += [explain.delivery_note(f"{c.config} {label_of(c)}", c.summary, lang) for c in cells]
    notes += [explain.early_note(f"{c.config} {label_of(c)}", c.summary, lang) for c in cells]
    return [n for n in notes if n]


def _scaling_row(run: RunData, book: Book, c: CellRow, goodput: bool, roof: Roofline | None, lang: str) -> list:
    s = c.summary
    sent = s.interruption.planned if s.interruption is not None else s.num_prompts    # interrupted: of the planned
    done = f"{num(s.completed)}/{num(sent)}" if sent is not None else num(s.completed)
    f = lambda name, stat="mean", digits=None: figure(book, c, Metric(name, stat), digits)   # noqa: E731
    row = [fig(c, _load(c)), fig(c, done, over=False), f("request_throughput", digits=2), f("output_throughput"),
           fig(c, num(known(s.total_token_throughput)), over=False, key="total_token_throughput"), f("ttft"),
           f("ttft", "p99"), f("tpot"),
           f("tpot", "p99"), f("e2el"), fig(c, _kv_use(c), over=False)]
    if goodput:
        row += [f("request_goodput", digits=2), fig(c, pct(known(s.goodput_fraction)), over=False)]
    return row + [fig(c, bottleneck_text(run, c, roof, lang), over=False)]


def _counters(c: CellRow) -> ServerCounters:
    return c.summary.counters or ServerCounters()


def _trace_reuse(c: CellRow) -> float | None:
    return c.summary.facts.trace_reuse_rate if c.summary.facts else None


def _acceptance(c: CellRow) -> str:
    rate, length = _counters(c).spec_acceptance_rate, _counters(c).spec_mean_acceptance_length
    return f"{pct(rate)}, {num(length, 2)}" if rate is not None or length is not None else "-"


def _hits(c: CellRow) -> str:
    rate = c.summary.cache_hit_rate
    return pct(rate) if rate or _trace_reuse(c) is not None else "-"


# (i18n key, the cell's text): shown after TPOT where a cell has the figure (a hit rate: where one is above 0)
SERVER_COLUMNS: tuple[tuple[str, Callable[[CellRow], str]], ...] = (
    ("spec_accept", _acceptance), ("cache_hit", _hits), ("trace_reuse", lambda c: pct(_trace_reuse(c))))


def server_columns(cells: list[CellRow]) -> list[str]:
    """The server-counter columns (i18n keys after `col.`/`def.`) some of these cells have."""
    return [key for key, text in SERVER_COLUMNS if any(text(c) != "-" for c in cells)]


def _server_columns(head: list[str], rows: list[list], used: list[CellRow], lang: str) -> None:
    """After TPOT: speculative acceptance, prefix-cache hits, a trace's own reuse, where a cell has them."""
    keys = server_columns(used)
    shown = [(f"col.{key}", text) for key, text in SERVER_COLUMNS if key in keys]
    at = head.index(t(lang, "col.tpot_p99")) + 1
    head[at:at] = [t(lang, key) for key, _ in shown]
    for row, c in zip(rows, used, strict=True):
        row[at:at] = [fig(c, text(c), over=False) for _, text in shown]


def scaling_table(run: RunData, cfg: str, pair: tuple[int, int], lang: str, roof: Roofline | None = None,
                  book: Book | None = None) -> Table:
    """One row per load: the headline figures with their 95 % intervals, KV use, goodput, bottleneck."""
    book = book or Book(run)
    used = [c for c in run.cells_of(cfg) if pair_of(c) == pair]
    goodput = any(known(c.summary.request_goodput) is not None for c in used)
    keys = ("col.load", "col.requests", "col.req_s", "col.out_tps", "col.total_tps", "col.ttft_mean", "col.ttft_p99",
            "col.tpot_mean", "col.tpot_p99", "col.e2e_mean", "col.kv_use")
    head = [t(lang, k) for k in keys] + ([t(lang, "col.goodput"), t(lang, "col.slo_attain")] if goodput else [])
    rows = [_scaling_row(run, book, c, goodput, roof, lang) for c in used]
    _server_columns(head, rows, used, lang)
    head.append(t(lang, "col.bottleneck"))
    return Table(head, rows, role="scaling",
                 footnotes=_notes(used, [x for r in rows for x in r], lang) + cell_notes(used, lang))


# matrix ------------------------------------------------------------------------------------------
def _capacity(run: RunData, cfg: str) -> int | None:
    cap = run.config(cfg).kv_capacity
    if cap:
        return cap
    return next((c.kv_capacity for c in run.cells_of(cfg) if c.kv_capacity), None)


def matrix(run: RunData, cfg: str, lang: str) -> Table:
    cells = run.cells_of(cfg)
    loads = sorted({load_of(c) for c in cells})
    cap = _capacity(run, cfg)
    head = [t(lang, "col.pair")] + [k.label for k in loads] + ([t(lang, "col.max_fit")] if cap else [])
    rows = []
    for pair in run.pairs(cfg):
        row: list = [f"{pair[0]}/{pair[1]}"]
        for k in loads:
            c = run.cell_at(cfg, pair, k)
            row.append(fig(c, num(known(c.summary.output_throughput)), key="output_throughput") if c else "-")
        if cap:
            row.append(num(cap // (pair[0] + pair[1])))
        rows.append(row)
    return Table(head, rows, role="matrix", footnotes=footnotes(cells, lang, keys=["output_throughput"]))


def any_over(run: RunData) -> bool:
    return any(c.over_capacity for cfg in run.config_names() for c in run.cells_of(cfg))
