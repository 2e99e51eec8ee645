"""One cell's prompts for any workload kind: the warmup and measured prompts, the trace's arrival
offsets, and the facts the cell summary states (chat-template overhead, image tokens, dataset stats).

Every kind first makes drafts (content with a known token count), then the API shapes them into
Prompts: completions send token ids (exact by construction), chat sends text whose expected prompt
tokens are content + the chat-template overhead (+ the image tokens), measured through the server
with 1-token probes. docs/workloads.md says how each kind verifies its lengths.
"""

from __future__ import annotations

import functools
import itertools
import random
import statistics
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, TypeVar

from tokenbench.client.request import Prompt
from tokenbench.errors import TargetError, UsageError
from tokenbench.metrics.summary_groups import WorkloadFacts
from tokenbench.spec.bench import Workload
from tokenbench.workload.chat import (
    ServerTokenizer,
    Tokenizer,
    chat_template_overhead,
    completion_special_tokens,
    exact_text,
    image_tokens,
)
from tokenbench.workload.dataset import Draft, Filters, TextEntry, select
from tokenbench.workload.jsonl import read_prompts
from tokenbench.workload.random_ids import cell_rng, random_ids
from tokenbench.workload.sharegpt import read_sharegpt
from tokenbench.workload.vocab import Vocab

if TYPE_CHECKING:                    # a kind's own modules are imported where that kind is built
    from tokenbench.workload import images as img
    from tokenbench.workload import trace_replay
    from tokenbench.workload.local_tokenizer import LocalTokenizer

T = TypeVar("T")


class Target(Protocol):
    """What a workload needs to know about the server (load.target.Endpoint has it)."""

    @property
    def base_url(self) -> str: ...
    @property
    def model(self) -> str: ...
    @property
    def api_key(self) -> str | None: ...
    @property
    def vocab(self) -> Vocab: ...
    @property
    def max_model_len(self) -> int | None: ...
    @property
    def token_ids(self) -> bool: ...


@dataclass(kw_only=True)
class CellPrompts:
    warmup: list[Prompt]
    measure: Iterable[Prompt]               # a list, or (random and trace kinds) made one by one when taken
    offsets_ns: list[int] | None = None     # trace: arrival of measured request i at t0 + offsets_ns[i]
    facts: WorkloadFacts = field(default_factory=WorkloadFacts)
    notes: list[str] = field(default_factory=list)
    measure_count: int | None = None        # None: as many as the duration takes
    length_means: tuple[int, int] | None = None   # rounded mean (input, output) lengths asked

    def nominal_lengths(self, wl: Workload) -> tuple[int, int]:
        """The cell's (input, output) lengths: the asked pair (exact, or the centre of drawn lengths), else
        the rounded means asked (datasets, traces, a length histogram)."""
        if (wl.input_len is not None and wl.output_len is not None) or self.length_means is None:
            return wl.input_len or 0, wl.output_len or 0
        return self.length_means


@dataclass
class _Cell:
    t: Target
    wl: Workload
    key: str
    tok: Tokenizer
    special: int = 0          # prompt_as_text: tokens the server adds to a text prompt (BOS)
    text_forced: bool = False  # prompts go as text because the server refuses token ids (not --prompt-as-text)

    def rng(self, phase: str) -> random.Random:
        """The stream of a phase's content: salted per run (a run's prompts share nothing with another's)."""
        return cell_rng(self.wl.seed, self.key, phase, self.wl.salt)

    def shape_rng(self, phase: str) -> random.Random:
        """The stream of a phase's shape (drawn lengths, which dataset entries, which image files): the same in
        every run of a seed, salted or not, so runs of one seed ask the same workload."""
        return cell_rng(self.wl.seed, self.key, phase)


@dataclass
class _Drafts:
    warmup: list[Draft]
    measure: Iterable[Draft]
    offsets_ns: list[int] | None = None
    facts: dict = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


# ---- drafts per kind ----

def _exact(c: _Cell, rng: random.Random, n: int, out: int) -> Draft:
    if c.wl.api == "chat":
        return Draft(exact_text(c.tok, rng, n, c.t.vocab), None, n, out)
    if c.wl.prompt_as_text:                 # n tokens by the server's count, its special tokens included
        return Draft(exact_text(c.tok, rng, n - c.special, c.t.vocab), None, n, out)
    return Draft(None, random_ids(rng, n, c.t.vocab), n, out)


