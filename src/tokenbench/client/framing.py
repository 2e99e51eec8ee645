"""HTTP/1.1 response framing without I/O: status line, headers, then a body delimited by chunked
transfer encoding, Content-Length, or connection close. `feed(bytes) -> body bytes`; `complete`.

A chunked body is read in one pass over each read, by position (no copy of what is left), so a read that
carries many chunks (a client that fell behind) costs the same per chunk as a read of one; an unfinished
line (a size line, the CRLF after a chunk's data, a trailer) is carried to the next read."""

from __future__ import annotations

import string

MAX_HEAD = 64 * 1024
MAX_LINE = 64 * 1024          # a chunk-size or trailer line longer than this is no HTTP
HEX = frozenset(string.hexdigits)

_SIZE, _DATA, _DATA_CRLF, _TRAILER = range(4)     # chunked: the state between two reads


class FramingError(Exception):
    pass


class ResponseFramer:
    def __init__(self) -> None:
        self._buf = bytearray()              # the head, until its blank line
        self.status: int | None = None
        self.headers: dict[str, str] = {}
        self.head_done = False
        self.complete = False
        self.keep_alive = True
        self._chunked = False
        self._remaining: int | None = None   # body bytes left (content-length) or in the current chunk
        self._state = _SIZE
        self._carry = b""                    # chunked: an unfinished line from the previous read

    def feed(self, data: bytes) -> bytes:
        if self.complete:
            return b""
        if self._chunked:
            if self._state == _SIZE and not self._carry:
                nl = data.find(b"\r\n")
                size = _SIZES.get(data[:nl]) if nl > 0 else None
                if size and len(data) == nl + size + 4 and data.endswith(b"\r\n"):
                    return data[nl + 2:-2]        # the usual read: exactly one whole chunk
            return self._chunks(data)
        if not self.head_done:
            return self._head(data)
        return self._plain_body(data)

    @property
    def between_chunks(self) -> bool:
        """A chunked body between two chunks (nothing carried): a read of one whole chunk, `a7\\r\\n...\\r\\n`
        with a size line in CHUNK_SIZES, is all body and leaves the framer as it is, so a caller may take it
        without feeding it (the transport's usual read)."""
        return self._chunked and self._state == _SIZE and not self._carry and not self.complete

    def eof(self) -> None:
        """The peer closed: a body delimited by close is complete; anything else is truncated."""
        if self.head_done and not self._chunked and self._remaining is None:
            self.complete = True

    def _head(self, data: bytes) -> bytes:
        self._buf += data
        end = self._buf.find(b"\r\n\r\n")
        if end < 0:
            if len(self._buf) > MAX_HEAD:
                raise FramingError("response headers larger than 64 KiB")
            return b""
        lines = bytes(self._buf[:end]).decode("latin-1").split("\r\n")
        rest = bytes(self._buf[end + 4:])
        self._buf = bytearray()
        parts = lines[0].split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/") or not _decimal(parts[1]):
            raise FramingError(f"not an HTTP response: {lines[0][:80]!r}")
        self.status = int(parts[1])
        for line in lines[1:]:
            name, _, value = line.partition(":")
            self.headers[name.strip().lower()] = value.strip()
        self._setup(parts[0])
        self.head_done = True
        if self.complete or not rest:
            return b""
        return self._chunks(rest) if self._chunked else self._plain_body(rest)

    def _setup(self, version: str) -> None:
        conn = self.headers.get("connection", "").lower()
        self.keep_alive = conn != "close" and not (version == "HTTP/1.0" and conn != "keep-alive")
        if "chunked" in self.headers.get("transfer-encoding", "").lower():
            self._chunked = True
        elif "content-length" in self.headers:
            value = self.headers["content-length"]
            if not _decimal(value):
                raise FramingError(f"bad Content-Length {value[:40]!r}")
            self._remaining = int(value)
            self.complete = self._remaining == 0
        elif self.status in (204, 304) or 100 <= (self.status or 0) < 200:
            self.complete = True
        else:
            self.keep_alive = False           # delimited by close

    def _plain_body(self, data: bytes) -> bytes:
        if self._remaining is not None:
            data = data[: self._remaining]
            self._remaining -= len(data)
            self.complete = self._remaining == 0
        return data

    def _chunks(self, data: bytes) -> bytes:
        """Every chunk in `data` (after what the previous read left unfinished), by position."""
        if self._carry:
            data, self._carry = self._carry + data, b""
        out: list[bytes] = []
        pos, end, state = 0, len(data), self._state
        while pos < end and not self.complete:
            if state == _DATA:
                assert self._remaining is not None        # set by the chunk-size line before _DATA
                stop = min(pos + self._remaining, end)
                out.append(data[pos:stop])
                self._remaining -= stop - pos
                pos = stop
                if self._remaining:
                    break
                state = self._state = _DATA_CRLF
            if state == _DATA_CRLF and data.startswith(b"\r\n", pos):    # the usual end of a chunk's data
                pos += 2
                state = self._state = _SIZE
            nl = data.find(b"\r\n", pos)
            if state == _SIZE and nl > pos and (size := _SIZES.get(data[pos:nl])):   # a size seen before
                self._remaining, pos = size, nl + 2
                state = self._state = _DATA
                continue
            if nl < 0:
                self._carry = data[pos:]
                if len(self._carry) > MAX_LINE:
                    raise FramingError("a chunk line longer than 64 KiB")
                break
            self._line(data[pos:nl])
            pos, state = nl + 2, self._state
        return b"".join(out)

    def _line(self, line: bytes) -> None:
        if self._state == _DATA_CRLF:
            self._state = _SIZE
        elif self._state == _SIZE:
            size = _size(line)
            self._remaining = size
            self._state = _DATA if size else _TRAILER
        elif not line:                        # _TRAILER: its blank line ends the body
            self.complete = True


def _size(line: bytes) -> int:
    """A chunk-size line's size (FramingError if it is none). Servers repeat a few lines, so the valid
    ones are remembered (a bounded number of them) for the one-chunk read of `feed`."""
    size = _SIZES.get(line)
    if size is not None:
        return size
    digits = line.split(b";", 1)[0].strip().decode("latin-1")
    if not digits or not HEX.issuperset(digits):   # int(.., 16) would take "-5", "0x5", "+5"
        raise FramingError(f"bad chunk size line {line[:40]!r}")
    size = int(digits, 16)
    if len(_SIZES) < 4096:
        _SIZES[line] = size
    return size


_SIZES: dict[bytes, int] = {}
CHUNK_SIZES = _SIZES        # the chunk-size lines seen, and their sizes (see `between_chunks`)


def _decimal(text: str) -> bool:
    """Plain ASCII digits only: str.isdigit() also accepts '²', which int() refuses, and int() takes '-1'."""
    return text.isascii() and text.isdigit()
