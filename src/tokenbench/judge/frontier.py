"""The frontier across server configs, engines and runs, as data: every measured cell is an operating
point with its output speed per user (tok/s each request sees) and its output throughput per device, each
with its 95 % interval; a point another beats on both is dominated (Pareto). Power, where the monitor
sampled it, gives tokens per joule and output tok/s per kW. Formulas: docs/metrics.md, "Frontier".

The frontier is drawn per (input, output) pair: the trade-off between 512/512 and 16k/2k points says
nothing. Load dimensions may share a frontier (both axes are outcomes, not the load); a point names its
load. A cell that is not ok is kept (drawn hollow) but never dominates and is never on the frontier.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Literal

from tokenbench.judge import hardware
from tokenbench.judge.cells import figure_state_of, load_label_of, load_of, pair_of, state_of, value_of
from tokenbench.judge.cost import SECONDS_PER_HOUR, Price
from tokenbench.judge.intervals import Book
from tokenbench.judge.status import State
from tokenbench.judge.views import ConfigInfo, RunData
from tokenbench.metrics import uncertainty as u
from tokenbench.metrics.cell_summary import Metric, known
from tokenbench.store.rows import CellRow

OUTPUT = Metric("output_throughput")
TPOT = Metric("tpot")
Missing = Literal["no_speed", "no_throughput", "not_ok"]
Basis = Literal["tpot", "per_stream"]
BASES: tuple[Basis, ...] = ("tpot", "per_stream")
TINY = 1e-12          # a figure of 0 divides as this in the dominance margin


@dataclass(frozen=True)
class Estimate:
    """A figure with its 95 % interval (None: no per-request records, e.g. an imported run); `derived`: not
    measured as such but computed from other figures of the cell (docs/metrics.md, "Frontier")."""

    value: float
    lo: float | None = None
    hi: float | None = None
    derived: bool = False

    @property
    def has_interval(self) -> bool:
        return self.lo is not None and self.hi is not None

    def scaled(self, k: float) -> Estimate:
        lo, hi = (None, None) if not self.has_interval else (self.lo * k, self.hi * k)     # type: ignore[operator]
        return Estimate(self.value * k, lo, hi, self.derived)


@dataclass(frozen=True)
class Member:
    """One owner of points: a server config of a run (the report), or a compared column."""

    label: str
    run: RunData
    config: ConfigInfo
    book: Book

    def cells(self) -> list[CellRow]:
        return self.run.cells_of(self.config.name)


@dataclass(frozen=True, kw_only=True)
class Point:
    owner: str
    cell: CellRow
    devices: int
    per_user: Estimate                       # output tok/s per user
    per_device: Estimate                     # output tok/s per device
    per_kw: Estimate | None = None           # output tok/s per kW of mean accelerator power
    per_joule: Estimate | None = None        # output tokens per joule
    per_usd: Estimate | None = None          # output tokens per $ at the run's stated price (judge/cost.py)
    dominated_by: Point | None = field(default=None, compare=False, repr=False)
    clearly: bool = False                    # the dominating point's intervals lie beyond this one's on both axes

    @property
    def state(self) -> State:
        """The point's own state: its cell's, or the first of its figures (TPOT, output tok/s) that a mark
        moved (a marked TTFT, say, does not move the point)."""
        moved = [st for m in (TPOT, OUTPUT) if not (st := figure_state_of(self.cell, m.key)).ok]
        return moved[0] if moved else state_of(self.cell)

    @property
    def ok(self) -> bool:
        return self.state.ok

    @property
    def on_front(self) -> bool:
        return self.ok and self.dominated_by is None

    @property
    def label(self) -> str:
        return f"{self.owner} {load_label_of(self.cell)}"


@dataclass(frozen=True)
class Frontier:
    """The operating points of one (input, output) pair, each judged; cells with no point and why; the basis
    of the speed per user, one for all its points."""

    pair: tuple[int, int]
    points: list[Point]
    missing: list[tuple[str, CellRow, Missing]]
    basis: Basis = "tpot"

    def front(self) -> list[Point]:
        """The points on the frontier, from the fastest per user to the highest throughput per device."""
        return sorted((p for p in self.points if p.on_front), key=lambda p: (-p.per_user.value, p.per_device.value))

    @property
    def has_power(self) -> bool:
        return any(p.per_kw is not None for p in self.points)

    @property
    def has_price(self) -> bool:
        return any(p.per_usd is not None for p in self.points)


def devices(config: ConfigInfo, c: CellRow | None = None) -> int:
    """Devices serving the config: the facts' or the imported file's stated count, else TP x DP x PP of the
    profile (or its device list), judge/hardware.py; for a server tokenbench did not deploy (no profile), the
    devices cell `c`'s monitor sampled (`seen`), else 1."""
    return seen(config, c) or max(1, hardware.device_count(config.profile, config.facts))


