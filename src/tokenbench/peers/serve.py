"""What vLLM's and SGLang's `bench` flags mean in tokenbench's study keys, where their values are not
tokenbench's own (the plain aliases, e.g. --random-input-len, are declared on the spec fields in
cli/flags.py). `fold` applies them to a study mapping; `translate` uses the same functions."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tokenbench.errors import UsageError

# backend -> API; SGLang's native `sglang` backend posts to /generate, which tokenbench measures on
# /v1/completions (the same engine path: tokenize, schedule, decode)
VLLM_BACKENDS = {"vllm": "completions", "openai": "completions", "openai-chat": "chat"}
SGLANG_BACKENDS = {"sglang": "completions", "sglang-native": "completions", "sglang-oai": "completions",
                   "vllm": "completions", "lmdeploy": "completions", "sglang-oai-chat": "chat", "vllm-chat": "chat",
                   "lmdeploy-chat": "chat"}
BACKENDS = {**SGLANG_BACKENDS, **VLLM_BACKENDS}
SGLANG_ONLY = frozenset(SGLANG_BACKENDS) - frozenset(VLLM_BACKENDS)     # a line with these is SGLang's
NATIVE = frozenset({"sglang", "sglang-native"})
ENDPOINTS = {"/v1/completions": "completions", "/v1/chat/completions": "chat"}
DATASETS = {"custom": "jsonl", "random-ids": "random"}
# backend -> the server kind it names (spec/server_kinds.py); the kinds' own names are backends too
SERVER_OF_BACKEND = {"openai-chat": "openai", "vllm-chat": "vllm", "sglang-native": "sglang", "sglang-oai": "sglang",
                     "sglang-oai-chat": "sglang", "lmdeploy-chat": "lmdeploy", "llamacpp": "llama.cpp",
                     "trt-llm": "tensorrt-llm", "tensorrtllm": "tensorrt-llm"}     # peers' dataset names with a tokenbench kind


def default_port(backend: str | None) -> int:
    """The port each tool assumes: SGLang's own backends 30000, lmdeploy's 23333, else 8000."""
    if backend and backend.startswith("sglang"):
        return 30000
    return 23333 if backend and backend.startswith("lmdeploy") else 8000


def base_url(host: str | None, port: int | None, backend: str | None = None) -> str:
    """http://HOST:PORT as vLLM and SGLang build it (host default 127.0.0.1; SGLang's 0.0.0.0 reaches the
    same local server)."""
    return f"http://{host or '127.0.0.1'}:{port or default_port(backend)}"


def server_of_backend(backend: str) -> str:
    """The server kind a backend names (openai-chat: openai, sglang-oai: sglang, tgi: tgi, ...), in any case."""
    from tokenbench.spec.server_kinds import KINDS
    if not backend.strip():
        raise UsageError("--backend '': an empty server kind says nothing",
                         f"give one of {', '.join(KINDS)} (or openai-chat, vllm-chat, ...), or leave --backend out")
    backend = backend.strip().lower()
    kind = SERVER_OF_BACKEND.get(backend, backend)
    if kind not in KINDS:
        raise UsageError(f"--backend {backend}: tokenbench measures OpenAI completions and chat completions "
                         f"streams only, on the server kinds {', '.join(KINDS)}",
                         "use openai (or vllm, sglang, ...) for /v1/completions, openai-chat for /v1/chat/completions; "
                         "any other OpenAI-compatible server: openai, or leave --backend out")
    return kind


def api_of_backend(backend: str) -> str | None:
    """The API a backend chooses (None: a server kind that leaves it to --api)."""
    server_of_backend(backend)
    return BACKENDS.get(backend.strip().lower())


def api_of_endpoint(endpoint: str) -> str:
    path = "/" + endpoint.strip().strip("/")
    if path not in ENDPOINTS:
        raise UsageError(f"--endpoint {endpoint}: tokenbench measures /v1/completions and /v1/chat/completions",
                         "give one of them (or --api completions|chat)")
    return ENDPOINTS[path]


def api(backend: str | None, endpoint: str | None) -> str | None:
    """The API a backend and an endpoint choose together (None: neither given); they must agree."""
    by_backend = api_of_backend(backend) if backend else None
    by_endpoint = api_of_endpoint(endpoint) if endpoint else None
    if by_backend and by_endpoint and by_backend != by_endpoint:
        raise UsageError(f"--backend {backend} sends {by_backend} requests but --endpoint {endpoint} is the "
                         f"{by_endpoint} API", "give a backend and an endpoint of the same API, e.g. --backend "
                         "openai-chat --endpoint /v1/chat/completions")
    return by_backend or by_endpoint


def dataset_kind(flag: str, name: str) -> str:
    """A peer's --dataset-name as a tokenbench workload kind (vLLM's custom is tokenbench's jsonl)."""
    return DATASETS.get(name, name)


