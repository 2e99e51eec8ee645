"""The transport: send ONE prepared request, stamp every chunk as it arrives, keep raw bytes.

Nothing is parsed here. `time.perf_counter_ns()` is taken before the request is handed to the
connection and on every read; interpretation happens in `client.parse` after the request ends.
"""

from __future__ import annotations

import asyncio
import time

import aiohttp

from tokenbench.client.records import RawExchange
from tokenbench.client.request import PreparedRequest

READ_BUFSIZE = 1 << 20


def new_session(timeout_s: float) -> aiohttp.ClientSession:
    """One session per run: no connection cap, keep-alive, a large read buffer."""
    connector = aiohttp.TCPConnector(limit=0, limit_per_host=0, ttl_dns_cache=None, force_close=False)
    return aiohttp.ClientSession(
        connector=connector,
        timeout=aiohttp.ClientTimeout(total=timeout_s, sock_connect=min(timeout_s, 30)),
        read_bufsize=READ_BUFSIZE,
        auto_decompress=False,
        trust_env=False,
    )


async def send(session: aiohttp.ClientSession, req: PreparedRequest, intended_ns: int) -> RawExchange:
    """One request. A pooled keep-alive connection the server already closed fails before any byte is
    answered; that attempt is retried once on a fresh connection with a fresh send stamp."""
    raw = await _attempt(session, req, intended_ns)
    if raw.error_kind == "stale":
        raw = await _attempt(session, req, intended_ns)
        if raw.error_kind == "stale":
            raw.error_kind = "reset"
    return raw


async def _attempt(session: aiohttp.ClientSession, req: PreparedRequest, intended_ns: int) -> RawExchange:
    raw = RawExchange(intended_ns=intended_ns)
    chunks = raw.chunks
    now = time.perf_counter_ns
    try:
        raw.sent_ns = now()
        async with session.post(req.url, data=req.body, headers=req.headers) as resp:
            raw.headers_ns = now()
            raw.status = resp.status
            if resp.status != 200:
                body = await resp.content.read(512)
                raw.error_kind, raw.error_detail = "http_status", f"HTTP {resp.status}: {body.decode('utf-8', 'replace')}"
            else:
                async for data in resp.content.iter_any():
                    chunks.append((now(), data))
    except asyncio.TimeoutError:
        raw.error_kind, raw.error_detail = "timeout", "request exceeded the per-request timeout"
    except aiohttp.ClientConnectorError as exc:
        raw.error_kind, raw.error_detail = "connect", str(exc)
    except (aiohttp.ServerDisconnectedError, aiohttp.ClientPayloadError, aiohttp.ClientOSError) as exc:
        kind = "stale" if raw.headers_ns == 0 and not chunks else "reset"
        raw.error_kind, raw.error_detail = kind, f"{type(exc).__name__}: {exc}"
    except aiohttp.ClientError as exc:
        raw.error_kind, raw.error_detail = "reset", f"{type(exc).__name__}: {exc}"
    except asyncio.CancelledError:
        # Kept as data: the partial record survives an interrupted run.
        raw.error_kind, raw.error_detail = "cancelled", "interrupted"
    raw.end_ns = now()
    return raw
