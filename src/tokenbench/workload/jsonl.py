"""Prompt files in JSON Lines: one object per line with the prompt text and, optionally, its output length.

    {"prompt": "Summarise the following ...", "output_len": 128}

The prompt is `prompt` (or `text`); the output length `output_len` (or `output_length`, `max_tokens`).
A forced output length (`--output-len`) overrides the file's; without either the line is rejected.
"""

from __future__ import annotations

from pathlib import Path

from tokenbench.errors import UsageError
from tokenbench.workload.dataset import TextEntry, read_json_or_jsonl

PROMPT_KEYS = ("prompt", "text")
OUTPUT_KEYS = ("output_len", "output_length", "max_tokens")


def _first(record: dict, keys: tuple[str, ...]) -> object:
    return next((record[k] for k in keys if k in record), None)


def entry(record: object, where: str) -> TextEntry:
    if not isinstance(record, dict) or not isinstance(prompt := _first(record, PROMPT_KEYS), str):
        raise UsageError(f"{where}: no string 'prompt' field", 'write one object per line: {"prompt": "...", '
                         '"output_len": 128}')
    out = _first(record, OUTPUT_KEYS)
    if out is not None and (type(out) is not int or out <= 0):
        raise UsageError(f"{where}: output length {out!r} is not a positive integer", "fix the value or drop the field")
    return TextEntry(prompt=prompt, output_len=out)


def read_prompts(path: str | Path) -> list[TextEntry]:
    rows = [entry(record, f"{path}:{line}") for line, record in read_json_or_jsonl(path, "prompt JSONL")]
    if not rows:
        raise UsageError(f"{path}: the file holds no prompts", 'write one object per line: {"prompt": "..."}')
    return rows
