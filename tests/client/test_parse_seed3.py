"""client/parse.py at an edge a held-out mutation draw (seed 3) found untested: a chunk with several choices
(n > 1) that carry text is never taken for an empty keep-alive when the server's count is below the chunks': only
the empty-text chunk is dropped, on the strict path and on the common one alike."""

from __future__ import annotations

import json

import pytest

from tokenbench.client.parse import parse_exchange
from tokenbench.client.records import RawExchange
from tokenbench.client.request import PreparedRequest

MS = 1_000_000


def _sse(obj: dict) -> bytes:
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


@pytest.mark.parametrize("strict", [False, True])
def test_a_chunk_of_several_text_choices_is_kept_when_the_server_counts_fewer(strict):
    two = lambda a, b, finish=None: _sse({"choices": [{"index": 0, "text": a},                    # noqa: E731
                                                      {"index": 1, "text": b, "finish_reason": finish}]})
    keep_alive = _sse({"choices": [{"index": 0, "text": ""}]})
    usage = {"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 4}}
    head = [(50, b": keep-alive comment\n\n")] if strict else []     # an SSE comment: the strict path reads it
    chunks = [*head, (100, two("a", "b")), (110, keep_alive), (120, two("c", "d", "length")), (121, _sse(usage)),
              (122, b"data: [DONE]\n\n")]
    raw = RawExchange(intended_ns=0, sent_ns=0, headers_ns=MS, end_ns=500 * MS, status=200,
                      chunks=[(t * MS, b) for t, b in chunks])
    req = PreparedRequest(url="http://x/v1/completions", body=b"{}", headers={}, input_len=3, output_len=4,
                          expected_prompt_tokens=3)
    r = parse_exchange(raw, req, 0, "measure")
    assert r.token_times_ns == [100 * MS, 120 * MS] and r.token_counts == [2, 2] and r.output_tokens == 4
