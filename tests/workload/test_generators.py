"""Workload generators, pure and seeded: dataset readers, filters and selection, shared prefixes,
synthetic images, trace schedules, and the runner's explicit arrival offsets (fake clock)."""

from __future__ import annotations

import asyncio
import json
import random
import struct
import zlib
from pathlib import Path

import pytest

from tokenbench.client.records import RawExchange
from tokenbench.client.request import Prompt, prepare
from tokenbench.errors import UsageError
from tokenbench.load.runner import PhasePlan, run_phase
from tokenbench.spec.bench import Load
from tokenbench.workload import images, jsonl, prefix, sharegpt, trace_replay
from tokenbench.workload.chat import exact_text
from tokenbench.workload.dataset import Filters, TextEntry, select
from tokenbench.workload.vocab import Vocab

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
VOCAB = Vocab.with_margins(32000, "test")


class WordTokenizer:
    """One token per whitespace word; `w<N>` is token N (as the reference server), so decode round-trips."""

    def encode(self, text: str) -> list[int]:
        return [int(w[1:]) if w[1:].isdigit() and w[0] == "w" else 3 + zlib.crc32(w.encode()) % 31997
                for w in text.split()]

    def decode(self, ids: list[int]) -> str:
        return " ".join(f"w{i}" for i in ids)


TOK = WordTokenizer()


def write(tmp_path: Path, name: str, lines: list) -> Path:
    path = tmp_path / name
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


# ---- ShareGPT ----

def conv(*turns: tuple[str, str]) -> dict:
    return {"conversations": [{"from": r, "value": v} for r, v in turns]}


def test_sharegpt_example_file_keeps_user_then_reply_records():
    rows = sharegpt.read_sharegpt(EXAMPLES / "sharegpt-mini.json")
    assert len(rows) == 12                     # the system-first and the one-turn records are skipped
    assert rows[0].prompt.startswith("What is the capital of France")
    assert rows[0].completion.startswith("Paris") and rows[0].output_len is None


def test_sharegpt_jsonl_and_role_content_keys(tmp_path):
    path = write(tmp_path, "c.jsonl", [
        conv(("human", "a b c"), ("gpt", "d e")),
        {"messages": [{"role": "user", "content": "x y"}, {"role": "assistant", "content": "z"}]},
        conv(("gpt", "reply first"), ("human", "no")),
        {"conversations": "not a list"},
        "not an object",
    ])
    rows = sharegpt.read_sharegpt(path)
    assert [(r.prompt, r.completion) for r in rows] == [("a b c", "d e"), ("x y", "z")]


def test_sharegpt_without_usable_records_names_the_fix(tmp_path):
    with pytest.raises(UsageError, match="no ShareGPT conversation"):
        sharegpt.read_sharegpt(write(tmp_path, "bad.jsonl", [conv(("human", "only one turn"))]))