PROBE_TOKENS = 8     # the text of the special-token probe
SECOND_PROBE = 32    # the second probe's length when the cell's own is not known (drawn lengths) or too close


def _not_the_servers(c: _Cell, counted: list[tuple[int, int]], extra: str) -> TargetError:
    """The tokenizer that builds text prompts counts them otherwise than the server: the counts, and the
    fixes that can help (dropping --prompt-as-text only where the user asked it: the server takes token ids)."""
    said = " and ".join(f"{got} in a text of {n}" for n, got in counted)
    fix = "pass the served model's Hugging Face directory with --tokenizer DIR"
    if not c.text_forced and c.wl.api == "completions":
        fix += ", or drop --prompt-as-text (the server takes token-id prompts)"
    return TargetError(f"the server counts {said} tokens by the tokenizer ({getattr(c.tok, 'source', 'server')})"
                       f"{extra}: it is not the server's tokenizer, so the lengths stated would not be the "
                       "server's", fix)


def _second_length(first: int, wanted: int | None) -> int:
    """The second probe's length: the cell's own (its prompts' length by the tokenizer) unless unknown or equal
    to the first's."""
    return wanted if wanted and wanted != first else (SECOND_PROBE if first != SECOND_PROBE else 2 * SECOND_PROBE)


def _special_tokens(c: _Cell) -> int:
    """prompt_as_text: the special tokens the server adds to a text prompt, measured once per cell with a
    1-token completion; the prompts' text is that many tokens shorter than input_len. A second completion, of
    the cell's own length, must add as many: else the tokenizer is not the server's (stated, never measured
    under a wrong length)."""
    rng = c.rng("probe")

    fix = ("the server refuses token-id prompts, so it must report usage (prompt_tokens) for a text prompt: "
           "a length tokenbench states is the server's count" if c.text_forced
           else "drop --prompt-as-text (token-id prompts need no probe)")

    def added(n: int) -> int:
        text = exact_text(c.tok, rng, n, c.t.vocab)
        return completion_special_tokens(c.t.base_url, c.t.model, text, n, c.t.api_key, fix)
    special = added(PROBE_TOKENS)
    if special < 0:
        raise _not_the_servers(c, [(PROBE_TOKENS, PROBE_TOKENS + special)], "")
    if special >= (c.wl.input_len or 0) and c.wl.input_len is not None:
        fix = "use a longer --input-len" + ("" if c.text_forced else ", or drop --prompt-as-text")
        raise TargetError(f"the server adds {special} tokens to a text prompt: no room for {c.wl.input_len}-token "
                          "prompts as text", fix)
    n = _second_length(PROBE_TOKENS, (c.wl.input_len or 0) - special)
    again = added(n)
    if again != special:
        raise _not_the_servers(c, [(PROBE_TOKENS, PROBE_TOKENS + special), (n, n + again)],
                               " (the same special tokens would add the same count to both)")
    return special


def _exact_phase(c: _Cell, phase: str, lengths: list[tuple[int, int]]) -> list[Draft]:
    rng = c.rng(phase)
    return [_exact(c, rng, n, out) for n, out in lengths]


def _lazy_phase(c: _Cell, phase: str, lengths: Iterable[tuple[int, int]]) -> Iterator[Draft]:
    """_exact_phase one draft at a time (the same drafts, from the same seeded stream)."""
    rng = c.rng(phase)
    return (_exact(c, rng, n, out) for n, out in lengths)


def _given(value: T | None, what: str) -> T:
    """A workload field its kind requires (the spec refuses a workload of that kind without it)."""
    if value is None:
        raise UsageError(f"this workload needs {what}", f"give {what} in the workload")
    return value


def _shapes(c: _Cell, phase: str, n: int | None) -> Iterator[tuple[int, int]]:
    """Each request's (input, output) lengths in a phase: the asked pair, or drawn from the workload's
    length distribution (its own seeded stream, apart from the prompts' content)."""
    if c.wl.draws is None:
        shape = (_given(c.wl.input_len, "input_len"), _given(c.wl.output_len, "output_len"))
        return itertools.repeat(shape, *([] if n is None else [n]))
    from tokenbench.workload.lengths import Draws  # a length distribution: only a workload that draws lengths
    return Draws.of(c.wl).stream(c.shape_rng(f"lengths-{phase}"), n)


