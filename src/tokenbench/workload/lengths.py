"""Each request's own lengths, drawn from the workload's length distribution (docs/workloads.md
"Length distributions"). Pure and seeded: the same seed, cell and phase give the same lengths. A drawn
length is still exact: the request asks exactly it, and its record is verified against it.

- range_ratio r, vLLM's meaning: uniform integers in [floor(L(1-r)), ceil(L(1+r))] (at least 1);
- range_ratio r, SGLang's meaning (range_ratio_style sglang): uniform integers in [max(floor(L r), 1), L];
- input_len_stddev / output_len_stddev (AIPerf): a normal draw around L, rounded, at least 1;
- length_histogram: a weighted bucket per request, then its lengths (normal draws when a bucket has a
  standard deviation). A file (CSV rows input_len,output_len,weight[,input_stddev,output_stddev]) or
  AIPerf's --sequence-distribution text `ISL[|SD],OSL[|SD]:WEIGHT;...`.

Input and output are drawn independently. For a prefix workload the drawn input is the unique suffix:
the prefix stays, as vLLM's --random-prefix-len does.
"""

from __future__ import annotations

import csv
import itertools
import math
import random
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tokenbench.errors import UsageError
from tokenbench.spec.bench import Workload


@dataclass(frozen=True)
class Bucket:
    input_len: int
    output_len: int
    weight: float
    input_stddev: float = 0.0
    output_stddev: float = 0.0


def _length(text: str, where: str) -> tuple[int, float]:
    """`512` or `512|20` -> (512, 20.0)."""
    mean, _, sd = text.strip().partition("|")
    try:
        value, spread = int(mean), float(sd) if sd else 0.0
    except ValueError:
        value, spread = 0, -1.0
    if value <= 0 or spread < 0:
        raise UsageError(f"length histogram {where}: '{text.strip()}' is not LENGTH or LENGTH|STDDEV",
                         "write buckets as ISL[|SD],OSL[|SD]:WEIGHT;... e.g. 128,64:25;512,128:75")
    return value, spread


def parse_buckets(text: str) -> list[Bucket]:
    """AIPerf's --sequence-distribution notation: `ISL[|SD],OSL[|SD]:WEIGHT` separated by `;`."""
    out = []
    for part in (p for p in text.split(";") if p.strip()):
        pair, sep, weight = part.rpartition(":")
        isl, comma, osl = pair.partition(",")
        if not sep or not comma:
            raise UsageError(f"length histogram: '{part.strip()}' is not ISL,OSL:WEIGHT",
                             "write buckets as ISL[|SD],OSL[|SD]:WEIGHT;... e.g. 128,64:25;512,128:75")
        (i, isd), (o, osd) = _length(isl, part.strip()), _length(osl, part.strip())
        out.append(Bucket(i, o, _weight(weight, part.strip()), isd, osd))
    return _checked(out, text)


