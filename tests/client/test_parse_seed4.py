"""client/parse.py at an edge a held-out mutation draw (seed 4) found untested: a chunk of several choices counts
as empty-only (token_counts drops its count where the server's says so) when every choice it counts is an
explicit empty text WITHOUT token ids; one whose choices carry token ids is not empty-only."""

from __future__ import annotations

from tokenbench.client.parse import _chunk
from tokenbench.client.tokens import Piece


def test_a_chunk_of_empty_texts_without_ids_is_empty_only_and_with_ids_is_not():
    bare = [(Piece(content="", reasoning="", ids=None, empty_token=True), None)] * 2
    with_ids = [(Piece(content="", reasoning="", ids=1, empty_token=True), None)] * 2
    assert _chunk(1, bare, None).empty_only and _chunk(1, bare, None).guess == 2
    assert not _chunk(1, with_ids, None).empty_only and _chunk(1, with_ids, None).guess == 2