def _draw_facts(c: _Cell, n_meas: int | None) -> dict:
    """The distribution in words and, for a counted cell, the drawn lengths' mean, min and max."""
    if c.wl.draws is None:
        return {}
    from tokenbench.workload.lengths import Draws, length_stats
    stats = length_stats(_shapes(c, "measure", n_meas)) if n_meas is not None else {}
    return {"length_distribution": Draws.of(c.wl).describe(), "length_draws": c.wl.draws, **stats}


def _random(c: _Cell, n_warm: int, n_meas: int | None, duration_s: float | None) -> _Drafts:
    told = {"prompt_as_text_special_tokens": c.special} if c.wl.prompt_as_text else {}
    return _Drafts(_exact_phase(c, "warmup", list(_shapes(c, "warmup", n_warm))),
                   _lazy_phase(c, "measure", _shapes(c, "measure", n_meas)), facts={**told, **_draw_facts(c, n_meas)})


def _text(c: _Cell, n_warm: int, n_meas: int | None, duration_s: float | None) -> _Drafts:
    """Natural text: windows of exactly input_len tokens of the corpus (workload/text_corpus.py), or of
    each request's drawn length (a length distribution, as random's)."""
    from tokenbench.workload import text_corpus
    corpus = text_corpus.corpus_ids(c.tok)

    def phase(name: str, count: int | None) -> Iterator[Draft]:
        rng = c.rng(name)
        for n, out in _shapes(c, name, count):
            if c.wl.api == "chat":
                yield Draft(text_corpus.text_of(c.tok, corpus, rng, n), None, n, out)
            else:
                yield Draft(None, text_corpus.text_ids(corpus, rng, n), n, out)

    facts = {"text_corpus": text_corpus.SOURCE, "text_corpus_tokens": len(corpus), **_draw_facts(c, n_meas)}
    return _Drafts(list(phase("warmup", n_warm)), phase("measure", n_meas), facts=facts)


def _dataset(reader: Callable[[str], list[TextEntry]]):
    def build(c: _Cell, n_warm: int, n_meas: int | None, duration_s: float | None) -> _Drafts:
        wl, path = c.wl, _given(c.wl.dataset_path, "dataset_path")
        entries = reader(path)
        sel = select(entries, c.tok, c.shape_rng("dataset"), n_warm + _given(n_meas, "a request count"),
                     Filters.of(wl, c.t.max_model_len), path)
        facts = {"dataset_path": wl.dataset_path, "dataset_entries": len(entries), "dataset_examined": sel.examined,
                 "dataset_rejected": sel.rejected, "dataset_reused": sel.reused}
        return _Drafts(sel.drafts[:n_warm], sel.drafts[n_warm:], facts=facts, notes=sel.notes)
    return build


def _prefix(c: _Cell, n_warm: int, n_meas: int | None, duration_s: float | None) -> _Drafts:
    from tokenbench.workload import prefix
    wl, vocab = c.wl, c.t.vocab
    shared = c.rng("prefix")
    groups, plen = _given(wl.num_groups, "num_groups"), _given(wl.prefix_len, "prefix_len")
    ilen = _given(wl.input_len, "input_len")
    if wl.api == "chat":
        texts = prefix.prefix_texts(c.tok, shared, groups, plen, vocab)

        def phase(name: str, n: int) -> list[Draft]:
            return prefix.text_drafts(c.tok, texts, c.rng(name), list(_shapes(c, name, n)), vocab, plen)
    else:
        ids = prefix.prefix_ids(shared, groups, plen, vocab)

        def phase(name: str, n: int) -> list[Draft]:
            return prefix.id_drafts(ids, c.rng(name), list(_shapes(c, name, n)), vocab)
    facts = {"prefix_len": plen, "num_groups": groups, "prefix_share": plen / ilen, **_draw_facts(c, n_meas)}
    return _Drafts(phase("warmup", n_warm), phase("measure", _given(n_meas, "a request count")), facts=facts)


def _image_source(c: _Cell) -> Callable[[random.Random, int], list[img.Image]]:
    """(rng, global request index) -> that request's images."""
    from tokenbench.workload import images as img
    wl = c.wl
    if not wl.dataset_path:
        return lambda rng, i: [img.synthetic(rng, wl.image_width, wl.image_height, wl.image_format)
                               for _ in range(wl.image_count)]
    files = img.load_files(wl.dataset_path)
    order = list(range(len(files)))
    c.shape_rng("images").shuffle(order)
    return lambda rng, i: [files[order[(i * wl.image_count + k) % len(files)]] for k in range(wl.image_count)]