def _weight(text: str, where: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value >= 0:
        raise UsageError(f"length histogram {where}: weight '{text.strip()}' is not a number >= 0",
                         "give each bucket a weight, e.g. 128,64:25")
    return value


def _checked(buckets: list[Bucket], source: str) -> list[Bucket]:
    if not buckets or sum(b.weight for b in buckets) <= 0:
        raise UsageError(f"length histogram {source}: no bucket with a weight above 0",
                         "give at least one bucket, e.g. 128,64:1")
    return buckets


def read_buckets(path: Path) -> list[Bucket]:
    """A CSV file: input_len,output_len,weight[,input_stddev,output_stddev] per row (a header row and `#`
    comments are skipped)."""
    out = []
    with path.open(newline="") as f:
        for n, row in enumerate(csv.reader(f), 1):
            cells = [c.strip() for c in row]
            if not cells or not cells[0] or cells[0].startswith("#") or not cells[0][0].isdigit():
                continue
            if len(cells) not in (3, 5):
                raise UsageError(f"{path}:{n}: expected input_len,output_len,weight[,input_stddev,output_stddev]",
                                 "one bucket per line, e.g. 512,128,0.7")
            i, o = _length(cells[0], f"{path}:{n}")[0], _length(cells[1], f"{path}:{n}")[0]
            sd = [_weight(c, f"{path}:{n}") for c in cells[3:]] or [0.0, 0.0]
            out.append(Bucket(i, o, _weight(cells[2], f"{path}:{n}"), *sd))
    return _checked(out, str(path))


def buckets_of(source: str) -> list[Bucket]:
    """A histogram file when `source` names one, else AIPerf's notation."""
    path = Path(source)
    if path.is_file():
        return read_buckets(path)
    if ":" not in source and "," not in source:
        raise UsageError(f"length histogram {source}: no such file", "give a CSV file or ISL,OSL:WEIGHT;... text")
    return parse_buckets(source)


def vllm_window(length: int, ratio: float) -> tuple[int, int]:
    return max(math.floor(length * (1 - ratio)), 1), max(math.ceil(length * (1 + ratio)), 1)


def sglang_window(length: int, ratio: float) -> tuple[int, int]:
    return max(int(length * ratio), 1), length


def _normal(rng: random.Random, mean: float, sd: float) -> int:
    return max(1, round(rng.gauss(mean, sd))) if sd > 0 else max(1, round(mean))


@dataclass(frozen=True)
class Draws:
    """A workload's length distribution: `draw(rng)` gives one request's (input, output)."""

    wl: Workload
    buckets: tuple[Bucket, ...] = ()

    @classmethod
    def of(cls, wl: Workload) -> Draws:
        return cls(wl, tuple(buckets_of(wl.length_histogram)) if wl.length_histogram is not None else ())

    @property
    def fixed(self) -> int:
        """Tokens of every prompt that are not drawn (a prefix workload's shared prefix)."""
        return (self.wl.prefix_len or 0) if self.wl.kind == "prefix" else 0

    def draw(self, rng: random.Random) -> tuple[int, int]:
        if self.buckets:
            b = rng.choices(self.buckets, weights=[x.weight for x in self.buckets])[0]
            return _normal(rng, b.input_len, b.input_stddev), _normal(rng, b.output_len, b.output_stddev)
        wl = self.wl
        drawn = self._one(rng, "input", (wl.input_len or 0) - self.fixed, wl.input_len_stddev)
        return self.fixed + drawn, self._one(rng, "output", wl.output_len or 0, wl.output_len_stddev)

    def _one(self, rng: random.Random, side: str, length: int, sd: float | None) -> int:
        """One side's length: the range-ratio window, a normal draw, or uniform between the bounds, clipped
        to the bounds (min_{side}_len, max_{side}_len) when they are given."""
        wl = self.wl
        lo, hi = self.bounds(side)
        if wl.range_ratio is not None:
            window = sglang_window if wl.range_ratio_style == "sglang" else vllm_window
            value = rng.randint(*window(length, wl.range_ratio))
        elif sd is not None:
            value = _normal(rng, length, sd)
        elif hi is not None:                 # bounds alone: uniform between them (GuideLLM's min/max)
            return rng.randint(lo, hi)
        else:
            value = length
        return min(max(value, lo), hi if hi is not None else value)

    def bounds(self, side: str) -> tuple[int, int | None]:
        return getattr(self.wl, f"min_{side}_len") or 1, getattr(self.wl, f"max_{side}_len")

    def stream(self, rng: random.Random, count: int | None) -> Iterator[tuple[int, int]]:
        """`count` draws (without end for None)."""
        return (self.draw(rng) for _ in (range(count) if count is not None else itertools.count()))

    def describe(self) -> str:
        """The distribution in words, for the cell summary and reports."""
        wl = self.wl
        if self.buckets:
            total = sum(b.weight for b in self.buckets)
            return "histogram: " + "; ".join(f"{_sd(b.input_len, b.input_stddev)}:{_sd(b.output_len, b.output_stddev)}"
                                            f" {b.weight / total:.0%}" for b in self.buckets)
        body = (wl.input_len or 0) - self.fixed
        head = f"{self.fixed} shared + " if self.fixed else ""
        if wl.range_ratio is not None:
            style, window = ((f"SGLang range ratio {wl.range_ratio:g}", sglang_window) if wl.range_ratio_style == "sglang"
                             else (f"vLLM range ratio {wl.range_ratio:g}", vllm_window))
            (a, b), (c, d) = window(body, wl.range_ratio), window(wl.output_len or 0, wl.range_ratio)
            return (f"{style}: input {head}uniform {a}..{b}{self._clip('input')}, output uniform "
                    f"{c}..{d}{self._clip('output')}")
        return (f"input {head}{self._side('input', body, wl.input_len_stddev)}, output "
                f"{self._side('output', wl.output_len or 0, wl.output_len_stddev)}")

    def _side(self, side: str, length: int, sd: float | None) -> str:
        lo, hi = self.bounds(side)
        if sd is not None:
            return f"normal {_sd(length, sd)} (rounded){self._clip(side)}"
        return f"uniform {lo}..{hi}" if hi is not None else f"exactly {length}"

    def _clip(self, side: str) -> str:
        lo, hi = self.bounds(side)
        if lo == 1 and hi is None:
            return ""
        return f" clipped to {lo}..{hi if hi is not None else ''}"


def _sd(mean: int, sd: float) -> str:
    return f"{mean}±{sd:g}" if sd else str(mean)


def length_stats(draws: Iterator[tuple[int, int]]) -> dict:
    """Mean, min and max of drawn (input, output) lengths, in one pass (nothing kept)."""
    n = si = so = 0
    lo_i = lo_o = math.inf
    hi_i = hi_o = 0
    for i, o in draws:
        n, si, so = n + 1, si + i, so + o
        lo_i, hi_i, lo_o, hi_o = min(lo_i, i), max(hi_i, i), min(lo_o, o), max(hi_o, o)
    if not n:
        return {}
    return {"input_len_mean": si / n, "input_len_min": int(lo_i), "input_len_max": hi_i,
            "output_len_mean": so / n, "output_len_min": int(lo_o), "output_len_max": hi_o}
