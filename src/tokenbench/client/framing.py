"""HTTP/1.1 response framing without I/O: status line, headers, then a body delimited by chunked
transfer encoding, Content-Length, or connection close. `feed(bytes) -> body bytes`; `complete`."""

from __future__ import annotations

import string

MAX_HEAD = 64 * 1024
HEX = frozenset(string.hexdigits)
HEX_BYTES = frozenset(string.hexdigits.encode())


class FramingError(Exception):
    pass


class ResponseFramer:
    def __init__(self) -> None:
        self._buf = bytearray()
        self.status: int | None = None
        self.headers: dict[str, str] = {}
        self.head_done = False
        self.complete = False
        self.keep_alive = True
        self._chunked = False
        self._remaining: int | None = None   # body bytes left (content-length) or in the current chunk
        self._state = "size"                 # chunked: size | data | data_crlf | trailer

    def feed(self, data: bytes) -> bytes:
        if self.complete:
            return b""
        if self._chunked and not self._buf:
            if self._state == "size":
                nl = data.find(b"\r\n")
                size = _SIZES.get(data[:nl]) if nl > 0 else None
                if size and len(data) == nl + size + 4 and data.endswith(b"\r\n"):
                    return data[nl + 2:-2]        # the usual read: exactly one whole chunk
            body, data = self._quick(data)
            return body + self._slow(data) if data else body
        return self._slow(data)

    def _quick(self, data: bytes) -> tuple[bytes, bytes]:
        """Whole chunks, and a chunk's data split across reads, taken without the state machine's
        copies: (body, the bytes left for the state machine, which judges anything else)."""
        out: list[bytes] = []
        while data:
            if self._state == "data":
                assert self._remaining is not None
                take = data[:self._remaining]
                out.append(take)
                self._remaining -= len(take)
                data = data[len(take):]
                if not self._remaining:
                    self._state = "data_crlf"
            elif self._state == "data_crlf" and data.startswith(b"\r\n"):
                self._state, data = "size", data[2:]
            elif self._state == "size" and (nl := data.find(b"\r\n")) > 0 and (size := _size(data[:nl])):
                self._remaining, self._state, data = size, "data", data[nl + 2:]
            else:
                break
        return b"".join(out), data

    def _slow(self, data: bytes) -> bytes:
        self._buf += data
        if not self.head_done and not self._head():
            return b""
        if self._chunked:
            return self._chunked_body()
        return self._plain_body()

    def eof(self) -> None:
        """The peer closed: a body delimited by close is complete; anything else is truncated."""
        if self.head_done and not self._chunked and self._remaining is None:
            self.complete = True

    def _head(self) -> bool:
        end = self._buf.find(b"\r\n\r\n")
        if end < 0:
            if len(self._buf) > MAX_HEAD:
                raise FramingError("response headers larger than 64 KiB")
            return False
        lines = bytes(self._buf[:end]).decode("latin-1").split("\r\n")
        del self._buf[: end + 4]
        parts = lines[0].split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/") or not _decimal(parts[1]):
            raise FramingError(f"not an HTTP response: {lines[0][:80]!r}")
        self.status = int(parts[1])
        for line in lines[1:]:
            name, _, value = line.partition(":")
            self.headers[name.strip().lower()] = value.strip()
        self._setup(parts[0])
        self.head_done = True
        return True

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

    def _plain_body(self) -> bytes:
        data = bytes(self._buf)
        self._buf.clear()
        if self._remaining is not None:
            data = data[: self._remaining]
            self._remaining -= len(data)
            self.complete = self._remaining == 0
        return data

    def _chunked_body(self) -> bytes:
        out = bytearray()
        while self._buf and not self.complete:
            if self._state == "data":
                assert self._remaining is not None        # set by the chunk-size line before "data"
                take = bytes(self._buf[: self._remaining])
                del self._buf[: len(take)]
                out += take
                self._remaining -= len(take)
                if self._remaining == 0:
                    self._state = "data_crlf"
                continue
            nl = self._buf.find(b"\r\n")
            if nl < 0:
                break
            line = bytes(self._buf[:nl])
            del self._buf[: nl + 2]
            self._line(line)
        return bytes(out)

    def _line(self, line: bytes) -> None:
        if self._state == "data_crlf":
            self._state = "size"
        elif self._state == "size":
            digits = line.split(b";", 1)[0].strip().decode("latin-1")
            if not digits or not HEX.issuperset(digits):   # int(.., 16) would take "-5", "0x5", "+5"
                raise FramingError(f"bad chunk size line {line[:40]!r}")
            size = int(digits, 16)
            self._remaining = size
            self._state = "data" if size else "trailer"
        elif self._state == "trailer" and not line:
            self.complete = True


def _size(line: bytes) -> int:
    """A chunk-size line's size; 0 for the last chunk or a line the state machine must judge. Servers
    repeat a few sizes, so they are remembered (a bounded number of them)."""
    size = _SIZES.get(line)
    if size is None:
        digits = line.split(b";", 1)[0].strip()
        size = int(digits, 16) if digits and HEX_BYTES.issuperset(digits) else 0
        if len(_SIZES) < 4096:
            _SIZES[line] = size
    return size


_SIZES: dict[bytes, int] = {}


def _decimal(text: str) -> bool:
    """Plain ASCII digits only: str.isdigit() also accepts '²', which int() refuses, and int() takes '-1'."""
    return text.isascii() and text.isdigit()
