"""This machine's client ceiling: the streams and chunks per second one client process (one core) sustains
with its own error within tolerance, as `tokenbench calibrate --ceiling` measured it against the reference
server's send log (docs/metrics.md, "Client ceiling").

One small JSON file holds a record per machine, keyed by what makes a machine's client cost its own
(hostname, CPU model, core count), in the machine state folder ($TOKENBENCH_STATE/machine, default
$XDG_STATE_HOME/tokenbench/machine). The environment of every later run on that machine carries the record
(host/environment.py), so its report states it; the preflight warns where a cell asks one client process
for more (study/preflight.py)."""

from __future__ import annotations

import json
import math
import os
import platform
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from tokenbench import userdirs
from tokenbench.host.environment import cpu_model

FILE = "client-ceilings.json"


@dataclass(frozen=True, kw_only=True)
class Ceiling:
    streams: int                 # the highest concurrency whose step kept the client within tolerance
    chunks_per_s: float          # the chunks per second one client process read at that step
    bounded: bool                # False: every step passed, the ceiling is at least this (not found)
    failed_at: int | None        # the first step beyond tolerance (None: none was)
    ttft_error: float            # the client's mean TTFT against the send log's, at the ceiling's step
    delivery_ms: float           # the client's own share of it (server first write -> client stamp)
    client_cpu_percent: float
    client_cpus: str             # the CPU(s) the one client process ran on
    server_pace: float = 1.0     # the reference server's tok/s at that step / what its TTFT and ITL allow: below
                                 # about 0.9 it fell behind, and the client may sustain more than measured here
    load: str                    # the reference server's answer: TTFT, ITL, output tokens, tokens per chunk
    measured_at: str             # ISO 8601, UTC
    tool_version: str

    def allows(self, streams: int | None, chunks_per_s: float | None) -> tuple[float, float]:
        """How many times one process's ceiling `streams` and `chunks_per_s` ask (0 where not asked)."""
        s = (streams or 0) / self.streams if self.streams else 0.0
        c = (chunks_per_s or 0.0) / self.chunks_per_s if self.chunks_per_s else 0.0
        return s, c

    def workers_for(self, streams: int | None, chunks_per_s: float | None) -> int:
        """The client processes the load needs to stay within the ceiling in each."""
        return max(1, *(math.ceil(x) for x in self.allows(streams, chunks_per_s)))

    def record(self) -> dict:
        return asdict(self)

    @classmethod
    def of(cls, data: dict) -> Ceiling | None:
        """The record as stored (None: not one this tokenbench can read)."""
        names = {f.name for f in fields(cls)}
        try:
            return cls(**{k: v for k, v in data.items() if k in names})
        except TypeError:
            return None


def machine_key() -> str:
    """Hostname, CPU model and core count: a client's cost per chunk is the machine's."""
    return f"{platform.node()} | {cpu_model()} | {os.cpu_count()}"


def path() -> Path:
    return userdirs.machine_dir() / FILE


def _all() -> dict:
    try:
        data = json.loads(path().read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def load() -> Ceiling | None:
    """This machine's stored ceiling, if one was measured here."""
    data = _all().get(machine_key())
    return Ceiling.of(data) if isinstance(data, dict) else None


def save(ceiling: Ceiling) -> Path:
    """Store `ceiling` as this machine's (replacing an earlier one; other machines' records are kept)."""
    data = {**_all(), machine_key(): ceiling.record()}
    target = path()
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True))
    tmp.replace(target)
    return target