def test_missing_file_and_bad_json_name_file_and_line(tmp_path):
    with pytest.raises(UsageError, match="not found"):
        sharegpt.read_sharegpt(tmp_path / "absent.json")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"prompt": "ok"}\n{broken\n')
    with pytest.raises(UsageError, match=r"bad.jsonl:2: not valid JSON"):
        jsonl.read_prompts(bad)


# ---- prompt JSONL ----

def test_jsonl_prompt_and_output_length_fields(tmp_path):
    rows = jsonl.read_prompts(write(tmp_path, "p.jsonl", [
        {"prompt": "a b", "output_len": 5}, {"text": "c", "max_tokens": 3}, {"prompt": "d"}]))
    assert rows == [TextEntry("a b", 5), TextEntry("c", 3), TextEntry("d", None)]
    assert len(jsonl.read_prompts(EXAMPLES / "prompts.jsonl")) == 8


@pytest.mark.parametrize("line,msg", [({"text_": "x"}, "no string 'prompt'"), ({"prompt": "x", "output_len": 0},
                                                                                 "not a positive integer")])
def test_jsonl_bad_lines(tmp_path, line, msg):
    with pytest.raises(UsageError, match=msg):
        jsonl.read_prompts(write(tmp_path, "p.jsonl", [{"prompt": "fine"}, line]))


# ---- filters and selection ----

def test_filters_bound_both_lengths_and_the_context():
    f = Filters(min_input_len=2, max_input_len=5, min_output_len=1, max_output_len=4, max_total=8)
    assert f.accepts(2, 4) and f.accepts(5, 3)
    assert not f.accepts(1, 2) and not f.accepts(6, 1) and not f.accepts(3, 5) and not f.accepts(5, 4)
    assert not Filters().accepts(0, 3) and not Filters().accepts(3, 0)


ENTRIES = [TextEntry(" ".join(f"w{100 + j}" for j in range(n)), completion=" ".join(["x"] * m))
           for n, m in [(3, 2), (8, 4), (1, 9), (5, 5), (12, 1), (4, 3)]]


def test_select_is_seeded_and_measures_lengths_with_the_tokenizer():
    a = select(ENTRIES, TOK, random.Random(1), 4, Filters(), "src")
    b = select(ENTRIES, TOK, random.Random(1), 4, Filters(), "src")
    assert a.drafts == b.drafts and a.examined == 4 and a.reused == 0
    for d in a.drafts:
        assert d.input_len == len(d.ids) == len(d.text.split())
        src = next(e for e in ENTRIES if e.prompt == d.text)
        assert d.output_len == len(src.completion.split())          # from the reference reply
        assert d.ids == tuple(TOK.encode(d.text))


def test_select_filters_forces_output_and_reuses_when_short():
    sel = select(ENTRIES, TOK, random.Random(0), 5, Filters(min_input_len=3, max_input_len=8, forced_output=7), "src")
    assert {d.input_len for d in sel.drafts} <= {3, 4, 5, 8} and all(d.output_len == 7 for d in sel.drafts)
    assert sel.examined == 6 and sel.rejected == 2 and sel.reused == 1
    assert sel.drafts[4] == sel.drafts[0] and "repeat" in sel.notes[0]
    with pytest.raises(UsageError, match="none of 6 entries passes"):
        select(ENTRIES, TOK, random.Random(0), 2, Filters(min_input_len=50), "src")


def test_select_without_any_output_length_rejects_the_entry():
    sel = select([TextEntry("a b"), TextEntry("c", output_len=2)], TOK, random.Random(0), 2, Filters(), "s")
    assert sel.rejected == 1 and sel.reused == 1
    assert [(d.text, d.output_len) for d in sel.drafts] == [("c", 2), ("c", 2)]


# ---- shared prefixes ----

def test_prefix_ids_share_the_group_prefix_and_have_exact_length():
    heads = prefix.prefix_ids(random.Random(3), 3, 10, VOCAB)
    drafts = prefix.id_drafts(heads, random.Random(4), [(16, 5)] * 7, VOCAB)
    assert len(set(heads)) == 3
    for i, d in enumerate(drafts):
        assert len(d.ids) == d.input_len == 16 and d.output_len == 5
        assert d.ids[:10] == heads[i % 3]
    assert len({d.ids[10:] for d in drafts}) == 7                      # every suffix is unique
    assert prefix.id_drafts(heads, random.Random(4), [(16, 5)] * 7, VOCAB) == drafts


def test_prefix_texts_are_exact_as_a_whole():
    heads = prefix.prefix_texts(TOK, random.Random(5), 2, 6, VOCAB)
    drafts = prefix.text_drafts(TOK, heads, random.Random(6), [(9, 2)] * 4, VOCAB, 6)
    for i, d in enumerate(drafts):
        assert len(TOK.encode(d.text)) == 9 and d.text.startswith(heads[i % 2] + " ")


def test_exact_text_with_a_head_counts_the_tail_only():
    tail = exact_text(TOK, random.Random(0), 5, VOCAB, head="w10 w11", head_len=2)
    assert len(TOK.encode(tail)) == 5


# ---- images ----

def png_pixels(data: bytes) -> tuple[int, int, bytes]:
    """Minimal PNG reader for the tests: checks every chunk CRC, returns (width, height, raw scanlines)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, size = 8, b"", None
    while pos < len(data):
        (n,) = struct.unpack(">I", data[pos:pos + 4])
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + n]
        assert struct.unpack(">I", data[pos + 8 + n:pos + 12 + n])[0] == zlib.crc32(kind + body)
        if kind == b"IHDR":
            size = struct.unpack(">II", body[:8])
            assert body[8:10] == b"\x08\x02"                            # 8-bit RGB
        idat += body if kind == b"IDAT" else b""
        pos += 12 + n
    return size[0], size[1], zlib.decompress(idat)


def test_synthetic_png_is_valid_seeded_and_distinct():
    a = images.synthetic(random.Random(1), 64, 40, "png")
    w, h, raw = png_pixels(a.data)
    assert (w, h) == (64, 40) and len(raw) == 40 * (1 + 64 * 3)
    assert all(raw[y * (1 + 64 * 3)] == 0 for y in range(40))          # filter byte 0 on every row
    assert a.mime == "image/png" and images.sniff_mime(a.data) == "image/png"
    assert images.synthetic(random.Random(1), 64, 40, "png") == a
    assert images.synthetic(random.Random(2), 64, 40, "png").data != a.data


def test_synthetic_bmp_header_and_size():
    b = images.synthetic(random.Random(1), 5, 3, "bmp").data
    assert b[:2] == b"BM" and struct.unpack("<I", b[2:6])[0] == len(b)
    width, height, planes, bits = struct.unpack("<iiHH", b[18:30])
    assert (width, height, planes, bits) == (5, 3, 1, 24)
    assert len(b) == 54 + 3 * 16                                       # rows of 15 bytes padded to 16


def test_bmp_pixels_are_bgr_bottom_up():
    rgb = bytes([1, 2, 3, 4, 5, 6])                                    # 1 x 2: top (1,2,3), bottom (4,5,6)
    b = images.bmp(1, 2, rgb)
    assert b[54:] == bytes([6, 5, 4, 0, 3, 2, 1, 0])


def test_data_uri_and_local_files(tmp_path):
    assert images.data_uri(b"\x01\x02", "image/png") == "data:image/png;base64,AQI="
    (tmp_path / "a.png").write_bytes(images.synthetic(random.Random(0), 4, 4, "png").data)
    (tmp_path / "b.jpg").write_bytes(b"\xff\xd8\xff\xe0" + b"\x00" * 10)
    (tmp_path / "notes.txt").write_text("not an image")
    files = images.load_files(tmp_path)
    assert [(f.name, f.mime) for f in files] == [("a.png", "image/png"), ("b.jpg", "image/jpeg")]
    assert images.load_files(tmp_path / "a.png")[0].name == "a.png"
    with pytest.raises(UsageError, match="not a PNG"):
        images.load_files(tmp_path / "notes.txt")


def test_image_parts_follow_the_text_in_one_user_message():
    p = Prompt(token_ids=None, text="hello", input_len=1, output_len=2, expected_prompt_tokens=4,
               images=("data:image/png;base64,AA==",), image_bytes=1)
    req = prepare("http://h:1", "chat", "m", p, None)
    content = json.loads(req.body)["messages"][0]["content"]
    assert content == [{"type": "text", "text": "hello"},
                       {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA=="}}]
    assert (req.images, req.image_bytes) == (1, 1)
    plain = prepare("http://h:1", "chat", "m", Prompt(token_ids=None, text="hi", input_len=1, output_len=2,
                                                      expected_prompt_tokens=4), None)
    assert json.loads(plain.body)["messages"][0]["content"] == "hi" and plain.images == 0


# ---- traces ----

def test_trace_example_rows_offsets_and_time_scale():
    rows = trace_replay.read_trace(str(EXAMPLES / "trace-mini.jsonl"))
    assert len(rows) == 40 and rows == sorted(rows, key=lambda r: r.timestamp_ms)
    full, half = trace_replay.offsets_ns(rows, 1.0), trace_replay.offsets_ns(rows, 0.5)
    assert full[0] == 0 and full[-1] == round((rows[-1].timestamp_ms - rows[0].timestamp_ms) * 1e6)
    assert all(h == round(f / 2) for f, h in zip(full, half, strict=False))


def test_trace_sorts_ignores_hash_ids_and_accepts_short_names(tmp_path):
    path = write(tmp_path, "t.jsonl", [
        {"timestamp": 300, "input_length": 5, "output_length": 2, "hash_ids": [1, 2]},
        {"timestamp": 100.5, "input_len": 7, "output_len": 3},
        {"timestamp": 100.5, "input_length": 9, "output_length": 4}])
    rows = trace_replay.read_trace(str(path))
    assert [(r.timestamp_ms, r.input_len) for r in rows] == [(100.5, 7), (100.5, 9), (300, 5)]
    assert trace_replay.offsets_ns(rows, 2.0) == [0, 0, 399_000_000]


@pytest.mark.parametrize("line,msg", [({"input_length": 3, "output_length": 1}, "'timestamp' is None"),
                                      ({"timestamp": 0, "input_length": 0, "output_length": 1}, "'input_length'"),
                                      ({"timestamp": 0, "input_length": 3, "output_length": "2"}, "'output_length'")])
def test_trace_bad_rows_name_the_line(tmp_path, line, msg):
    with pytest.raises(UsageError, match=r"t.jsonl:2: " + msg):
        trace_replay.read_trace(str(write(tmp_path, "t.jsonl", [{"timestamp": 0, "input_length": 1, "output_length": 1},
                                                          line])))


def test_trace_select_filters_forces_and_cuts():
    rows = [trace_replay.TraceRow(t, n, 8) for t, n in [(0, 10), (100, 2000), (200, 30), (300, 40), (900, 50)]]
    r = trace_replay.select(rows, 1.0, Filters(max_total=1024), 4, num_prompts=None, duration_s=0.25)
    assert [x.input_len for x in r.rows] == [10, 30] and r.offsets_ns == [0, 200_000_000] and r.dropped == 1
    assert all(x.output_len == 4 for x in r.rows)
    r = trace_replay.select(rows, 0.1, Filters(), None, num_prompts=3)
    assert [x.input_len for x in r.rows] == [10, 2000, 30] and r.offsets_ns == [0, 10_000_000, 20_000_000]
    with pytest.raises(UsageError, match="no trace row"):
        trace_replay.select(rows, 1.0, Filters(max_input_len=1), None)


# ---- the runner's explicit offsets, on a fake clock ----

class FakeClock:
    def __init__(self) -> None:
        self.t = 1_000

    def now_ns(self) -> int:
        return self.t

    async def sleep_until(self, t_ns: int) -> None:
        self.t = max(self.t, t_ns)


def test_open_loop_follows_explicit_offsets_on_absolute_times():
    clock = FakeClock()
    reqs = [prepare("http://h:1", "completions", "m", Prompt(token_ids=(5,), text=None, input_len=1, output_len=1,
                                                             expected_prompt_tokens=1), None) for _ in range(4)]

    async def send(req, intended):
        return RawExchange(intended_ns=intended, sent_ns=clock.now_ns(), end_ns=clock.now_ns() + 5, status=500)

    offsets = [0, 0, 250, 1_000]
    run = asyncio.run(run_phase(send, reqs, PhasePlan("measure", Load(arrival="trace"), offsets=offsets), clock=clock))
    assert [r.intended_ns - 1_000 for r in run.records] == offsets
    with pytest.raises(ValueError, match="explicit arrival offsets"):
        asyncio.run(run_phase(send, reqs, PhasePlan("measure", Load(arrival="trace")), clock=clock))


def test_random_ids_are_randranges_draws():
    """random_ids writes randrange's rejection sampling out for speed: the same numbers, stream for stream."""
    import random

    from tokenbench.workload.random_ids import random_ids
    from tokenbench.workload.vocab import Vocab
    for low, high in [(0, 32000), (7, 8), (100, 151936), (3, 1 << 17)]:
        rng, ref = random.Random(f"s{low}"), random.Random(f"s{low}")
        got = [random_ids(rng, n, Vocab(size=high, low=low, high=high, source="t")) for n in (0, 1, 64, 300)]
        assert got == [tuple(ref.randrange(low, high) for _ in range(n)) for n in (0, 1, 64, 300)]
