"""A capacity answer per device and per $ an hour: the answer and its interval's ends each divided by the
devices, or by the server's hourly price (the device price x devices, or the node's), for any price, basis and
device count; an open end stays open."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tokenbench.judge.cost import Price, capacity_units


@given(cap=st.floats(0.5, 1e4), n=st.integers(1, 64), price=st.floats(0.01, 500), basis=st.sampled_from(["device", "node"]))
def test_the_answer_per_device_and_per_dollar_hour(cap, n, price, basis):
    u = capacity_units((cap, cap / 2, None), n, Price(price, basis))
    hourly = price * n if basis == "device" else price
    assert u.devices == n and u.per_device == (pytest.approx(cap / n), pytest.approx(cap / 2 / n), None)
    assert u.per_usd_hour == (pytest.approx(cap / hourly), pytest.approx(cap / 2 / hourly), None)
    assert u.per_device[0] * n == pytest.approx(u.per_usd_hour[0] * hourly)     # the same agents, twice divided


def test_without_a_price_only_per_device_and_no_device_count_below_one():
    u = capacity_units((12.0, 10.0, 14.0), 0)
    assert (u.devices, u.per_device, u.per_usd_hour) == (1, (12.0, 10.0, 14.0), None)
