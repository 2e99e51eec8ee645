"""What users type as a target: a URL, a URL without its scheme (`127.0.0.1:8000`, `gpu-box:30000/`),
or the name of a running deployment (its id or its profile, as `deploy status` lists them)."""

from __future__ import annotations

import re
import socket
from pathlib import Path
from urllib.parse import urlsplit

from tokenbench.deploy import state
from tokenbench.errors import UsageError

FIX = "give http://HOST:PORT, HOST:PORT, or the name of a running deployment (see `tokenbench deploy status`)"
_HOST_PORT = re.compile(r"^(\[[0-9a-fA-F:]+\]|[A-Za-z0-9_.-]+):\d{1,5}(/.*)?$")
_HOST = re.compile(r"^(localhost|[0-9.]+|[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)+)(/.*)?$")


def base_url(text: str, flag: str = "--base-url", directory: Path | None = None) -> str:
    """The server root to send to (no trailing slash); UsageError naming `flag` when it is none."""
    given = text.strip()
    if not given:
        raise UsageError(f"{flag} is empty", FIX)
    if "://" in given:
        return _checked(given, flag)
    found = _deployment(given, directory)
    if found:
        return found
    if _HOST_PORT.match(given) or _HOST.match(given):
        return _checked(f"http://{given}", flag)
    raise UsageError(f"{flag} {given!r} is neither a URL nor a running deployment", FIX)


def looks_like_url(text: str) -> bool:
    """A URL, or HOST:PORT without a scheme (not a profile name or a file)."""
    return "://" in text or bool(_HOST_PORT.match(text.strip()))


def _checked(url: str, flag: str) -> str:
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise UsageError(f"{flag} {url!r} is not a valid URL (host or port)", FIX) from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UsageError(f"{flag} {url!r} is not an http(s) URL with a host", FIX)
    if port == 0:
        raise UsageError(f"{flag} {url!r} has port 0", FIX)
    return url.rstrip("/")


def _deployment(name: str, directory: Path | None) -> str | None:
    running = [s for s in state.load_all(directory or state.state_dir()) if name in (s.id, s.profile)]
    if len(running) > 1:
        raise UsageError(f"{name!r} names {len(running)} running deployments",
                         f"use one id: {', '.join(s.id for s in running)}")
    return running[0].base_url if running else None


def on_this_host(url: str) -> bool:
    """Whether the URL's host is this machine (a loopback or one of its own addresses: one a socket can bind);
    False when it resolves to none of them, or not at all."""
    host = urlsplit(url).hostname or ""
    try:
        found = {info[4][0] for info in socket.getaddrinfo(host, None, type=socket.SOCK_DGRAM)}
    except OSError:
        return False
    return any(_bindable(str(address)) for address in found)


def _bindable(address: str) -> bool:
    with socket.socket(socket.AF_INET6 if ":" in address else socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.bind((address, 0))
        except OSError:
            return False
    return True