def seen(config: ConfigInfo, c: CellRow | None) -> int | None:
    """The accelerator devices cell `c`'s monitor sampled, where nothing states the server's count (a
    --base-url server: every device on the host counts, docs/monitoring.md); None otherwise."""
    m = c.summary.monitor if c is not None else None
    if config.profile is not None or config.facts.devices or m is None or not m.devices:
        return None
    return len(m.devices)


def _interval(book: Book, c: CellRow, metric: Metric) -> u.Interval | None:
    return book.interval(c, metric) if figure_state_of(c, metric.key).ok else None


def per_user(book: Book, c: CellRow, basis: Basis = "tpot") -> Estimate | None:
    """Output tok/s per user. Basis `tpot`: 1000 / mean TPOT (ms), its interval the mean TPOT's turned over.
    Basis `per_stream` (a frontier some of whose cells give no TPOT): a closed loop's output tok/s /
    concurrency, derived (it includes the wait for the first token)."""
    if basis == "tpot":
        tpot = known(value_of(c, TPOT))
        if not tpot:
            return None
        iv = _interval(book, c, TPOT)
        return Estimate(1000 / tpot) if iv is None or iv.lo <= 0 else Estimate(1000 / tpot, 1000 / iv.hi, 1000 / iv.lo)
    out = throughput(book, c)
    if out is None or load_of(c).dimension != "concurrency" or not c.concurrency:
        return None
    return replace(out.scaled(1 / c.concurrency), derived=True)


def choose_basis(cells: list[tuple[Book, CellRow]]) -> Basis:
    """One basis for every point of a frontier, so no point gains from another definition: 1000 / TPOT
    unless output tok/s / concurrency places more of the cells (an import that gives no TPOT)."""
    counts = {b: sum(per_user(book, c, b) is not None for book, c in cells) for b in BASES}
    return "tpot" if counts["tpot"] >= counts["per_stream"] else "per_stream"


def _throughput(book: Book, c: CellRow, out: float) -> Estimate:
    iv = _interval(book, c, OUTPUT)
    return Estimate(out) if iv is None else Estimate(out, iv.lo, iv.hi)


def _closed_loop(c: CellRow) -> float | None:
    """Output tok/s of a closed loop from its latencies (Little's law): concurrency x output tokens / mean
    E2EL, E2EL being mean TTFT + (output - 1) x mean TPOT when the file gives no E2EL."""
    s = c.summary
    e2el = known(s.mean_e2el_ms)
    if e2el is None and known(s.mean_ttft_ms) is not None and known(s.mean_tpot_ms) is not None:
        e2el = s.mean_ttft_ms + (c.output_len - 1) * s.mean_tpot_ms      # type: ignore[operator]
    if not e2el or load_of(c).dimension != "concurrency" or not c.concurrency:
        return None
    return c.concurrency * c.output_len / (e2el / 1000)


def throughput(book: Book, c: CellRow) -> Estimate | None:
    """The cell's output tok/s with its interval; derived from a closed loop's latencies when not given."""
    out = known(value_of(c, OUTPUT))
    if out:
        return _throughput(book, c, out)
    derived = _closed_loop(c)
    return None if derived is None else Estimate(derived, derived=True)


