"""A tiny Hugging Face tokenizer.json that tokenizes like the reference server (whitespace words,
`w<N>` is token N, ids 0-2 special; any other word is one unknown token, as the server counts it)."""

from __future__ import annotations

from pathlib import Path

from tokenizers import Tokenizer, models, pre_tokenizers


def make_reference_tokenizer(folder: Path, vocab_size: int = 32000) -> Path:
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2, **{f"w{i}": i for i in range(3, vocab_size)}}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    folder.mkdir(parents=True, exist_ok=True)
    tok.save(str(folder / "tokenizer.json"))
    return folder
