"""Small JSON calls to a server's side endpoints (/v1/models, /tokenize, /detokenize, facts).

Synchronous on purpose: used before and after measurement, never inside it. Errors become
TargetError with the cause and a fix.
"""

from __future__ import annotations

import http.client
import json
import urllib.error
import urllib.request

from tokenbench.errors import TargetError

# An HTTP exchange that did not complete: no connection, a timeout, or an answer cut off in mid-body
# (http.client.IncompleteRead is neither OSError nor URLError). HTTPError, an answer, is caught before these.
UNANSWERED = (urllib.error.URLError, OSError, http.client.HTTPException)


def first_line(body: bytes | str, limit: int = 160) -> str:
    """A response body's first non-empty line, shortened (for messages)."""
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
    line = next((x.strip() for x in text.splitlines() if x.strip()), "(empty body)")
    return line if len(line) <= limit else line[:limit - 3] + "..."


def _request(url: str, body: dict | None, api_key: str | None, timeout: float) -> urllib.request.Request:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method="POST" if body is not None else "GET")
    req.add_header("Content-Type", "application/json")
    if api_key:
        req.add_header("Authorization", f"Bearer {api_key}")
    return req


def call(base_url: str, path: str, body: dict | None = None, api_key: str | None = None,
         timeout: float = 30.0, quiet: bool = False) -> tuple[int, bytes]:
    """GET (body None) or POST JSON; returns (status, body). Unreachable -> TargetError."""
    url = base_url.rstrip("/") + path
    try:
        with urllib.request.urlopen(_request(url, body, api_key, timeout), timeout=timeout) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()
    except UNANSWERED as exc:
        if quiet:
            return 0, b""
        reason = getattr(exc, "reason", exc)
        raise TargetError(f"cannot reach {url}: {reason}",
                          "check --base-url and that the server is running (tokenbench deploy status)") from exc


def get_json(base_url: str, path: str, api_key: str | None = None, timeout: float = 30.0) -> dict | list | None:
    """GET that returns parsed JSON on 200, None otherwise (endpoint missing or not JSON)."""
    status, body = call(base_url, path, api_key=api_key, timeout=timeout)
    if status in (401, 403) and api_key:
        raise TargetError(f"{base_url}{path} answered HTTP {status}: the server rejected the API key",
                          "check the key's value (the variable or file given with --api-key-env/--api-key-file)")
    if status in (401, 403):
        raise TargetError(f"{base_url}{path} answered HTTP {status}: the server requires an API key",
                          "pass the key with --api-key-env VAR (the variable must be set)")
    if status != 200:
        return None
    try:
        return json.loads(body)
    except ValueError:
        return None


def post_json(base_url: str, path: str, body: dict, api_key: str | None = None,
              timeout: float = 60.0) -> tuple[int, dict | None]:
    status, raw = call(base_url, path, body, api_key=api_key, timeout=timeout)
    try:
        return status, json.loads(raw)
    except ValueError:
        return status, None


def get_text(base_url: str, path: str, timeout: float = 10.0) -> str | None:
    status, body = call(base_url, path, timeout=timeout, quiet=True)
    return body.decode("utf-8", "replace") if status == 200 else None


def list_models(base_url: str, api_key: str | None = None) -> list[dict]:
    data = get_json(base_url, "/v1/models", api_key)
    if not isinstance(data, dict) or not isinstance(data.get("data"), list):
        raise TargetError(f"{base_url}/v1/models did not return an OpenAI model list",
                          "point --base-url at an OpenAI-compatible server root (without /v1)")
    return data["data"]