def _image(c: _Cell, n_warm: int, n_meas: int | None, duration_s: float | None) -> _Drafts:
    wl, source = c.wl, _image_source(c)

    def phase(name: str, n: int, first: int) -> list[Draft]:
        rng, out = c.rng(name), []
        for i, (n_in, n_out) in enumerate(_shapes(c, name, n)):
            text = exact_text(c.tok, rng, n_in, c.t.vocab)
            pics = source(rng, first + i)
            out.append(Draft(text, None, n_in, n_out, tuple(p.uri() for p in pics), sum(len(p.data) for p in pics)))
        return out

    facts = {"images_per_request": wl.image_count, **_draw_facts(c, n_meas),
             "image_source": wl.dataset_path or f"synthetic {wl.image_width}x{wl.image_height} {wl.image_format}"}
    return _Drafts(phase("warmup", n_warm, 0), phase("measure", _given(n_meas, "a request count"), n_warm),
                   facts=facts)


def _trace_blocks(c: _Cell, rows: list[trace_replay.TraceRow], facts: dict,
                  notes: list[str]) -> trace_replay.BlockIds | None:
    """The hash blocks of a trace with hash_ids (completions: token ids); the trace's own reuse in facts."""
    from tokenbench.workload import trace_replay
    if not any(r.hash_ids for r in rows):
        return None
    if c.wl.api == "chat":
        notes.append("hash_ids are not reproduced over the chat API (its template shifts the blocks): "
                     "use --api completions to send the trace's shared blocks")
        return None
    reuse = trace_replay.trace_reuse(rows, c.wl.trace_block_size)
    facts.update(trace_block_size=reuse.block_size, trace_prompt_tokens=reuse.prompt_tokens,
                 trace_reusable_tokens=reuse.reusable_tokens, trace_reuse_rate=reuse.rate)
    salted = f"{c.wl.seed}/{c.key}" if c.wl.salt is None else f"{c.wl.seed}/{c.wl.salt}/{c.key}"
    return trace_replay.BlockIds(salted, c.wl.trace_block_size, c.t.vocab)


def _trace_phase(c: _Cell, rows: list[trace_replay.TraceRow], blocks: trace_replay.BlockIds | None) -> Iterator[Draft]:
    """The measured drafts, one by one: a row's hash blocks, or fresh content for a row without them."""
    rng = c.rng("measure")
    for r in rows:
        if blocks is not None and r.hash_ids:
            yield Draft(None, blocks.prompt(r), r.input_len, r.output_len)
        else:
            yield _exact(c, rng, r.input_len, r.output_len)


def _trace(c: _Cell, n_warm: int, n_meas: int | None, duration_s: float | None) -> _Drafts:
    """Warmup: fresh content of the first rows' lengths (never the trace's blocks, so the measured phase
    starts with none of them cached); measured: the rows, at their times."""
    from tokenbench.workload import trace_replay
    wl = c.wl
    rows = trace_replay.read_trace(_given(wl.dataset_path, "dataset_path"), wl.trace_block_size)
    replay = trace_replay.select(rows, wl.time_scale, Filters.of(wl, c.t.max_model_len), wl.output_len, n_meas, duration_s)
    lengths = [(r.input_len, r.output_len) for r in replay.rows]
    warm = [lengths[i % len(lengths)] for i in range(n_warm)]
    facts = {"dataset_path": wl.dataset_path, "time_scale": wl.time_scale, "trace_rows": len(rows),
             "trace_rows_dropped": replay.dropped, "trace_span_s": replay.offsets_ns[-1] / 1e9}
    notes = [f"{replay.dropped} trace rows dropped by the length filters"] if replay.dropped else []
    facts.update(_length_facts(lengths))
    blocks = _trace_blocks(c, replay.rows, facts, notes)
    return _Drafts(_exact_phase(c, "warmup", warm), _trace_phase(c, replay.rows, blocks), replay.offsets_ns, facts,
                   notes)


