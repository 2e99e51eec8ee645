"""`tokenbench agree --explain`: which difference in the request moves which figure. From the rounds of
the peer, tokenbench's default request and the variants (each one change toward the peer's request, and
all of them together), per concurrency and figure (docs/metrics.md, "Agreement, explained"):

- difference  = mean over rounds of (default_r - peer_r) / peer, peer = the peer's mean over rounds;
- closes(v)   = mean over rounds of (default_r - v_r) / peer: how far variant v moves tokenbench toward the
                peer; share(v) = closes(v) / difference (where |difference| >= the tolerance);
- remainder   = mean over rounds of (closest_r - peer_r) / peer, closest = all peer-like changes together
                (the one variant when there is one, the default when there is none);
- spread      = the larger round-to-round spread ((max - min) / mean) of the peer and of that arm;
- clocks      = the remainder the two clients' own clocks give by themselves, measured through the
                recording proxy at this concurrency (clock_effect): not a request difference, a measuring one.

Each mean over rounds has its 95 % t interval (k - 1 degrees of freedom, metrics/uncertainty.py); the
remainder is accounted for when |remainder| <= max(tolerance, spread); one accounted for only by a spread
above NOISY x the tolerance is marked too noisy to attribute (rerun on a quiet machine)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from tokenbench.agreement.capture import Clock
from tokenbench.agreement.variants import DEFAULT, Variant
from tokenbench.metrics.uncertainty import Interval, mean_interval

PEER = "peer"
NOISY = 5      # a spread above NOISY x the tolerance: the rounds cannot attribute a difference of that size
# (label, summary key): tokenbench's summary and the peers' results (SGLang's renamed) use the same names
FIGURES = (("mean TTFT ms", "mean_ttft_ms"), ("mean TPOT ms", "mean_tpot_ms"), ("mean ITL ms", "mean_itl_ms"),
           ("output tok/s", "output_throughput"), ("mean E2EL ms", "mean_e2el_ms"))
Rounds = Mapping[str, Sequence[Mapping]]      # arm name (PEER, a variant's name) -> its summaries, round by round


def figure(summary: Mapping, key: str) -> float | None:
    """One figure of a run's summary (the one place summaries are read here)."""
    value = summary.get(key)
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def values(rounds: Rounds, arm: str, key: str) -> list[float | None]:
    return [figure(s, key) for s in rounds.get(arm, ())]


def mean(xs: Sequence[float | None]) -> float | None:
    """None when any round lacks the figure: a missing value is never averaged away."""
    return None if not xs or any(x is None for x in xs) else sum(xs) / len(xs)  # type: ignore[arg-type]


def spread(xs: Sequence[float | None]) -> float | None:
    """Round-to-round spread: (max - min) / mean; None with fewer than 2 rounds."""
    m = mean(xs)
    if len(xs) < 2 or not m:
        return None
    return (max(xs) - min(xs)) / m  # type: ignore[type-var,operator]


def paired(a: Sequence[float | None], b: Sequence[float | None], scale: float | None) -> Interval | None:
    """Mean over rounds of (a_r - b_r) / scale with its 95 % interval (rounds where both ran)."""
    diffs = [(x - y) / scale for x, y in zip(a, b, strict=False) if x is not None and y is not None] if scale else []
    return mean_interval(diffs) if diffs else None


@dataclass(frozen=True)
class Setting:
    """What an explanation needs besides the rounds."""

    concurrency: int
    tolerance: float
    output_len: int = 0
    clock: Clock | None = None       # the clients' own clocks at this concurrency, from a capture


def clock_effect(clock: Clock | None, key: str, output_len: int, peer: float | None) -> float | None:
    """The remainder the two clients' own clocks alone would give, (tokenbench's - the peer's) / peer: on
    TTFT and E2EL their overheads; on TPOT and ITL the overheads' growth from first to last token spread
    over the output_len - 1 gaps. None where a clock or the peer's figure is missing (and for throughput)."""
    c = clock
    if c is None or not peer or None in (c.ours_ttft, c.theirs_ttft, c.ours_e2el, c.theirs_e2el):
        return None
    ttft = c.ours_ttft - c.theirs_ttft          # type: ignore[operator]
    e2el = c.ours_e2el - c.theirs_e2el          # type: ignore[operator]
    per_token = (e2el - ttft) / (output_len - 1) if output_len > 1 else None
    ms = {"mean_ttft_ms": ttft, "mean_e2el_ms": e2el, "mean_tpot_ms": per_token, "mean_itl_ms": per_token}.get(key)
    return None if ms is None else ms / peer


@dataclass(frozen=True)
class Closed:
    """What one variant closes of the difference."""

    variant: Variant
    value: float | None            # the variant's mean over rounds
    closes: Interval | None        # (default - variant) / peer
    share: float | None            # closes / difference


