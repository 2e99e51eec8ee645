"""Text datasets -> exact-length drafts: pick entries in a seeded order, measure each prompt with the
server's tokenizer, apply the length filters, and fix every request's output length.

A draft keeps the prompt both as text (what chat sends) and as token ids (what completions sends, so
the prompt length is exact by construction). The output length is forced (`output_len`), else the
entry's own (a JSONL field), else the token count of the entry's reference reply (ShareGPT); either
way it is sent as max_tokens = min_tokens with ignore_eos, so it is verified like every workload.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tokenbench.errors import UsageError
from tokenbench.spec.bench import Workload
from tokenbench.workload.chat import Tokenizer


@dataclass(frozen=True, slots=True)
class TextEntry:
    """One dataset row before tokenization."""

    prompt: str
    output_len: int | None = None     # asked by the file itself (JSONL)
    completion: str | None = None     # the reference reply (ShareGPT): its token count is the output length


@dataclass(frozen=True, slots=True)
class Draft:
    """A prompt whose length is known, before the API shapes it into a Prompt."""

    text: str | None
    ids: tuple[int, ...] | None
    input_len: int
    output_len: int
    images: tuple[str, ...] = ()
    image_bytes: int = 0


@dataclass(frozen=True, slots=True)
class Filters:
    min_input_len: int | None = None
    max_input_len: int | None = None
    min_output_len: int | None = None
    max_output_len: int | None = None
    max_total: int | None = None      # the server's context per sequence: input + output must fit
    forced_output: int | None = None  # every draft's output length (--output-len), whatever its entry asks

    @classmethod
    def of(cls, wl: Workload, max_model_len: int | None) -> Filters:
        return cls(wl.min_input_len, wl.max_input_len, wl.min_output_len, wl.max_output_len, max_model_len,
                   wl.output_len)

    def accepts(self, input_len: int, output_len: int) -> bool:
        checks = ((self.min_input_len, input_len, 1), (self.max_input_len, input_len, -1),
                  (self.min_output_len, output_len, 1), (self.max_output_len, output_len, -1),
                  (self.max_total, input_len + output_len, -1))
        return input_len > 0 and output_len > 0 and all(
            limit is None or (value - limit) * sign >= 0 for limit, value, sign in checks)


@dataclass
class Selection:
    drafts: list[Draft]
    examined: int = 0                  # entries tokenized
    rejected: int = 0                  # of those, dropped by a filter
    reused: int = 0                    # drafts that repeat an earlier one (the dataset ran out)
    notes: list[str] = field(default_factory=list)


def read_json_or_jsonl(path: str | Path, what: str) -> Iterator[tuple[int, object]]:
    """(where, object) pairs: a JSON array (where = the element's 1-based position) or one JSON value per
    non-empty line (where = the line number)."""
    p = Path(path)
    if not p.is_file():
        raise UsageError(f"{what} file '{p}' not found", "pass a local file with --dataset-path (nothing is downloaded)")
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(f"{p}: not UTF-8 text ({exc.reason} at byte {exc.start})",
                         f"a {what} file is JSON or JSON Lines in UTF-8") from None
    if text.lstrip().startswith("["):
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise UsageError(f"{p}: not valid JSON ({exc})", f"a {what} file is a JSON array or JSON Lines") from None
        yield from enumerate(data, 1)
        return
    for n, line in enumerate(text.splitlines(), 1):
        if line.strip():
            try:
                yield n, json.loads(line)
            except json.JSONDecodeError as exc:
                raise UsageError(f"{p}:{n}: not valid JSON ({exc.msg})", f"a {what} file has one JSON object per line") from None


def _output_len(tok: Tokenizer, entry: TextEntry, forced: int | None) -> int:
    if forced is not None:
        return forced
    if entry.output_len is not None:
        return entry.output_len
    if entry.completion is not None:
        return len(tok.encode(entry.completion.strip()))
    return 0


def _draft(tok: Tokenizer, entry: TextEntry, filters: Filters) -> Draft | None:
    text = entry.prompt.strip()
    if not text:
        return None
    ids = tuple(tok.encode(text))
    out = _output_len(tok, entry, filters.forced_output)
    return Draft(text, ids, len(ids), out) if filters.accepts(len(ids), out) else None


def select(entries: Sequence[TextEntry], tok: Tokenizer, rng: random.Random, count: int, filters: Filters,
           source: str) -> Selection:
    """`count` drafts from the entries in a seeded order, tokenizing only as many as needed. When fewer
    pass the filters, the accepted ones are reused in order (and the selection says how many)."""
    order = list(range(len(entries)))
    rng.shuffle(order)
    sel = Selection([])
    for i in order:
        if len(sel.drafts) >= count:
            break
        sel.examined += 1
        draft = _draft(tok, entries[i], filters)
        if draft is None:
            sel.rejected += 1
        else:
            sel.drafts.append(draft)
    if not sel.drafts:
        raise UsageError(f"{source}: none of {len(entries)} entries passes the length filters "
                         "(or has an output length)", "relax the min/max length filters, or force --output-len N")
    unique = len(sel.drafts)
    while len(sel.drafts) < count:
        sel.drafts.append(sel.drafts[len(sel.drafts) - unique])
    sel.reused = len(sel.drafts) - unique
    if sel.reused:
        sel.notes.append(f"{source}: only {unique} usable entries for {count} requests; {sel.reused} prompts repeat "
                         "(a prefix cache may serve the repeats)")
    return sel
