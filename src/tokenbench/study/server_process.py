"""Which server process a launch is: found once per launch, read by every cell of it. A server tokenbench
started is its deployment's process; a server given by URL on this host is the process listening on its port;
one on another host is not seen. The cell's `LaunchFacts` say which launch it ran on (the same id: the same
server process), its CPU shares count that process's tree (monitor/cpu.py), and its prefix-cache state counts
earlier sends from that process's start (study/prompt_cache.py)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from urllib.parse import urlsplit

import psutil

from tokenbench.deploy.address import on_this_host
from tokenbench.deploy.ports import listener
from tokenbench.metrics.summary_groups import LaunchFacts, ServerSeen
from tokenbench.study.servers import Server

CONTAINER_PROXIES = ("docker-proxy", "rootlessport", "conmon", "slirp4netns")   # a port a container publishes


@dataclass(frozen=True)
class ServerProcess:
    """The server's process as this host sees it: its pid (None: not seen, `seen` says why) and start."""

    seen: ServerSeen
    pid: int | None = None
    started: float | None = None          # seconds since the epoch (psutil's create_time)
    name: str = ""                        # a deployment's id, where tokenbench started it

    @property
    def tree(self) -> int | None:
        """The pid whose process tree is the server's CPU (None where that tree is not the server's work: a
        container runs its engine outside the process that started it)."""
        return self.pid if self.seen in ("deployed", "local") else None

    def launch_id(self) -> str | None:
        if self.pid is None or self.started is None:
            return None
        return f"{self.name or 'pid'} {self.pid} started {_iso(self.started)}"


def _iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, timezone.utc).isoformat(timespec="milliseconds")


def identify(server: Server) -> ServerProcess:
    """The server's process: the deployment's (tokenbench started it), else the one listening on its port here."""
    dep = server.deployment
    if dep is not None:
        container = server.profile is not None and server.profile.runs_in == "container"
        return ServerProcess("container" if container else "deployed", dep.state.pid, dep.state.create_time,
                             dep.state.id)
    if not on_this_host(server.base_url):
        return ServerProcess("remote")
    port = urlsplit(server.base_url).port or (443 if server.base_url.startswith("https") else 80)
    holder = listener(port)
    if holder is None or not holder.pid:
        return ServerProcess("not_found")
    try:
        started = psutil.Process(holder.pid).create_time()
    except psutil.Error:
        return ServerProcess("not_found")
    proxied = (holder.command or "").split(" ", 1)[0].rsplit("/", 1)[-1] in CONTAINER_PROXIES
    return ServerProcess("container" if proxied else "local", holder.pid, started)


def launch_facts(process: ServerProcess, number: int | None, ours: bool) -> LaunchFacts:
    """The launch a cell runs on: its id and start (where seen), and tokenbench's launch number of its config."""
    started = _iso(process.started) if process.started is not None else None
    return LaunchFacts(id=process.launch_id(), number=number, ours=ours, started=started)