@dataclass(frozen=True, kw_only=True)
class Explained:
    """One figure at one concurrency, explained."""

    concurrency: int
    figure: str
    peer: float | None
    default: float | None
    difference: Interval | None
    closed: tuple[Closed, ...]
    remainder: Interval | None
    spread: float | None
    tolerance: float
    clock: float | None = None       # the remainder the clients' own clocks would give (clock_effect)

    @property
    def accounted(self) -> bool:
        """The remainder is within the tolerance or within the run-to-run spread."""
        if self.remainder is None:
            return False
        return abs(self.remainder.value) <= max(self.tolerance, self.spread or 0.0)

    @property
    def verdict(self) -> str:
        """accounted or not; a remainder accounted for only by a spread of more than NOISY x the tolerance is
        said to be too noisy to attribute (the machine, not the explanation, decided it)."""
        if self.remainder is None:
            return "no figure"
        if abs(self.remainder.value) <= self.tolerance:
            return f"accounted (within {self.tolerance:.0%})"
        if not self.accounted:
            return "NOT accounted"
        if (self.spread or 0.0) > NOISY * self.tolerance:
            return f"within a spread of {self.spread:.0%}: too noisy to attribute"
        return "accounted (within spread)"


def closest(variants: Sequence[Variant]) -> str:
    """The arm that sends the peer's workload: the last variant (all changes together), else the default."""
    return variants[-1].name if variants else DEFAULT.name


def _share(closes: Interval | None, difference: Interval | None, tolerance: float) -> float | None:
    """closes / difference, for a difference of at least the tolerance (a share of a difference that small
    would be a ratio of noise)."""
    if closes is None or difference is None or abs(difference.value) < tolerance or not difference.value:
        return None
    return closes.value / difference.value


def explain_figure(rounds: Rounds, variants: Sequence[Variant], label_key: tuple[str, str],
                   setting: Setting) -> Explained:
    label, key = label_key
    peer, default = values(rounds, PEER, key), values(rounds, DEFAULT.name, key)
    scale = mean(peer)
    difference = paired(default, peer, scale)
    closed = []
    for v in variants:
        arm = values(rounds, v.name, key)
        closes = paired(default, arm, scale)
        closed.append(Closed(v, mean(arm), closes, _share(closes, difference, setting.tolerance)))
    last = values(rounds, closest(variants), key)
    worst = [s for s in (spread(peer), spread(last)) if s is not None]
    return Explained(concurrency=setting.concurrency, figure=label, peer=scale, default=mean(default),
                     difference=difference, closed=tuple(closed), remainder=paired(last, peer, scale),
                     spread=max(worst) if worst else None, tolerance=setting.tolerance,
                     clock=clock_effect(setting.clock, key, setting.output_len, scale))


def explain(rounds: Rounds, variants: Sequence[Variant], setting: Setting) -> list[Explained]:
    """Every figure at one concurrency. `variants`: the single changes, then (if several) their combination."""
    return [explain_figure(rounds, variants, f, setting) for f in FIGURES]


# ---- text (agreement.md here; the CLI's terminal tables use the same cells) ----

def pct_interval(iv: Interval | None) -> str:
    if iv is None:
        return "-"
    if iv.df < 1:
        return f"{iv.value:+.1%}"
    return f"{iv.value:+.1%} [{iv.lo:+.1%}, {iv.hi:+.1%}]"


def number(x: float | None) -> str:
    return "-" if x is None else f"{x:,.2f}" if abs(x) < 1000 else f"{x:,.0f}"


def closed_text(c: Closed) -> str:
    share = "" if c.share is None else f" ({c.share:.0%} of it)"
    return f"{pct_interval(c.closes)}{share}"


def table_rows(explained: Sequence[Explained], peer_label: str) -> list[list[str]]:
    """One concurrency's table: a row per arm and statistic, a column per figure."""
    first = explained[0]
    rows = [[peer_label, *(number(e.peer) for e in explained)],
            [DEFAULT.label, *(number(e.default) for e in explained)],
            ["difference (default - peer) / peer", *(pct_interval(e.difference) for e in explained)]]
    for i, c in enumerate(first.closed):
        rows.append([f"closed by: {c.variant.label}", *(closed_text(e.closed[i]) for e in explained)])
    rows.append(["remainder (peer-like - peer) / peer", *(pct_interval(e.remainder) for e in explained)])
    rows.append(["of it, the clients' clocks (capture)", *("-" if e.clock is None else f"{e.clock:+.1%}"
                                                           for e in explained)])
    rows.append(["run-to-run spread", *("-" if e.spread is None else f"{e.spread:.1%}" for e in explained)])
    rows.append(["", *(e.verdict for e in explained)])
    return rows


def markdown(explained: Sequence[Explained], peer_label: str, rounds: int) -> str:
    """Every concurrency's table, with the formulas in one line above them."""
    out = [f"closes = mean over {rounds} rounds of (default - variant) / peer mean, with its 95 % interval; "
           "share = closes / difference (for a difference of at least the tolerance); accounted: "
           "|remainder| <= max(tolerance, spread)\n"]
    for conc in dict.fromkeys(e.concurrency for e in explained):
        part = [e for e in explained if e.concurrency == conc]
        out += [f"\n#### concurrency {conc}\n", "| | " + " | ".join(e.figure for e in part) + " |",
                "|---|" + "---:|" * len(part)]
        out += ["| " + " | ".join(r) + " |" for r in table_rows(part, peer_label)]
    return "\n".join(out) + "\n"
