"""Where tokenbench keeps things, per user, whatever the current directory (docs/architecture.md, Places).

| what | variable | default |
|---|---|---|
| results database and reports | `$TOKENBENCH_RESULTS` | `$XDG_DATA_HOME/tokenbench` (`~/.local/share/tokenbench`) |
| running deployments (state files, engine logs) | `$TOKENBENCH_STATE` | `$XDG_STATE_HOME/tokenbench/deployments` (`~/.local/state/...`) |
| this machine's measured client ceiling | `$TOKENBENCH_STATE/machine` | `$XDG_STATE_HOME/tokenbench/machine` |
| engine venvs and converted models | `$TOKENBENCH_CACHE` | `$XDG_CACHE_HOME/tokenbench` (`~/.cache/tokenbench`) |

`--db PATH` overrides the database of one command; its reports go beside it."""

from __future__ import annotations

import os
from pathlib import Path

RESULTS_ENV = "TOKENBENCH_RESULTS"
STATE_ENV = "TOKENBENCH_STATE"
CACHE_ENV = "TOKENBENCH_CACHE"


def _xdg(variable: str, fallback: str) -> Path:
    value = os.environ.get(variable, "")
    return Path(value) if os.path.isabs(value) else Path.home() / fallback   # XDG: relative values are ignored


def results_dir() -> Path:
    return Path(os.environ.get(RESULTS_ENV) or _xdg("XDG_DATA_HOME", ".local/share") / "tokenbench")


def state_dir() -> Path:
    return Path(os.environ.get(STATE_ENV) or _xdg("XDG_STATE_HOME", ".local/state") / "tokenbench" / "deployments")


def cache_root() -> Path:
    return Path(os.environ.get(CACHE_ENV) or _xdg("XDG_CACHE_HOME", ".cache") / "tokenbench")


def machine_dir() -> Path:
    """What was measured of this machine (the client ceiling: host/ceiling.py), beside the deployments."""
    override = os.environ.get(STATE_ENV)
    return Path(override) / "machine" if override else _xdg("XDG_STATE_HOME", ".local/state") / "tokenbench" / "machine"
