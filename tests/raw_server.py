"""A raw loopback server for the faults HTTP libraries see: it accepts each connection, reads the request,
writes `reply` (maybe nothing, maybe an answer cut off in mid-body) and closes. `reply` may be changed while
it runs."""

from __future__ import annotations

import socket
import threading


class RawServer:
    def __init__(self, reply: bytes) -> None:
        self.reply, self.sock = reply, socket.create_server(("127.0.0.1", 0))
        self.port, self.accepted = self.sock.getsockname()[1], 0
        self.url = f"http://127.0.0.1:{self.port}"
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted += 1
            conn.recv(65536)
            conn.sendall(self.reply)
            conn.close()

    def close(self) -> None:
        self.sock.close()
