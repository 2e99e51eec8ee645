"""monitor/summary.py at an edge a held-out mutation draw (seed 4) found untested: each device's figures carry
the name its samples' labels give (nvidia-smi's or npu-smi's product name), and none where they give none."""

from __future__ import annotations

from tokenbench.monitor.samples import Sample
from tokenbench.monitor.summary import summarize
from tokenbench.monitor.window import CellWindow

S = 1_000_000_000


def test_each_device_is_named_as_its_samples_say():
    named = [Sample(t * S, "gpu", "util_pct", 50.0, {"device": "0", "name": "NVIDIA H100 80GB HBM3"})
             for t in range(3)]
    plain = [Sample(t * S, "gpu", "util_pct", 20.0, {"device": "1"}) for t in range(3)]
    devices = summarize(named + plain, CellWindow(output_tokens=10)).devices
    assert devices is not None
    assert [(d.device, d.name) for d in devices] == [("0", "NVIDIA H100 80GB HBM3"), ("1", "")]
