"""Shared by the sweep tests."""

import psutil


def engines() -> set[int]:
    """pids of running llama.cpp launchers (other tests' session-scoped engines may be among them)."""
    return {p.pid for p in psutil.process_iter(["cmdline"])
            if "tokenbench.local_engines.llamacpp_server" in " ".join(p.info["cmdline"] or [])}