KINDS = {"random": _random, "text": _text, "sharegpt": _dataset(read_sharegpt), "jsonl": _dataset(read_prompts),
         "prefix": _prefix, "image": _image, "trace": _trace}


# ---- drafts -> prompts ----

def _image_tokens(c: _Cell, drafts: list[Draft], overhead: int) -> dict[str, int]:
    """Prompt tokens per distinct image (by data URI), each measured once with a 1-token probe.
    Synthetic images of one size and format all cost the same: one probe with a fresh image stands for them."""
    from tokenbench.workload import images as img
    first, text = drafts[0], _given(drafts[0].text, "a chat prompt's text")
    if not c.wl.dataset_path:
        probe = img.synthetic(c.rng("probe"), c.wl.image_width, c.wl.image_height, c.wl.image_format).uri()
        per = image_tokens(c.t.base_url, c.t.model, text, (probe,), c.t.api_key, first.input_len + overhead)
        return {u: per for d in drafts for u in d.images}
    out: dict[str, int] = {}
    for u in (u for d in drafts for u in d.images):
        if u not in out:
            out[u] = image_tokens(c.t.base_url, c.t.model, text, (u,), c.t.api_key, first.input_len + overhead)
    return out


def _template_overhead(c: _Cell, text: str, n: int) -> int:
    """The chat template's tokens around the content, measured with the first prompt (n content tokens by the
    tokenizer) and checked with a second content of another length: a tokenizer that is not the server's
    would have its difference taken for the template (a negative or length-dependent overhead)."""
    overhead = chat_template_overhead(c.t.base_url, c.t.model, text, n, c.t.api_key)
    m = _second_length(n, PROBE_TOKENS)
    other = chat_template_overhead(c.t.base_url, c.t.model, exact_text(c.tok, c.rng("probe"), m, c.t.vocab), m,
                                   c.t.api_key)
    if overhead < 0 or other != overhead:
        raise _not_the_servers(c, [(n, n + overhead), (m, m + other)],
                               " with the chat template's own tokens (the same template would add the same count "
                               "to both)")
    return overhead


def _chat_prompts(c: _Cell, d: _Drafts) -> tuple[list[Prompt], Iterable[Prompt], dict]:
    measure = d.measure if isinstance(d.measure, list) else iter(d.measure)
    if not d.warmup and not isinstance(measure, list):
        head = next(measure, None)                    # the first draft probes the template
        measure = itertools.chain([] if head is None else [head], measure)
        first = head
    else:
        first = (d.warmup or list(measure))[0]
    if first is None:
        return [], [], {}
    overhead = _template_overhead(c, _given(first.text, "a chat prompt's text"), first.input_len)
    facts: dict[str, float] = {"chat_template_overhead_tokens": overhead}
    per_image = _image_tokens(c, d.warmup + list(measure), overhead) if first.images else {}
    if per_image:
        facts["image_tokens_per_image"] = statistics.fmean(per_image.values())

    def shape(x: Draft) -> Prompt:
        expected = x.input_len + overhead + sum(per_image[u] for u in x.images)
        return Prompt(token_ids=None, text=x.text, input_len=x.input_len, output_len=x.output_len,
                      expected_prompt_tokens=expected, images=x.images, image_bytes=x.image_bytes)

    shaped = map(shape, measure)
    return [shape(x) for x in d.warmup], (list(shaped) if isinstance(measure, list) else shaped), facts


def _completion_prompt(x: Draft) -> Prompt:
    """Token ids, or (prompt_as_text) text whose server count, special tokens included, is input_len."""
    if x.ids is None:
        return Prompt(token_ids=None, text=x.text, input_len=x.input_len, output_len=x.output_len,
                      expected_prompt_tokens=x.input_len)
    return Prompt(token_ids=tuple(x.ids), text=None, input_len=x.input_len, output_len=x.output_len,
                  expected_prompt_tokens=x.input_len)


def _length_facts(lengths: list[tuple[int, int]]) -> dict:
    ins, outs = [n for n, _ in lengths], [o for _, o in lengths]
    return {"input_len_mean": statistics.fmean(ins), "input_len_min": min(ins), "input_len_max": max(ins),
            "output_len_mean": statistics.fmean(outs), "output_len_min": min(outs), "output_len_max": max(outs)}


@functools.lru_cache(maxsize=4)
def _local(path: str) -> LocalTokenizer:
    from tokenbench.workload.local_tokenizer import LocalTokenizer  # only with --tokenizer DIR
    return LocalTokenizer(path)


