"""Images for vision-language workloads, sent as OpenAI `image_url` parts with `data:` URIs.

Synthetic images look like a page of text: a white background with lines of dark "words" at seeded
random places, so every image is distinct (no image cache can serve a repeat) and compresses like a
scanned document does. They have a given width, height and format and are encoded with the standard
library only: PNG (8-bit RGB, zlib) or BMP (24-bit, uncompressed). Local files (one file, or every
image in a folder) are sent as they are, with the MIME type read from their magic bytes.
"""

from __future__ import annotations

import base64
import random
import struct
import zlib
from dataclasses import dataclass
from pathlib import Path

from tokenbench.errors import UsageError

MAGIC = ((b"\x89PNG\r\n\x1a\n", "image/png"), (b"\xff\xd8\xff", "image/jpeg"), (b"GIF87a", "image/gif"),
         (b"GIF89a", "image/gif"), (b"BM", "image/bmp"))
MIME = {"png": "image/png", "bmp": "image/bmp"}


@dataclass(frozen=True, slots=True)
class Image:
    data: bytes
    mime: str
    name: str = ""

    def uri(self) -> str:
        return data_uri(self.data, self.mime)


def data_uri(data: bytes, mime: str) -> str:
    return f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"


def sniff_mime(data: bytes) -> str | None:
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return next((mime for magic, mime in MAGIC if data.startswith(magic)), None)


def _png_chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))


def png(width: int, height: int, rgb: bytes) -> bytes:
    """An 8-bit RGB PNG of `rgb` (width*height*3 bytes, rows top to bottom), filter 0 on every row."""
    stride = width * 3
    raw = b"".join(b"\x00" + rgb[y * stride:(y + 1) * stride] for y in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + _png_chunk(b"IHDR", header) + _png_chunk(b"IDAT", zlib.compress(raw, 6))
            + _png_chunk(b"IEND", b""))


def bmp(width: int, height: int, rgb: bytes) -> bytes:
    """A 24-bit BMP of `rgb` (rows top to bottom; BMP stores them bottom-up as BGR, padded to 4 bytes)."""
    stride, pad = width * 3, (-width * 3) % 4
    rows = []
    for y in range(height - 1, -1, -1):
        row = bytearray(rgb[y * stride:(y + 1) * stride])
        row[0::3], row[2::3] = row[2::3], row[0::3]
        rows.append(bytes(row) + b"\x00" * pad)
    pixels = b"".join(rows)
    info = struct.pack("<IiiHHIIiiII", 40, width, height, 1, 24, 0, len(pixels), 2835, 2835, 0, 0)
    return b"BM" + struct.pack("<IHHI", 14 + len(info) + len(pixels), 0, 0, 14 + len(info)) + info + pixels


ENCODERS = {"png": png, "bmp": bmp}


WHITE = b"\xff\xff\xff"
LINE_PX, GAP_PX, MARGIN = 10, 8, 0.06     # text line height, space between lines, page margin (share)


def _text_line(rng: random.Random, width: int) -> bytes:
    """One row of pixels through a line of words: dark runs of random length and ink, white gaps."""
    left, right = int(width * MARGIN), width - int(width * MARGIN)
    out, x = [WHITE * left], left
    while x < right:
        gap, word = rng.randint(4, 10), rng.randint(8, 60)
        word = max(0, min(word, right - x - gap))
        ink = bytes((rng.randint(0, 90),)) * 3
        out += [WHITE * gap, ink * word]
        x += gap + word
    row = b"".join(out)
    return row[:width * 3] + WHITE * (width - len(row) // 3)


def page(rng: random.Random, width: int, height: int) -> bytes:
    """RGB pixels (rows top to bottom) of a synthetic page of text."""
    blank = WHITE * width
    rows, y = [blank] * int(height * MARGIN), int(height * MARGIN)
    while y < height:
        line = _text_line(rng, width) if rng.random() > 0.1 else blank    # some lines stay empty
        rows += [line] * LINE_PX + [blank] * GAP_PX
        y += LINE_PX + GAP_PX
    return b"".join(rows[:height]) + blank * (height - len(rows))


def synthetic(rng: random.Random, width: int, height: int, fmt: str) -> Image:
    """A seeded synthetic page of this size, encoded as `fmt` (png or bmp)."""
    return Image(ENCODERS[fmt](width, height, page(rng, width, height)), MIME[fmt], f"{width}x{height}.{fmt}")


def load_files(path: str | Path) -> list[Image]:
    """An image file, or the images in a folder (sorted by name; other files are ignored)."""
    p = Path(path)
    if not p.exists():
        raise UsageError(f"image path '{p}' not found", "pass an image file or a folder of images with --dataset-path")
    files = sorted(f for f in p.iterdir() if f.is_file()) if p.is_dir() else [p]
    out = []
    for f in files:
        data = f.read_bytes()
        if mime := sniff_mime(data):
            out.append(Image(data, mime, f.name))
        elif not p.is_dir():
            raise UsageError(f"{f} is not a PNG, JPEG, GIF, WebP or BMP image", "pass an image file")
    if not out:
        raise UsageError(f"no PNG, JPEG, GIF, WebP or BMP image in {p}", "put image files in that folder")
    return out
