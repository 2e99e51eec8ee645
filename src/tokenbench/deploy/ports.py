"""The port an engine will listen on: a free one, or a check that a fixed one can be listened on now.

A port is taken when a socket LISTENs there (or holds it bound). The TIME_WAIT connections a stopped
engine leaves for about 60 s are not: engines listen with SO_REUSEADDR (uvicorn for vLLM and SGLang,
cpp-httplib for llama.cpp, docker-proxy), so the kernel lets the next one bind over them, and the check
binds the same way. When the port is really taken, the kernel's socket table names the listener (pid
and command; a tokenbench deployment by its id); a server that listened without SO_REUSEADDR leaves
TIME_WAIT sockets that do block a new bind, and the error says so.
"""

from __future__ import annotations

import errno
import os
import socket
from dataclasses import dataclass

import psutil

from tokenbench.deploy import state
from tokenbench.errors import DeployError
from tokenbench.spec.ports import PortRange

COMMAND_CHARS = 72          # of the listener's command line shown in the error
OTHER_PORT = "pick another with --set port=N, or drop `port` to get a free one"


@dataclass(frozen=True)
class Listener:
    """A process listening on a port, as far as this user may see it (pid None: another user's)."""
    address: str
    pid: int | None = None
    command: str | None = None
    deployment: str | None = None       # the id of the tokenbench deployment it belongs to

    def describe(self) -> str:
        if not self.pid:
            return f"a process of another user listens on {self.address}"
        whose = f"deployment {self.deployment}, " if self.deployment else ""
        return f"{self.command or 'a process'} ({whose}pid {self.pid}) listens on {self.address}"

    def stop_hint(self) -> str:
        if self.deployment:
            return f"stop it with `tokenbench deploy down {self.deployment}`"
        return f"stop it (`kill {self.pid}`)" if self.pid else "stop it"


def free_port(host: str, within: PortRange | None = None) -> int:
    """A port free on `host` now: any (the kernel's choice), or the first of `within` that a socket can bind
    (as an engine binds it: TIME_WAIT is free); DeployError naming the range when none is."""
    if within is None or within.any:
        with socket.socket(_family(host), socket.SOCK_STREAM) as s:
            s.bind((host, 0))
            return s.getsockname()[1]
    for port in within:
        with socket.socket(_family(host), socket.SOCK_STREAM) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind((host, port))
            except OSError:
                continue
            return port
    raise DeployError(f"no port of {within.text} is free on {host}",
                      "give a wider range with --ports LO-HI, or stop what listens there")


def check_port(host: str, port: int) -> None:
    """DeployError before launching when an engine could not listen on host:port; TIME_WAIT is free."""
    with socket.socket(_family(host), socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError as exc:
            raise _refusal(host, port, exc) from None


def listener(port: int) -> Listener | None:
    """Who LISTENs on this TCP port (any address, IPv4 or IPv6), or None when no visible socket does."""
    found = [c for c in _sockets(port) if c.status == psutil.CONN_LISTEN]
    if not found:
        return None
    first = next((c for c in found if c.pid), found[0])
    return Listener(_address(first.laddr.ip, port), first.pid, _command(first.pid), _deployment(first.pid))


def _refusal(host: str, port: int, exc: OSError) -> DeployError:
    if exc.errno == errno.EADDRNOTAVAIL:
        return DeployError(f"cannot listen on {host}:{port}: {host} is not an address of this host",
                           "set `host` to one of its addresses (127.0.0.1, 0.0.0.0 for all)")
    if exc.errno == errno.EACCES:
        return DeployError(f"cannot listen on {host}:{port}: ports below 1024 need privileges",
                           OTHER_PORT)
    holder = listener(port)
    if holder is not None:
        return DeployError(f"port {port} on {host} is already in use: {holder.describe()}",
                           f"{holder.stop_hint()}, or {OTHER_PORT}")
    if _states(port) & {psutil.CONN_TIME_WAIT, psutil.CONN_FIN_WAIT2}:
        return DeployError(f"port {port} on {host} is held by closing connections of a server that listened "
                           "without SO_REUSEADDR (nothing listens there now)",
                           f"wait about 60 s for the kernel to release them, or {OTHER_PORT}")
    return DeployError(f"port {port} on {host} is already in use ({exc.strerror}), by a socket that "
                       "does not listen", f"find it with `ss -tanp 'sport = :{port}'`, or {OTHER_PORT}")


def _states(port: int) -> set[str]:
    return {c.status for c in _sockets(port)}


def _sockets(port: int) -> list:
    """The kernel's TCP sockets whose local port is `port` (pids only of this user's, unless root)."""
    try:
        return [c for c in psutil.net_connections(kind="tcp") if c.laddr and c.laddr.port == port]
    except (psutil.Error, OSError):
        return []


def _command(pid: int | None) -> str | None:
    if not pid:
        return None
    try:
        proc = psutil.Process(pid)
        argv = proc.cmdline()
        name = proc.name()
    except psutil.Error:
        return None
    if not argv:
        return name
    text = " ".join([os.path.basename(argv[0]), *argv[1:]])
    text = " ".join(text.split())              # one line, whatever the arguments held
    return text if len(text) <= COMMAND_CHARS else text[:COMMAND_CHARS - 3] + "..."


def _deployment(pid: int | None) -> str | None:
    """The recorded deployment whose process group holds pid (an engine's workers listen too)."""
    if not pid:
        return None
    try:
        group = os.getpgid(pid)
    except OSError:
        return None
    found = [s.id for s in state.load_all(state.state_dir()) if pid == s.pid or group == s.pgid]
    return found[0] if found else None


def _address(ip: str, port: int) -> str:
    return f"[{ip}]:{port}" if ":" in ip else f"{ip}:{port}"


def _family(host: str) -> int:
    return socket.AF_INET6 if ":" in host else socket.AF_INET