def _tokenizer_file(path: str | None) -> Path | None:
    """--tokenizer's tokenizer.json, or None (none given, or none there)."""
    if not path:
        return None
    from tokenbench.workload.local_tokenizer import tokenizer_file
    return tokenizer_file(path)


def tokenizer_for(t: Target, wl: Workload) -> Tokenizer:
    """The local tokenizer when --tokenizer names a directory with tokenizer.json, else the server's
    /tokenize (with a fix that fits this workload when the server has none)."""
    path, file = wl.tokenizer_path, _tokenizer_file(wl.tokenizer_path)
    if path and file and (wl.api == "chat" or wl.prompt_as_text
                                          or wl.kind in ("sharegpt", "jsonl", "text", "sessions")):
        return _local(path)
    hint = "pass --tokenizer DIR (the model's Hugging Face directory, with tokenizer.json)"
    if path and not file:
        hint = f"{path} has no tokenizer.json: pass the model's Hugging Face directory with --tokenizer"
    if wl.api == "chat" and wl.kind in ("random", "prefix", "image", "sessions") and t.token_ids:
        hint += ", or use --api completions (token-id prompts need no tokenizer)"
    return ServerTokenizer(t.base_url, t.model, t.api_key, hint)


def as_sent(t: Target, wl: Workload) -> Workload:
    """The workload as the server takes it: completions prompts as text of exact length (prompt_as_text) where
    the server refuses token ids (load/probe.py)."""
    if wl.api == "completions" and not wl.prompt_as_text and not t.token_ids:
        return wl.model_copy(update={"prompt_as_text": True})
    return wl


def _new_cell(t: Target, wl: Workload, key: str) -> _Cell:
    """The cell's context; for text prompts over completions, with the server's special tokens measured."""
    sent = as_sent(t, wl)
    c = _Cell(t, sent, key, tokenizer_for(t, sent), text_forced=sent.prompt_as_text and not wl.prompt_as_text)
    wl = sent
    if wl.prompt_as_text:
        c.special = _special_tokens(c)
    return c


def build_cell(t: Target, wl: Workload, key: str, n_warm: int, n_meas: int | None,
               duration_s: float | None = None) -> CellPrompts:
    """The cell's prompts. `n_meas` None: as many as the source holds (a trace: every row kept; random
    prompts: without end, the load's duration decides); `duration_s` cuts a trace to the rows due before
    it. Random and trace prompts are made one by one as the measured phase takes them."""
    c = _new_cell(t, wl, key)
    wl = c.wl
    d = KINDS[wl.kind](c, n_warm, n_meas, duration_s)
    warm: list[Prompt]
    meas: Iterable[Prompt]
    facts: dict
    if isinstance(d.measure, list) and not d.warmup and not d.measure:
        warm, meas, facts = [], [], {}
    elif wl.api == "chat":
        warm, meas, facts = _chat_prompts(c, d)
    else:
        warm, meas, facts = [_completion_prompt(x) for x in d.warmup], map(_completion_prompt, d.measure), {}
        meas = list(meas) if isinstance(d.measure, list) else meas
    facts = {**d.facts, **facts}
    if not isinstance(c.tok, ServerTokenizer):        # the local one (tokenizer_for)
        facts["tokenizer"] = f"local {getattr(c.tok, 'source', '')}"
    if isinstance(meas, list):
        lengths = [(p.input_len, p.output_len) for p in meas]
        if lengths and not wl.fixed_lengths:
            facts.update(_length_facts(lengths))
    told = WorkloadFacts.model_validate({"workload": wl.kind, **facts} if wl.kind != "random" else facts)
    count = len(meas) if isinstance(meas, list) else (len(d.offsets_ns) if d.offsets_ns is not None else n_meas)
    return CellPrompts(warmup=warm, measure=meas, offsets_ns=d.offsets_ns,
                       facts=told.without_lengths() if wl.fixed_lengths else told, notes=d.notes, measure_count=count,
                       length_means=_means(told))


def _means(facts: WorkloadFacts) -> tuple[int, int] | None:
    """The rounded mean lengths asked, when they varied."""
    if facts.input_len_mean is None or facts.output_len_mean is None:
        return None
    return round(facts.input_len_mean), round(facts.output_len_mean)