def _set(data: dict, dotted: str, value: Any, flag: str) -> None:
    """Set a study key, refusing a second flag that gave it another value."""
    *parents, leaf = dotted.split(".")
    node = data
    for part in parents:
        node = node.setdefault(part, {})
    if leaf in node and node[leaf] != value:
        raise UsageError(f"{flag} gives {dotted} = {value}, but another flag gave {node[leaf]}",
                         f"drop one of them ({flag} is vLLM's/SGLang's spelling of it)")
    node[leaf] = value


def _target(data: dict, given: Mapping[str, Any]) -> None:
    host, port, backend = given.get("--host"), given.get("--port"), given.get("--backend")
    if host is None and port is None:
        return
    if (data.get("target") or {}).get("base_url"):     # vLLM lets --base-url win in silence; tokenbench says so
        raise UsageError("--base-url with --host/--port: two addresses of the server, one would be measured",
                         "give --base-url alone, or --host/--port alone")
    _set(data, "target.base_url", base_url(host, port, backend), "--host/--port")


def _prefix(data: dict, prefix_len: int) -> None:
    """vLLM's --random-prefix-len P: P tokens shared by every prompt, then --random-input-len random ones:
    a prefix workload of one group whose input is P + the random length."""
    workload = data.setdefault("workload", {})
    if workload.get("kind", "random") != "random":
        raise UsageError(f"--random-prefix-len applies to the random dataset, not {workload['kind']}",
                         "for shared prefixes of several groups use --dataset-name prefix --prefix-len P --num-groups G")
    if prefix_len <= 0:
        return
    workload.update(kind="prefix", prefix_len=prefix_len)
    data["pairs"] = [(i + prefix_len, o) for i, o in data.get("pairs", [])]


def fold(data: dict, given: Mapping[str, Any]) -> list[str]:
    """Apply the peer flags given ({spelling: value}) to the study mapping; returns notes to print. A backend
    is named in any case (TGI is tgi); an empty one is refused."""
    if given.get("--backend") is not None:
        server_of_backend(given["--backend"])
        given = {**given, "--backend": given["--backend"].strip().lower()}
    _target(data, given)
    chosen = api(given.get("--backend"), given.get("--endpoint"))
    if chosen:
        _set(data, "api", chosen, "--backend/--endpoint")
    if given.get("--backend"):
        _set(data, "target.backend", server_of_backend(given["--backend"]), "--backend")
    if given.get("--random-prefix-len") is not None:
        _prefix(data, int(given["--random-prefix-len"]))
    return _style(data, given.get("--backend"))


SGLANG_VERSION = "0.5.23"       # the sglang.benchmark.serving whose defaults these notes state (checked on its code)


def _style(data: dict, backend: str | None) -> list[str]:
    """An SGLang-only backend makes --random-range-ratio SGLang's (unless the style is given); without a ratio,
    the note says that SGLang would have drawn each length from 1..L and this run asks exactly L."""
    workload = data.get("workload") or {}
    notes = []
    if backend in NATIVE:
        notes.append(f"--backend {backend}: SGLang's native POST /generate is measured on /v1/completions")
    if backend in SGLANG_ONLY and "range_ratio" in workload and "range_ratio_style" not in workload:
        workload["range_ratio_style"] = "sglang"
        notes.append(f"--backend {backend} is SGLang's: --random-range-ratio {workload['range_ratio']:g} has "
                     "SGLang's meaning (lengths from L*r up to L); --range-ratio-style vllm for vLLM's")
    elif backend in SGLANG_ONLY and "range_ratio" not in workload and workload.get("kind", "random") == "random":
        notes.append(f"--backend {backend} is SGLang's, whose bench_serving (SGLang {SGLANG_VERSION}) draws each "
                     "random length from 1..L when no --random-range-ratio is given (its default 0.0): this run "
                     "asks exactly L tokens; give --random-range-ratio 0 for SGLang's draw, or run `tokenbench "
                     "translate -- python3 -m sglang.bench_serving ...` for all of SGLang's defaults")
    return notes
