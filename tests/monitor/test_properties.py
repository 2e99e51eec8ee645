
"""Property: on any text the offline parsers return data or raise UsageError, nothing else."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tokenbench.deploy.engines import metric_names
from tokenbench.errors import UsageError
from tokenbench.monitor.npu_smi import npu_samples, parse_npu_smi
from tokenbench.monitor.nvidia_smi import gpu_samples, parse_nvidia_smi
from tokenbench.monitor.prometheus import parse_prometheus, server_samples

from .helpers import fixture_files

NAMES = metric_names()

pytestmark = pytest.mark.slow   # subprocesses, real servers or hypothesis: seconds per test

REAL_LINES = sorted({line for folder in ("npu-smi", "nvidia-smi", "prometheus")
                     for path in fixture_files(folder) for line in path.read_text().splitlines()})

# arbitrary text, text made of table/CSV/exposition characters, and real lines shuffled and mutated
TEXTS = st.one_of(
    st.text(),
    st.text(alphabet="| +-=/.:,%()[]{}\"#\n\t0123456789abcdefxNAOK", max_size=400),
    st.lists(st.sampled_from(REAL_LINES), max_size=40).map("\n".join),
    st.tuples(st.lists(st.sampled_from(REAL_LINES), min_size=1, max_size=20), st.text(max_size=30),
              st.integers(min_value=0, max_value=2000)).map(
        lambda t: (lambda s: s[: t[2]] + t[1] + s[t[2]:])("\n".join(t[0]))),
)
PROPERTY = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def only_usage_errors(parse, text):
    try:
        return parse(text)
    except UsageError:
        return None


@PROPERTY
@given(TEXTS)
def test_npu_smi_parser(text):
    info = only_usage_errors(parse_npu_smi, text)
    if info is not None:
        npu_samples(info, 0)


@PROPERTY
@given(TEXTS)
def test_nvidia_smi_parser(text):
    readings = only_usage_errors(parse_nvidia_smi, text)
    if readings is not None:
        gpu_samples(readings, 0)


@PROPERTY
@given(TEXTS, st.sampled_from([None, "vllm", "sglang", "llamacpp"]))
def test_prometheus_parser(text, engine):
    metrics = only_usage_errors(lambda t: parse_prometheus(t, NAMES, engine), text)
    if metrics is not None:
        server_samples(metrics, 0)
