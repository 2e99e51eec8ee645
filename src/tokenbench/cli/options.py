"""Parsing helpers shared by commands: comma lists and SLO strings with one-line errors, and the
results-database option every command that reads or writes one declares."""

from __future__ import annotations

import json
import re
from datetime import datetime, timedelta, timezone

import click

from tokenbench.errors import UsageError
from tokenbench.metrics.cell_summary import JOBS, LATENCIES, RATES, Metric
from tokenbench.spec.bench import SLO
from tokenbench.spec.ports import PORTS_HELP, PortRange
from tokenbench.spec.slo import FORM, parse_limit, parse_tiers
from tokenbench.store.db import db_path


class DatabasePath(click.Path):
    """A results database file, checked when the flag is parsed by the store's own rule (`store.db.db_path`:
    `-` is refused, as SQLite opens a database in place and cannot read or write a stream)."""

    def __init__(self) -> None:
        super().__init__(dir_okay=False)

    def convert(self, value, param, ctx):
        db_path(str(value))
        return super().convert(value, param, ctx)


class Ports(click.ParamType):
    """A port or a range of them (spec/ports.PortRange), refused in one line naming the flag."""

    name = "PORT|LO-HI"

    def convert(self, value, param, ctx):
        if isinstance(value, PortRange):
            return value
        try:
            return PortRange.parse(str(value))
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


PORTS = click.option("--ports", default=None, type=Ports(), help=PORTS_HELP)

DB = click.option("--db", default=None, type=DatabasePath(), help="results database (default: "
                  "$TOKENBENCH_RESULTS/tokenbench.db, else ~/.local/share/tokenbench/tokenbench.db)")


def int_list(flag: str, text: str | None) -> list[int]:
    if text is None:
        return []
    out = []
    for part in text.split(","):
        part = part.strip()
        if not part.isdigit() or int(part) <= 0:
            raise UsageError(f"{flag} '{text}': '{part}' is not a positive integer",
                             f"write a comma-separated list, e.g. {flag} 1,8,32")
        out.append(int(part))
    return out


def float_list(flag: str, text: str | None) -> list[float]:
    if text is None:
        return []
    out = []
    for part in text.split(","):
        try:
            value = float(part)
        except ValueError:
            value = -1.0
        if not value > 0:
            raise UsageError(f"{flag} '{text}': '{part.strip()}' is not a positive number",
                             f"write a comma-separated list, e.g. {flag} 0.5,1,2")
        out.append(value)
    return out


def pairs(flag: str, text: str) -> list[tuple[int, int]]:
    out = []
    for part in text.split(","):
        a, sep, b = part.strip().partition(":")
        if not sep or not a.isdigit() or not b.isdigit() or int(a) <= 0 or int(b) <= 0:
            raise UsageError(f"{flag} '{text}': '{part.strip()}' is not INPUT:OUTPUT",
                             f"write e.g. {flag} 512:512,16384:2048")
        out.append((int(a), int(b)))
    return out


def slo(text: str | None) -> SLO:
    """`--slo`: per-request thresholds NAME=MS (goodput) and limits on a statistic METRIC:STAT<=MS (what a
    capacity search answers against), comma-separated, in any mix."""
    if not text:
        return SLO()
    values: dict[str, float] = {}
    limits: list[dict] = []
    for part in text.split(","):
        if ":" in part:
            limits.append(_limit(text, part))
            continue
        name, sep, ms = part.partition("=")
        name = name.strip().lower()
        if not sep or name not in ("ttft", "tpot", "e2el"):
            raise UsageError(f"--slo '{text}': '{part}' is neither NAME=MS (NAME in ttft, tpot, e2el) nor a limit "
                             f"{FORM}", "write e.g. --slo ttft=500,tpot=50 or --slo ttft:p99<=2000,tpot:p99<=200")
        try:
            values[f"{name}_ms"] = float(ms)
        except ValueError:
            raise UsageError(f"--slo '{text}': '{ms}' is not a number of milliseconds", "write e.g. ttft=500") from None
    try:
        return SLO(**values, limits=limits)
    except ValueError as exc:
        raise UsageError(f"--slo '{text}': {_first_error(exc)}", f"write limits as {FORM}") from None


def _limit(text: str, part: str) -> dict:
    try:
        return parse_limit(part.strip())
    except ValueError as exc:
        raise UsageError(f"--slo '{text}': {exc}", "write e.g. --slo ttft:p99<=2000,tpot:p99<=200") from None


def _first_error(exc: ValueError) -> str:
    errors = getattr(exc, "errors", None)
    return str(errors()[0]["msg"]).removeprefix("Value error, ") if callable(errors) else str(exc)


def slo_tiers(flag: str, text: str | None) -> list[dict]:
    """`--slo-tier mlperf-llama2-70b-server;chat=ttft:p99<=500,tpot:p99<=50` -> tiers (presets by name)."""
    if not text:
        return []
    try:
        return [tier.model_dump(mode="json") for tier in parse_tiers(text)]
    except ValueError as exc:
        raise UsageError(f"{flag} '{text}': {_first_error(exc)}",
                         "write a preset name (mlperf-llama2-70b-server, ...) or NAME=LIMIT,LIMIT; several "
                         "separated by ';'") from None


