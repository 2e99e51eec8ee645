"""Side-by-side comparison of stored runs (or of server configs within them), Study-B style:
first what differs, then the fairness verdict, then verdicts with 95 % intervals, tables with ratios
against the first column, and plots of every column on the same axes (report/compare_tables.py)."""

from __future__ import annotations

from dataclasses import replace

from tokenbench.errors import MeasurementError, UsageError
from tokenbench.judge import hardware, plausibility
from tokenbench.judge.cells import load_label_of, load_of, session_shape_of, state_of
from tokenbench.judge.fairness import Column, Issue, check, common_cells
from tokenbench.judge.fingerprint import Fingerprint, summaries
from tokenbench.judge.floors import Floors
from tokenbench.judge.intervals import Judging, default_floor
from tokenbench.judge.load_axes import LoadKey
from tokenbench.judge.views import RunData, load_run
from tokenbench.report import compare_tables as tables
from tokenbench.report import frontier, phases
from tokenbench.report.document import Block, Bullets, Document, Para, Table, num, pct
from tokenbench.report.explain import issue_text, plausibility_blocks
from tokenbench.report.i18n import t
from tokenbench.report.sections import Numberer
from tokenbench.store.db import Store


def select(store: Store, selectors: list[str]) -> list[Column]:
    """'RUN' (every config of the run that has cells) or 'RUN:CONFIG'."""
    runs: dict[str, RunData] = {}
    picked = []
    for sel in selectors:
        run_id, _, cfg = sel.partition(":")
        run = runs.get(run_id) or runs.setdefault(run_id, load_run(store, run_id, requests=False))
        names = run.config_names()
        if cfg and cfg not in names:
            raise UsageError(f"run {run_id} has no server config '{cfg}' with cells",
                             f"use one of: {', '.join(names) or '(none)'}")
        picked += [(run, n) for n in ([cfg] if cfg else names)]
    if len(picked) < 2:
        raise UsageError("compare needs at least two columns", "give two runs, or RUN:CONFIG twice")
    names = [column_name(run, n) for run, n in picked]
    return [Column(run, run.config(n), column_label(run, n), name if names.count(name) == 1 else column_label(run, n))
            for (run, n), name in zip(picked, names, strict=True)]


def _study_name(run: RunData) -> str | None:
    name = run.spec.get("name")
    return name if isinstance(name, str) else None


def column_name(run: RunData, config: str) -> str:
    """What a column is: the study's name (and the config when it is not the only one), else RUN:CONFIG."""
    name = _study_name(run)
    return name if name and config == "default" else f"{name or run.id}:{config}"


def column_label(run: RunData, config: str) -> str:
    """The header: the column's name with the run id, so it says both what it is and where it is stored:
    'llamacpp-study (20261201-152412-b6b5ba)'."""
    what = column_name(run, config)
    return f"{what} ({run.id})" if _study_name(run) else what


def _workload(col: Column) -> str:
    pairs = ", ".join(f"{a}/{b}" for a, b in col.run.pairs(col.config.name))
    loads = ", ".join(dict.fromkeys(load_label_of(c) for c in sorted(col.cells(), key=lambda c: load_of(c))))
    return f"{pairs}; {loads}" + "".join(f"; sessions: {s}" for s in _session_shapes(col))


def _session_shapes(col: Column) -> list[str]:
    """The session shapes of a column's sessions cells (turns, system prompt, think time...): what the
    pairs alone do not say of a sessions workload."""
    return sorted({shape for c in col.cells() if (shape := session_shape_of(c)) is not None})


def _hardware(col: Column) -> str:
    name = hardware.hardware_name(col.config.profile, col.config.facts, col.run.environment)
    return f"{hardware.device_count(col.config.profile, col.config.facts)} x {name}" if name else "-"


def _fingerprint(col: Column) -> Fingerprint:
    return Fingerprint.of(col.run, col.config)


def _host(col: Column) -> str:
    f = _fingerprint(col)
    return f"{f.host} ({f.cpu_model}, {f.cpus})"


HOST_ROWS = (("host.other", "other_pct"), ("host.server", "server_pct"), ("host.client", "client_pct"),
             ("host.psi", "psi_some_pct"))


def _mean_share(col: Column, name: str) -> str:
    """A CPU share's mean over the column's cells (monitor/cpu.py), as '%' ('-' where no cell tells it)."""
    side = [s.cpu for s in summaries(col.run.all_cells_of(col.config.name)) if s.cpu is not None]
    vals = [v for c in side if (v := getattr(c, name)) is not None]
    return pct(sum(vals) / len(vals) / 100, 0) if vals else "-"


def host_table(cols: list[Column], lang: str) -> Table | None:
    """Who used each column's host CPUs over its measured windows (the means over its cells): the facts a busier
    host is judged by (judge/fingerprint.HostRule); None where no column read them."""
    rows = [[t(lang, key), *[_mean_share(c, name) for c in cols]] for key, name in HOST_ROWS]
    if all(v == "-" for row in rows for v in row[1:]):
        return None
    return Table([t(lang, "attr.host_load"), *[c.label for c in cols]], rows, role="host_load", left=1)


