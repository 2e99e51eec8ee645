"""Monitoring: accelerator (npu-smi, nvidia-smi/NVML), server /metrics and host samplers, their
offline parsers, a background runner on the requests' clock, and the per-cell summary.

    monitor = Monitor(default_samplers(base_url, engine, pid, names), interval_s=1.0, on_warning=log)
                                       # names: deploy.engines.metric_names()
    with monitor:                      # or monitor.start() ... monitor.stop()
        run_the_cell()
    samples = monitor.stop()           # list[Sample]; also monitor.snapshot() while running
    summary = summarize(samples, start_ns, end_ns, output_tokens)
    warning = queue_cross_check(star, summary)
"""

from tokenbench.monitor.runner import Monitor
from tokenbench.monitor.samplers import (
    Availability,
    HostSampler,
    NpuSmiSampler,
    NvidiaSmiSampler,
    PrometheusSampler,
    Sampler,
    default_samplers,
)
from tokenbench.monitor.samples import Sample, sample_from_dict
from tokenbench.monitor.summary import SUMMARY_KEYS, queue_cross_check, summarize

__all__ = [
    "Availability", "HostSampler", "Monitor", "NpuSmiSampler", "NvidiaSmiSampler", "PrometheusSampler",
    "SUMMARY_KEYS", "Sample", "Sampler", "default_samplers", "queue_cross_check", "sample_from_dict",
    "summarize",
]
