"""One small JSON file per running deployment, so `deploy status|logs|down` work from any later
tokenbench invocation, from any directory: $TOKENBENCH_STATE, default
$XDG_STATE_HOME/tokenbench/deployments (tokenbench/userdirs.py)."""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

from tokenbench import userdirs
from tokenbench.errors import UsageError

STATE_ENV = userdirs.STATE_ENV


@dataclass(slots=True, kw_only=True)
class DeploymentState:
    id: str                 # <profile>-<port>
    profile: str
    engine: str
    pid: int
    pgid: int
    create_time: float      # psutil's, to tell our process from a later one with the same pid
    host: str
    port: int
    base_url: str
    log_path: str
    started_at: str
    argv: list[str]
    runs_in: str = "local"  # local | container
    owner_pid: int | None = None            # the tokenbench that tears it down on exit (sweep, demo);
    owner_create_time: float | None = None  # None for `deploy up`, whose deployment outlives it


def state_dir(override: str | Path | None = None) -> Path:
    return Path(override) if override else userdirs.state_dir()


def file_of(directory: Path, deployment_id: str) -> Path:
    return directory / f"{deployment_id}.json"


def save(directory: Path, state: DeploymentState) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = file_of(directory, state.id)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(asdict(state), indent=1))
    os.replace(tmp, path)
    return path


def remove(directory: Path, deployment_id: str) -> None:
    file_of(directory, deployment_id).unlink(missing_ok=True)


def load_all(directory: Path) -> list[DeploymentState]:
    out = []
    for path in sorted(directory.glob("*.json")) if directory.is_dir() else []:
        try:
            out.append(DeploymentState(**json.loads(path.read_text())))
        except (ValueError, TypeError):
            continue            # not ours, or half-written by a crash: ignore rather than fail status
    return out


def select(directory: Path, key: str | None) -> list[DeploymentState]:
    """Deployments whose id or profile name is `key` (all when key is None)."""
    states = load_all(directory)
    if key is None:
        return states
    found = [s for s in states if key in (s.id, s.profile)]
    if not found:
        known = ", ".join(s.id for s in states) or "none"
        raise UsageError(f"no deployment '{key}' in {directory}", f"running: {known} (see `tokenbench deploy status`)")
    return found


MODEL_FLAGS = ("--model-path", "--model", "-m")


def at_url(directory: Path, base_url: str) -> list[DeploymentState]:
    """The recorded deployments at `base_url` (a crashed one's record may still be there)."""
    url = base_url.rstrip("/")
    return [s for s in load_all(directory) if s.base_url.rstrip("/") == url]


def is_alive(state: DeploymentState) -> bool:
    """The recorded process is still the deployment's (not a later one with the same pid)."""
    from tokenbench.deploy.local import leader  # the process table: only where a record is found
    return leader(state.pid, state.create_time) is not None


def serving(directory: Path, base_url: str) -> DeploymentState | None:
    """The running deployment that tokenbench started at `base_url`, if any: a stale record of a crashed one
    is skipped, since another server may hold its port now."""
    return next((st for st in at_url(directory, base_url) if is_alive(st)), None)


def model_directory(state: DeploymentState) -> str | None:
    """The model directory the deployment was launched with (its --model-path / --model), if a directory."""
    pairs = zip(state.argv, state.argv[1:], strict=False)
    return next((value for flag, value in pairs if flag in MODEL_FLAGS and Path(value).is_dir()), None)