def rate_list(flag: str, text: str | None) -> list[float]:
    """Like float_list, and `inf` (vLLM: every request at once, bounded by --max-concurrency)."""
    if text is None:
        return []
    parts = [p.strip() for p in text.split(",")]
    finite = ",".join(p for p in parts if p.lower() != "inf")
    values = float_list(flag, finite) if finite else []
    return values + [float("inf")] * (len(parts) - len(values))


def slo_dict(flag: str, text: str | None) -> dict:
    out = slo(text).model_dump(mode="json", exclude_none=True)
    if not out.get("limits"):
        out.pop("limits", None)
    return out


def goodput(values: tuple[str, ...]) -> dict:
    """vLLM's `--goodput ttft:500 tpot:50` (KEY:MS, KEY in ttft, tpot, e2el) as SLO keys."""
    out: dict[str, float] = {}
    for item in values:
        name, sep, ms = item.partition(":")
        name = name.strip().lower()
        try:
            value = float(ms) if sep and name in ("ttft", "tpot", "e2el") else None
        except ValueError:
            value = None
        if value is None or value <= 0:
            raise UsageError(f"--goodput '{item}' is not KEY:MS with KEY in ttft, tpot, e2el and MS > 0",
                             "write e.g. --goodput ttft:500 tpot:50")
        if out.get(f"{name}_ms", value) != value:
            raise UsageError(f"--goodput gives {name} twice ({out[f'{name}_ms']:g} and {value:g})", "give it once")
        out[f"{name}_ms"] = value
    return out


def vary_axis(flag: str, text: str) -> tuple[str, list]:
    """`KEY=V1,V2,...` -> (KEY, [V1, V2, ...]), each value read as YAML (4 -> 4, true -> True)."""
    key, eq, values = text.partition("=")
    parts = [v.strip() for v in values.split(",")]
    if not eq or not key.strip() or not all(parts):
        raise UsageError(f"{flag} '{text}' is not KEY=V1,V2,...", f"write e.g. {flag} parallelism.slots=1,2,4 "
                         "(any profile key; args.NAME for an engine flag)")
    # only --vary reads YAML here: its import was 17 ms of `tokenbench runs` (docs/architecture.md)
    import yaml
    try:
        return key.strip(), [yaml.safe_load(v) for v in parts]
    except yaml.YAMLError:
        raise UsageError(f"{flag} '{text}': a value is not valid YAML", "quote it, e.g. 'a b'") from None


def json_object(flag: str, text: str) -> dict:
    """A JSON object given on the command line, e.g. --extra-body '{"top_p": 1}'."""
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise UsageError(f"{flag} '{text}' is not JSON ({exc})",
                         f"write a JSON object in single quotes, e.g. {flag} '{{\"top_p\": 1}}'") from None
    if not isinstance(value, dict):
        raise UsageError(f"{flag} '{text}' is not a JSON object", f"write e.g. {flag} '{{\"top_p\": 1}}'")
    return value


SPAN_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
SPAN = re.compile(r"(\d+(?:\.\d+)?)([smhdw])")


def moment(flag: str, text: str, end_of_day: bool = False) -> datetime:
    """A point in time (UTC) from `--since`/`--until`: a date (its start, or its end with `end_of_day`), a date
    and time (UTC unless it names its offset) or a span back from now (30m, 12h, 7d, 2w)."""
    try:
        return _moment(text.strip(), end_of_day)
    except (ValueError, OverflowError):
        raise UsageError(f"{flag} '{text}': not a date, a time or a span back from now (within the calendar)",
                         f"write e.g. {flag} 2025-06-01, {flag} 2025-06-01T14:30 (UTC unless it names its offset) "
                         f"or {flag} 7d (also 12h, 30m, 2w)") from None


def _moment(text: str, end_of_day: bool) -> datetime:
    span = SPAN.fullmatch(text)
    if span:
        return datetime.now(timezone.utc) - timedelta(seconds=float(span[1]) * SPAN_UNITS[span[2]])
    when = datetime.fromisoformat(text)
    if end_of_day and re.fullmatch(r"\d{4}-?\d{2}-?\d{2}", text):       # a date alone: up to its end
        when += timedelta(days=1, seconds=-1)
    return when.replace(tzinfo=when.tzinfo or timezone.utc).astimezone(timezone.utc)


def figures(flag: str, text: str | None, default: tuple[Metric, ...]) -> tuple[Metric, ...]:
    """ttft:p50,tpot:mean,output_throughput: figures a decision is made on (a latency's statistic: mean, p50,
    p90, p99); `default` when not given."""
    if not text:
        return default
    out = []
    for part in (p.strip() for p in text.split(",") if p.strip()):
        name, _, stat = part.partition(":")
        if (name in RATES and not stat or name in LATENCIES and stat in ("mean", "p50", "p90", "p99")
                or name in JOBS and stat in ("mean", "p50", "p90", "p95", "p99")):
            out.append(Metric(name, stat or "mean"))  # type: ignore[arg-type]
            continue
        raise UsageError(f"{flag}: '{part}' is not a figure", "write NAME:STAT for a latency (ttft, tpot, itl, "
                         "e2el with mean, p50, p90, p99), an agents run's job figure (job, job_ttft, job_tpot with "
                         "mean, p50, p90, p95, p99) or a throughput (output_throughput, request_throughput, "
                         f"request_goodput), e.g. {flag} ttft:p50,tpot:mean,output_throughput")
    return tuple(out)
