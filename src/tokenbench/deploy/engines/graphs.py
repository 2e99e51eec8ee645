"""Captured graph sizes, the parts the engine adapters share: a profile's engine flags as a mapping, a
list of sizes as a flag gives it, and the SGLang-style server info (`/server_info`, `/get_server_info`:
SGLang and the reference server). Each engine's own rule is in its adapter (`graph_capture(profile)`);
docs/deploy.md ("Graph capture") states them. Not an engine adapter itself."""

from __future__ import annotations

import json
import re
from typing import Any

from tokenbench.spec.deploy_profile import Profile
from tokenbench.spec.profile_args import is_number, render_args
from tokenbench.spec.server_facts import GraphCapture


def flags(profile: Profile) -> dict[str, str | None]:
    """The profile's engine flags (args, `when` rules, extra_args) as {name without dashes: value}, a bare
    flag's value None; `--name=value` and `-cc` spellings too; the last one given wins."""
    argv = render_args(profile.effective_args(), {}, profile.extra_args)
    out: dict[str, str | None] = {}
    for i, word in enumerate(argv):
        if not word.startswith("-") or is_number(word):
            continue
        name, eq, value = word.lstrip("-").partition("=")
        following = argv[i + 1] if i + 1 < len(argv) else None
        out[name] = value if eq else (following if following is not None and
                                      (not following.startswith("-") or is_number(following)) else None)
    return out


def sizes(text: str | None) -> tuple[int, ...]:
    """`1 2 4 8`, `1,2,4,8` or `[1, 2, 4, 8]` -> (1, 2, 4, 8); () when there is none."""
    return tuple(sorted({int(x) for x in re.findall(r"\d+", text or "")}))


def as_int(text: str | None) -> int | None:
    return int(text) if text is not None and text.strip().isdigit() else None


def json_arg(text: str | None) -> dict[str, Any]:
    try:
        data = json.loads(text or "")
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def capture(listed: list[int] | tuple[int, ...], source: str, note: str = "") -> GraphCapture:
    ordered = tuple(sorted(set(listed)))
    return GraphCapture(ordered, max(ordered) if ordered else 0, source, note)


def from_server_info(info: dict, path: str) -> GraphCapture | None:
    """SGLang's decode graphs: `cuda_graph_config.decode` {backend, max_bs, bs} (0.5.16 on), else the flat
    `cuda_graph_bs` / `cuda_graph_max_bs` / `disable_cuda_graph` (earlier releases, the reference server)."""
    decode = (info.get("cuda_graph_config") or {}).get("decode") if isinstance(info.get("cuda_graph_config"), dict) \
        else None
    if isinstance(decode, dict) and ("bs" in decode or "max_bs" in decode):
        if decode.get("backend") == "disabled":
            return GraphCapture((), 0, f"{path} cuda_graph_config.decode.backend=disabled")
        listed = [x for x in decode.get("bs") or [] if isinstance(x, int)]
        return capture(listed or [int(decode.get("max_bs") or 0)], f"{path} cuda_graph_config.decode")
    if info.get("disable_cuda_graph") is True:
        return GraphCapture((), 0, f"{path} disable_cuda_graph=true")
    listed = [x for x in info.get("cuda_graph_bs") or [] if isinstance(x, int)]
    if listed:
        return capture(listed, f"{path} cuda_graph_bs")
    top = info.get("cuda_graph_max_bs")
    return GraphCapture((), top, f"{path} cuda_graph_max_bs") if isinstance(top, int) else None
