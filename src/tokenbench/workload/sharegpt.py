"""ShareGPT-format conversations (JSON array or JSON Lines), read from a local file.

Each record holds `conversations` (or `messages`): turns with `from`/`role` and `value`/`content`. As
in vLLM's `bench serve`, the first turn is the prompt (it must come from the user: `human`/`user`) and
the second the reference reply (`gpt`/`assistant`/`chatgpt`), whose token count is the output length
unless one is forced. Records with fewer than two turns are skipped.
"""

from __future__ import annotations

from pathlib import Path

from tokenbench.errors import UsageError
from tokenbench.workload.dataset import TextEntry, read_json_or_jsonl

USER_ROLES = ("human", "user")
ASSISTANT_ROLES = ("gpt", "assistant", "chatgpt", "bard", "bing", "model")


def _turn(turn: object) -> tuple[str, str] | None:
    if not isinstance(turn, dict):
        return None
    role, text = turn.get("from", turn.get("role")), turn.get("value", turn.get("content"))
    return (str(role).lower(), text) if isinstance(text, str) else None


def entry(record: object) -> TextEntry | None:
    """The (prompt, reply) of one record, or None when it has no user turn followed by a reply."""
    if not isinstance(record, dict):
        return None
    turns = record.get("conversations", record.get("messages"))
    if not isinstance(turns, list) or len(turns) < 2:
        return None
    first, second = _turn(turns[0]), _turn(turns[1])
    if first is None or second is None or first[0] not in USER_ROLES or second[0] not in ASSISTANT_ROLES:
        return None
    return TextEntry(prompt=first[1], completion=second[1])


def read_sharegpt(path: str | Path) -> list[TextEntry]:
    rows = [e for _, record in read_json_or_jsonl(path, "ShareGPT") if (e := entry(record)) is not None]
    if not rows:
        raise UsageError(f"{path}: no ShareGPT conversation with a user turn followed by a reply",
                         'each record needs "conversations": [{"from": "human", "value": ...}, '
                         '{"from": "gpt", "value": ...}]')
    return rows
