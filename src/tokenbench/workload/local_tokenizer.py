"""A Hugging Face tokenizer read from a local directory (its tokenizer.json), for servers without
/tokenize: it builds exact-length chat prompts and counts dataset prompts. Nothing is downloaded.

The server still verifies every request with its own usage counts; where the two tokenizers disagree
the request records the difference (docs/workloads.md).
"""

from __future__ import annotations

from pathlib import Path

from tokenbench.errors import UsageError


def tokenizer_file(path: str) -> Path | None:
    """The directory's tokenizer.json (a path to the file itself is accepted), or None."""
    p = Path(path)
    file = p if p.is_file() and p.name.endswith(".json") else p / "tokenizer.json"
    return file if file.is_file() else None


class LocalTokenizer:
    """encode/decode with the `tokenizers` library; no special tokens are added or kept."""

    def __init__(self, path: str) -> None:
        file = tokenizer_file(path)
        if file is None:
            raise UsageError(f"--tokenizer {path}: no tokenizer.json there",
                             "pass the model's Hugging Face directory (the one holding tokenizer.json)")
        try:
            from tokenizers import Tokenizer
        except ImportError:
            raise UsageError("the `tokenizers` package is not installed (needed for --tokenizer)",
                             "pip install tokenizers") from None
        try:
            self._tok = Tokenizer.from_file(str(file))
        except Exception as exc:       # the library raises a bare Exception on a malformed file
            raise UsageError(f"{file}: not a Hugging Face tokenizer ({str(exc)[:120]})",
                             "pass the directory of a model saved with save_pretrained") from None
        self.source = str(file.parent)

    def encode(self, text: str) -> list[int]:
        return list(self._tok.encode(text, add_special_tokens=False).ids)

    def decode(self, ids: list[int]) -> str:
        return str(self._tok.decode(ids, skip_special_tokens=True))

    @property
    def vocab_size(self) -> int:
        return int(self._tok.get_vocab_size(with_added_tokens=True))
