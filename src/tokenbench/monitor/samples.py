"""One monitor sample: a value of a named signal at a time on the requests' clock.

`t_ns` comes from `time.perf_counter_ns()`, the clock request records use, so a sample can be placed on
a request timeline without conversion. Offline parses (`tokenbench parse`) have no clock and use 0.

Names are shared across sources where the meaning is the same, so a summary does not care whether an
accelerator is an Ascend NPU or an NVIDIA GPU:

| source | names |
|---|---|
| npu, gpu | `util_pct`, `mem_used_mb`, `mem_total_mb`, `power_w`, `temp_c`, `health_ok`, `proc_mem_mb` |
| npu only | `ddr_used_mb`, `ddr_total_mb` (the Memory-Usage column where it is not the main memory) |
| server | `running`, `waiting`, `kv_usage` (0..1), `preemptions`, `prompt_tokens`,     |
|        | `generation_tokens`, `kv_capacity_tokens`; and each raw metric (`vllm:...`) |
| host | `cpu_pct`, `mem_used_mb`, `mem_pct`, `proc_cpu_pct`, `proc_rss_mb` |
| cpu | `cpu_busy_s`, `cpu_total_s`, `cpu_client_s`, `cpu_server_s`, `cpu_psi_some_s`, ... (cumulative, monitor/cpu.py) |

Raw engine metric names always contain a `:`; common names never do.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

SOURCES = ("npu", "gpu", "server", "host", "cpu")
ACCELERATOR_SOURCES = ("npu", "gpu")


@dataclass(slots=True)
class Sample:
    t_ns: int
    source: str
    name: str
    value: float
    labels: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "t_ns": self.t_ns,
            "source": self.source,
            "name": self.name,
            "value": self.value,
            "labels": dict(self.labels),
        }


def sample_from_dict(data: dict[str, Any]) -> Sample:
    """The inverse of `Sample.to_dict`, for samples read back from JSON or the store."""
    return Sample(
        t_ns=int(data["t_ns"]),
        source=str(data["source"]),
        name=str(data["name"]),
        value=float(data["value"]),
        labels={str(k): str(v) for k, v in dict(data.get("labels") or {}).items()},
    )


def make_samples(t_ns: int, source: str, values: Mapping[str, float | None],
                 labels: dict[str, str]) -> list[Sample]:
    """Samples for the known values of one reading; `None` (unknown) is left out, never made 0."""
    return [Sample(t_ns, source, name, float(value), dict(labels))
            for name, value in values.items() if value is not None]