ATTRIBUTES = (
    ("attr.kind", lambda c: c.run.kind),
    ("attr.engine", lambda c: c.config.engine),
    ("attr.version", lambda c: c.config.version or "-"),
    ("attr.model", lambda c: c.config.model or "-"),
    ("attr.hardware", _hardware),
    ("attr.image", lambda c: c.config.image or "-"),
    ("attr.flags", lambda c: c.config.flags() or "-"),
    ("attr.kv_capacity", lambda c: num(c.config.kv_capacity)),
    ("attr.tool", lambda c: c.run.tool_version),
    ("attr.host", _host),
    ("attr.launch", lambda c: _fingerprint(c).launch),
    ("attr.cache", lambda c: _fingerprint(c).cache),
    ("attr.workload", _workload),
)


def differences(cols: list[Column], lang: str) -> list[Block]:
    rows, same = [], []
    for key, get in ATTRIBUTES:
        vals = [get(c) for c in cols]
        if len(set(vals)) > 1:
            rows.append([t(lang, key), *vals])
        else:
            same.append(f"{t(lang, key)} = {vals[0]}")
    out: list[Block] = []
    if rows:
        out.append(Table([t(lang, "col.attribute"), *[c.label for c in cols]], rows, role="differs",
                         left=len(cols) + 1))
    else:
        out.append(Para(t(lang, "note.differs_none")))
    if same:
        out.append(Para(t(lang, "note.same", items="; ".join(same))))
    return out


def fairness_blocks(issues: list[Issue], lang: str) -> list[Block]:
    differs = [issue_text(i, lang) for i in issues if i.kind == "differs"]
    unknown = [issue_text(i, lang) for i in issues if i.kind == "unknown"]
    out: list[Block] = []
    if not differs and not unknown:
        out.append(Para(t(lang, "note.fair")))
    if differs:
        out += [Para(t(lang, "note.unfair")), Bullets(differs)]
    if unknown:
        out += [Para(t(lang, "note.unknown")), Bullets(unknown)]
    return out


def build_compare(cols: list[Column], lang: str, issues: list[Issue], version: str,
                  judging: Judging = Judging()) -> Document:
    doc = Document(t(lang, "title.compare", runs=" vs ".join(c.label for c in cols)), lang)
    num_ = Numberer()
    doc.add(num_.sec(t(lang, "h.differs")), *differences(cols, lang))
    host = host_table(cols, lang)
    if host is not None:
        doc.add(host)
    doc.add(num_.sec(t(lang, "h.fairness")), *fairness_blocks(issues, lang))
    if not common_cells(cols):
        doc.add(Para(t(lang, "note.no_common")))
    doc.add(*tables.all_tables(cols, lang, num_, judging))
    if phases.any_traced(cols):
        doc.add(num_.sec(t(lang, "cmp.phases")), *phases.compare_section(cols, lang, judging.min_effect))
    doc.add(num_.sec(t(lang, "h.frontier")), *frontier.blocks(tables.members(cols), lang, num_))
    checks = [chk for col in cols for chk in plausibility.check_run(col.run)
              if chk.config.name == col.config.name]
    doc.add(num_.sec(t(lang, "h.plausibility")), *plausibility_blocks(checks, lang))
    doc.add(Para(t(lang, "note.rendered", version=version)))
    return doc


def comparable(cols: list[Column]) -> list[tuple[tuple[int, int], LoadKey]]:
    """Common cells where every column's cell is ok."""
    return [(p, x) for p, x in common_cells(cols) if all((c := col.cell(p, x)) is not None and state_of(c).ok
                                                         for col in cols)]


def enforce(issues: list[Issue]) -> None:
    """--strict: refuse a comparison whose effective workloads differ or cannot be verified."""
    if issues:
        first = issue_text(issues[0])
        more = f" (and {len(issues) - 1} more)" if len(issues) > 1 else ""
        raise MeasurementError(f"compare --strict refused: {first}{more}",
                               "compare runs of the same effective workload, or drop --strict to see the "
                               "comparison with the warning")


def enforce_comparable(cols: list[Column]) -> None:
    """--strict: refuse a comparison with no cell that every column measured ok."""
    if not comparable(cols):
        common = len(common_cells(cols))
        raise MeasurementError(f"compare --strict refused: no comparable cell ({common} common, none ok in every "
                               "column)", "compare runs that measured the same (input, output, load) cells "
                               "successfully, or drop --strict")


def compare(store: Store, selectors: list[str], lang: str, version: str, strict: bool = False,
            judging: Judging = Judging()) -> tuple[Document, list[Issue]]:
    cols = select(store, selectors)
    issues = check(cols)
    if judging.floor is default_floor:          # a side measured once: the floor learned from this database
        judging = replace(judging, floor=Floors(store))
    if strict:
        enforce(issues)
        enforce_comparable(cols)
    return build_compare(cols, lang, issues, version, judging), issues
