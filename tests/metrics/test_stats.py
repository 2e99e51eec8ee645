"""Percentiles and distribution summaries (metrics/request.py) against numpy: `percentile` is numpy.percentile(method="linear") on sorted values for
every q in [0, 100] (both ends included, anything outside refused), and `describe` gives vLLM's keys with
numpy's mean, population std, min, max and percentiles (issue 39: a test for every behaviour a
single-point change could alter)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokenbench.metrics.request import PERCENTILES, describe, percentile

VALUES = st.lists(st.floats(-1e6, 1e6, allow_nan=False), min_size=1, max_size=60)
QS = st.one_of(st.sampled_from([0.0, 100.0, 50.0, 99.0, 0.5, 99.5]), st.floats(0.0, 100.0))


@settings(max_examples=300, deadline=None)
@given(VALUES, QS)
def test_percentile_is_numpys_linear_percentile_for_every_q_in_0_to_100(values, q):
    s = sorted(values)
    assert percentile(s, q) == pytest.approx(float(np.percentile(s, q, method="linear")), rel=1e-9, abs=1e-6)
    assert percentile(np.asarray(s), q) == pytest.approx(percentile(s, q))


def test_the_ends_are_the_minimum_and_the_maximum():
    s = [1.0, 2.0, 4.0, 8.0]
    assert (percentile(s, 0), percentile(s, 100)) == (1.0, 8.0)
    assert percentile(s, 50) == 3.0 and percentile(s, 25) == pytest.approx(1.75)
    assert percentile([7.0], 0) == percentile([7.0], 100) == percentile([7.0], 37) == 7.0


@pytest.mark.parametrize("q", [-1e-9, -1.0, 100 + 1e-9, 101.0, 1e9])
def test_a_q_outside_0_to_100_is_refused(q):
    with pytest.raises(ValueError, match="outside 0..100"):
        percentile([1.0, 2.0], q)


def test_no_values_have_no_percentile():
    assert math.isnan(percentile([], 50)) and math.isnan(percentile(np.zeros(0), 0))


@settings(max_examples=150, deadline=None)
@given(st.lists(st.floats(0, 1e5, allow_nan=False), min_size=1, max_size=80))
def test_describe_is_numpys_figures_under_vllms_names(values):
    d = describe(values, "ttft")
    v = np.asarray(values)
    assert set(d) == {f"{s}_ttft_ms" for s in ("mean", "median", "std", "min", "max", *(f"p{q}" for q in PERCENTILES))}
    assert PERCENTILES == (50, 90, 95, 99)
    assert d["mean_ttft_ms"] == pytest.approx(float(v.mean()), rel=1e-9, abs=1e-9)
    assert d["std_ttft_ms"] == pytest.approx(float(v.std(ddof=0)), rel=1e-6, abs=1e-6)
    assert (d["min_ttft_ms"], d["max_ttft_ms"]) == (float(v.min()), float(v.max()))
    assert d["median_ttft_ms"] == pytest.approx(float(np.median(v)), rel=1e-9, abs=1e-9)
    for q in PERCENTILES:
        assert d[f"p{q}_ttft_ms"] == pytest.approx(float(np.percentile(v, q)), rel=1e-9, abs=1e-9)


def test_describe_sorts_what_it_is_given_and_names_the_unit():
    d = describe([9.0, 1.0, 5.0], "tpot", unit="s")
    assert (d["min_tpot_s"], d["median_tpot_s"], d["max_tpot_s"], d["mean_tpot_s"]) == (1.0, 5.0, 9.0, 5.0)
    assert d["std_tpot_s"] == pytest.approx(math.sqrt(32 / 3))


def test_describe_of_nothing_is_not_defined_everywhere():
    d = describe([], "itl")
    assert len(d) == 9 and all(math.isnan(v) for v in d.values())
