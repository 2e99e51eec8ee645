"""Offline parser of a server's Prometheus `/metrics` text -> common signals + raw metrics -> samples.

The text is read with `prometheus_client`'s own parser. Which engine metric means `running`,
`waiting`, `kv_usage` (0..1), `preemptions` ... is data the caller passes (`names`): each engine
adapter's `METRIC_NAMES` (deploy/engines/), gathered by `deploy.engines.metric_names()`; this package
knows no engine. Histogram buckets and `_created` timestamps are dropped; every other sample of the
engine is kept raw.

`names` maps an engine to {"prefix": ..., "signals": {signal: rule}}. A rule's `metrics` lists the
engine's sample names that carry the signal, newest name first; the first one present in a scrape
wins. `reduce` combines several series of that metric (one per engine core, DP rank ...): `sum` for
counts, `max` for ratios. `info` + `products` reads a number from the labels of an info-style gauge
(vLLM's cache_config_info: num_gpu_blocks x block_size); the first label set present wins. Every
sample whose name starts with `prefix` is also kept under its raw name.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tokenbench.errors import UsageError
from tokenbench.monitor._text import clip, number
from tokenbench.monitor.samples import Sample

RawSample = tuple[str, dict[str, str], float]
MetricNames = Mapping[str, Mapping[str, Any]]      # engine -> {"prefix": ..., "signals": {...}}
_DROPPED_SUFFIXES = ("_bucket", "_created", "_gsum", "_gcount")


@dataclass(frozen=True, slots=True)
class ServerMetrics:
    engine: str | None
    signals: dict[str, float]
    raw: tuple[RawSample, ...]


def parse_prometheus(text: str, names: MetricNames, engine: str | None = None) -> ServerMetrics:
    """Parse /metrics text with the engines' metric `names`. `engine=None` detects it from the metric
    prefixes (may stay unknown)."""
    if engine is not None and engine not in names:
        raise UsageError(f"unknown engine {engine!r}", f"use one of: {', '.join(names)}")
    samples = _all_samples(text)
    engine = engine or _detect(samples, names)
    spec = names.get(engine or "", {})
    signals = {name: value for name, rule in spec.get("signals", {}).items()
               if (value := _signal(samples, rule)) is not None}
    prefix = spec.get("prefix", "")
    raw = tuple(s for s in samples if s[0].startswith(prefix) and not s[0].endswith(_DROPPED_SUFFIXES))
    return ServerMetrics(engine, signals, raw)


def detect_engine(text: str, names: MetricNames) -> str | None:
    return _detect(_all_samples(text), names)


def server_samples(metrics: ServerMetrics, t_ns: int) -> list[Sample]:
    engine = metrics.engine or ""
    samples = [Sample(t_ns, "server", name, value, {"engine": engine})
               for name, value in metrics.signals.items()]
    samples += [Sample(t_ns, "server", name, value, dict(labels)) for name, labels, value in metrics.raw]
    return samples


def load_parser() -> None:
    """Import prometheus_client's parser now: where a monitor runs, before its thread does (the import,
    270M instructions and 60 ms, would otherwise hold the GIL in the middle of a cell); a server that
    serves no /metrics never needs it (docs/architecture.md, "Start-up")."""
    import prometheus_client.parser  # noqa: F401


def _all_samples(text: str) -> list[RawSample]:
    from prometheus_client.parser import text_string_to_metric_families
    try:
        families = list(text_string_to_metric_families(text))
    except (ValueError, TypeError, IndexError, KeyError) as exc:
        raise UsageError(
            f"not Prometheus text exposition: {exc} (text starts with {clip(text)!r})",
            "pass the body of the server's /metrics endpoint",
        ) from exc
    return [(s.name, dict(s.labels), float(s.value))
            for family in families for s in family.samples
            if isinstance(s.value, (int, float)) and math.isfinite(s.value)]


def _detect(samples: list[RawSample], names: MetricNames) -> str | None:
    for engine, spec in names.items():
        if any(name.startswith(spec["prefix"]) for name, _, _ in samples):
            return engine
    return None


def _signal(samples: list[RawSample], rule: dict[str, Any]) -> float | None:
    if "info" in rule:
        for keys in rule.get("products", [rule.get("product")]):     # first label set present wins
            found = [_label_product(labels, keys) for name, labels, _ in samples if name == rule["info"]]
            value = _reduce([v for v in found if v is not None], rule)
            if value is not None:
                return value
        return None
    for metric in rule["metrics"]:
        values = [value for name, _, value in samples if name == metric]
        if values:
            return _reduce(values, rule)
    return None


def _reduce(values: list[float], rule: dict[str, Any]) -> float | None:
    if not values:
        return None
    return float(max(values) if rule.get("reduce") == "max" else sum(values))


def _label_product(labels: dict[str, str], keys: list[str]) -> float | None:
    product = 1.0
    for key in keys:
        factor = number(labels.get(key, ""))
        if factor is None:
            return None
        product *= factor
    return product
