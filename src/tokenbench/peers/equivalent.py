"""A peer's command line in tokenbench's terms: the options of `tokenbench bench` that measure the same
cells, and every difference in meaning, one line each. GuideLLM's sweep needs its throughput measured
before its rates are known: it is two benches, the second's rates computed from the first (`Sweep`)."""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field

from tokenbench.errors import UsageError

GUIDELLM_MAX_CONCURRENCY = 512      # GUIDELLM__MAX_CONCURRENCY: its throughput profile and every rate's cap


def no_meaning(tool: str, what: str, hint: str) -> UsageError:
    """The one-line refusal of a line (or an option of it) that has no tokenbench meaning (exit 2)."""
    return UsageError(f"{tool}: {what}", hint)


@dataclass(frozen=True)
class Sweep:
    """GuideLLM's sweep: a synchronous cell (1 in flight) and a throughput cell (every request in flight, up
    to GUIDELLM_MAX_CONCURRENCY) first, then `count` rate cells evenly spaced from the synchronous cell's
    request rate up to the throughput cell's (GuideLLM: numpy.linspace(sync, max, count + 1)[1:])."""

    count: int
    arrival: str = "constant"

    def rates(self, sync: float, peak: float) -> list[float]:
        if not (sync > 0 and peak > 0):
            raise UsageError(f"the sweep's first cells measured {sync:g} and {peak:g} requests/s: no rates to "
                             "interpolate", "check the first bench's results (tokenbench report RUN)")
        return [round(sync + (peak - sync) * k / self.count, 4) for k in range(1, self.count + 1)]


@dataclass
class Equivalent:
    """`checked_on`: the version of the peer whose own code each difference was checked against (printed
    with every difference: a peer's defaults change between versions, e.g. vLLM's ignore_eos)."""

    tool: str
    checked_on: str
    options: dict[str, str | None] = field(default_factory=dict)    # bench option -> value (None: a flag)
    differences: list[str] = field(default_factory=list)
    sweep: Sweep | None = None

    def set(self, flag: str, value: object = None) -> None:
        self.options[flag] = None if value is None else _text(value)

    def differ(self, text: str) -> None:
        if text not in self.differences:
            self.differences.append(text)

    def argv(self) -> list[str]:
        """`bench` and its options (a sweep: its first step, the synchronous and throughput cells)."""
        out = ["bench"]
        for flag, value in self.options.items():
            out += [flag] if value is None else [flag, value]
        if self.sweep is not None:
            out += ["--concurrency", f"1,{GUIDELLM_MAX_CONCURRENCY}"]
        return out

    def second(self, sync: float, peak: float) -> list[str]:
        """A sweep's second step: its rate cells, from the first step's measured request rates."""
        assert self.sweep is not None
        rates = ",".join(_text(r) for r in self.sweep.rates(sync, peak))
        return [*self.argv()[:-2], "--request-rate", rates, "--arrival", self.sweep.arrival,
                "--max-concurrency", str(GUIDELLM_MAX_CONCURRENCY)]

    def commands(self) -> list[str]:
        """The tokenbench command lines, as they are pasted (a sweep's second one with its rates unknown)."""
        first = "tokenbench " + shlex.join(self.argv())
        if self.sweep is None:
            return [first]
        second = shlex.join([*self.argv()[1:-2], "--arrival", self.sweep.arrival, "--max-concurrency",
                             str(GUIDELLM_MAX_CONCURRENCY)])
        return [first, f"tokenbench bench {second} --request-rate R1,...,R{self.sweep.count}"]


def _text(value: object) -> str:
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            return str(value)
        return str(int(value)) if value == int(value) else repr(value)
    return str(value)