def _energy(c: CellRow, out: Estimate) -> tuple[Estimate | None, Estimate | None]:
    """(tok/s per kW, tokens per joule): the cell's output tokens over the accelerator energy of its measured
    window (monitor/summary.py), so that 1 / tokens per joule is its energy per output token exactly; a cell
    stored without it (an earlier version, an import) by its mean power: output tok/s / W. The interval is
    output tok/s's, scaled alike."""
    m = c.summary.monitor
    per_joule = known(m.accel_tokens_per_joule) if m else None
    power = known(m.accel_power_mean_w) if m else None
    if per_joule is None and power and power > 0:
        per_joule = out.value / power
    if not per_joule or per_joule <= 0 or not out.value:
        return None, None
    joule = out.scaled(per_joule / out.value)
    return joule.scaled(1000), joule


def point(member: Member, c: CellRow, basis: Basis = "tpot") -> Point | Missing:
    """The cell as an operating point, or why it has none."""
    speed = per_user(member.book, c, basis)
    if speed is None:
        return "no_speed"
    out = throughput(member.book, c)
    if out is None:
        return "no_throughput"
    n = devices(member.config, c)
    per_kw, per_joule = _energy(c, out)
    price = Price.of(member.run.spec)
    per_usd = out.scaled(SECONDS_PER_HOUR / price.hourly(n)) if price else None
    return Point(owner=member.label, cell=c, devices=n, per_user=speed, per_device=out.scaled(1 / n), per_kw=per_kw,
                 per_joule=per_joule, per_usd=per_usd)


def _beats(q: Point, p: Point) -> bool:
    a, b = (q.per_user.value, q.per_device.value), (p.per_user.value, p.per_device.value)
    return a[0] >= b[0] and a[1] >= b[1] and a != b


def _clearly(q: Point, p: Point) -> bool:
    """q's lower bounds at or above p's upper bounds on both axes (both intervals known)."""
    pairs = ((q.per_user, p.per_user), (q.per_device, p.per_device))
    return all(a.has_interval and b.has_interval and a.lo >= b.hi for a, b in pairs)     # type: ignore[operator]


def judge_points(points: list[Point]) -> list[Point]:
    """Each ok point with the ok point that dominates it by the widest margin (None: on the frontier)."""
    ok = [p for p in points if p.ok]
    out = []
    for p in points:
        beaters = [q for q in ok if p.ok and _beats(q, p)]
        if not beaters:
            out.append(p)
            continue
        best = max(beaters, key=lambda q: min(q.per_user.value / max(p.per_user.value, TINY),
                                              q.per_device.value / max(p.per_device.value, TINY)))
        out.append(replace(p, dominated_by=best, clearly=_clearly(best, p)))
    return out


def frontier(members: list[Member], pair: tuple[int, int]) -> Frontier | None:
    """The frontier of one pair over every member's cells (None: no cell of that pair)."""
    cells = [(m, c) for m in members for c in m.cells() if pair_of(c) == pair]
    if not cells:
        return None
    basis = choose_basis([(m.book, c) for m, c in cells])
    points: list[Point] = []
    missing: list[tuple[str, CellRow, Missing]] = []
    for m, c in cells:
        got = point(m, c, basis)
        if isinstance(got, Point):
            points.append(got)
        else:
            missing.append((m.label, c, got if state_of(c).ok else "not_ok"))
    return Frontier(pair, judge_points(points), missing, basis)


def frontiers(members: list[Member]) -> list[Frontier]:
    """One frontier per (input, output) pair."""
    pairs = sorted({pair_of(c) for m in members for c in m.cells()})
    return [fr for pair in pairs if (fr := frontier(members, pair)) is not None]


def run_members(run: RunData, book: Book | None = None) -> list[Member]:
    """A run's server configs as frontier members, sharing one interval book."""
    book = book or Book(run)
    return [Member(name, run, run.config(name), book) for name in run.config_names()]
