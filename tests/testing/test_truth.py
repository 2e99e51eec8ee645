"""The truth of a request ends where a client's E2EL ends (docs/metrics.md): the read that carried `[DONE]`,
else the body's end; the handler's own end comes later on a busy server and is no client's end."""

from __future__ import annotations

import pytest

from tokenbench.testing import truth

MS = 1_000_000


def _rec(**ends: int | None) -> dict:
    return {"outcome": "ok", "recv_ns": 0, "write_ns": [100 * MS, 120 * MS, 140 * MS], "completion_tokens": 3,
            "prompt_tokens": 4, "done_ns": None, "eof_ns": None, **ends, "end_ns": ends.get("end_ns", 150 * MS)}


@pytest.mark.parametrize(("ends", "end_ms"), [
    ({"done_ns": 140 * MS, "eof_ns": 141 * MS, "end_ns": 143 * MS}, 140),   # [DONE] with the last token
    ({"done_ns": 440 * MS, "eof_ns": 441 * MS, "end_ns": 442 * MS}, 440),   # a slow end: [DONE] 300 ms later
    ({"eof_ns": 145 * MS, "end_ns": 147 * MS}, 145),                         # no [DONE]: the body's end
    ({"end_ns": 150 * MS}, 150),                                             # neither stamped
])
def test_a_requests_end_is_its_done_else_its_body_end_else_the_handlers(ends, end_ms):
    s = truth.samples([_rec(**ends)])
    assert s["e2el"].tolist() == [pytest.approx(end_ms)]
    assert s["tail"].tolist() == [pytest.approx(end_ms - 140)]
    assert s["tpot"].tolist() == [pytest.approx(20.0)]
