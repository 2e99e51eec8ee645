"""Wait until a freshly started server answers: `readiness.path` with 200, then `models_path`
listing the model. Give up early when the process exits, or at the timeout."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

from tokenbench.client import api
from tokenbench.errors import EngineFailed
from tokenbench.spec.deploy_profile import Readiness

TAIL_LINES = 20


def log_text(log_path: Path, limit: int = 256 * 1024) -> str:
    """The last `limit` bytes of a log ("" when it cannot be read)."""
    try:
        with log_path.open("rb") as f:
            f.seek(max(0, f.seek(0, 2) - limit))
            return f.read().decode("utf-8", "replace")
    except OSError:
        return ""


def log_tail(log_path: Path, lines: int = TAIL_LINES) -> str:
    try:
        text = log_path.read_bytes()[-64 * 1024:].decode("utf-8", "replace")
    except OSError:
        return "(no log)"
    tail = text.splitlines()[-lines:]
    return "\n".join(tail) if tail else "(the log is empty)"


def failure(cause: str, log_path: Path, hint: str) -> EngineFailed:
    return EngineFailed(f"{cause}; last lines of {log_path}:\n{log_tail(log_path)}", hint, str(log_path))


def listed_models(base_url: str, path: str, api_key: str | None = None) -> list[str] | None:
    status, body = api.call(base_url, path, api_key=api_key, timeout=5, quiet=True)
    if status != 200:
        return None
    try:
        data = json.loads(body).get("data")
    except (ValueError, AttributeError):
        return None
    return [str(m.get("id")) for m in data if isinstance(m, dict)] if isinstance(data, list) else None


def _ready_once(base_url: str, spec: Readiness, model: str | None, api_key: str | None) -> bool:
    status, _ = api.call(base_url, spec.path, api_key=api_key, timeout=5, quiet=True)
    if status != 200:
        return False
    ids = listed_models(base_url, spec.models_path, api_key)
    return bool(ids) and (model is None or model in (ids or []))


def wait_ready(base_url: str, spec: Readiness, model: str | None, exit_code: Callable[[], int | None],
               log_path: Path, api_key: str | None = None) -> float:
    """Seconds it took; DeployError with the log tail if the process exits or time runs out."""
    t0 = time.monotonic()
    while True:
        code = exit_code()
        if code is not None:
            raise failure(f"the engine exited with code {code} before it was ready", log_path,
                          "read the log lines above; `tokenbench deploy logs` shows more")
        if _ready_once(base_url, spec, model, api_key):
            return time.monotonic() - t0
        if time.monotonic() - t0 > spec.timeout_s:
            what = f"{spec.models_path} listing '{model}'" if model else f"{spec.path} and {spec.models_path}"
            raise failure(f"the engine was not ready ({what}) after {spec.timeout_s:g} s", log_path,
                          "raise readiness.timeout_s (--set readiness.timeout_s=600) or read the log")
        time.sleep(spec.interval_s)
