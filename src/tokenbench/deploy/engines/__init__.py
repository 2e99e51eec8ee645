"""Engine adapters: one module per engine, found by name, no registry.

Each module `tokenbench.deploy.engines.<engine>` provides

    launch_argv(profile: Profile, port: int) -> list[str]     # the local command line
    read_facts(base_url: str, api_key: str | None = None) -> ServerFacts

and may provide `served_model(profile) -> str | None`: the model id the server will list, which
readiness waits for (None: any model); `ctx_per_seq(profile) -> int | None`: the per-sequence context
the profile will give, when it can be known before launch; `RESET_CACHE_PATH`: the POST endpoint that
empties the prefix cache between cells; `speculative(profile) -> str | None`: the speculative decoding
the profile's flags turn on (method, draft tokens); `graph_capture(profile) -> GraphCapture`: the decode
batch sizes the profile's flags capture as graphs (the engine's default rule where they say nothing);
`traced(profile, address) -> Profile`: the profile exporting its request spans to tokenbench's OTLP receiver.
Every module also holds `METRIC_NAMES`, its Prometheus /metrics
names of tokenbench's common server signals (format in monitor/prometheus.py; `metric_names()` gathers
them for the monitor, which knows no engine), and optionally the counters and gauges read over a cell
(`counters`, `gauges`: role -> metric, format in monitor/counters.py): speculative decoding and
prefix-cache hits; and its request-time histograms (`histograms`: role -> histogram, summed and counted). Code outside this package asks these functions, never an
engine's name (tests/study/test_engine_names.py).

`facts_for(base_url)` detects which engine answers at a URL and asks that engine's module for its
facts; an engine whose module is not there yields what the OpenAI endpoints tell.
"""

from __future__ import annotations

import importlib
import json
import typing
from types import ModuleType
from typing import Any, Protocol

from tokenbench.client import api
from tokenbench.deploy.engines import graphs
from tokenbench.errors import DeployError, UsageError
from tokenbench.spec.deploy_profile import ArgValue, Engine, Profile
from tokenbench.spec.profile_args import flag_args, render_args  # noqa: F401  (argv rendering, one definition)
from tokenbench.spec.server_facts import GraphCapture, ServerFacts


class EngineAdapter(Protocol):
    """What an adapter module provides (checked for every module by tests/study/test_engine_names.py).
    Optional: `served_model(profile)`, `ctx_per_seq(profile)`, `RESET_CACHE_PATH` (see the module doc)."""

    METRIC_NAMES: dict[str, Any]

    def launch_argv(self, profile: Profile, port: int) -> list[str]: ...
    def read_facts(self, base_url: str, api_key: str | None = None) -> ServerFacts: ...


REQUIRED = ("launch_argv", "read_facts")
REQUIRED_DATA = ("METRIC_NAMES",)
OPTIONAL = ("served_model", "ctx_per_seq", "speculative", "RESET_CACHE_PATH", "graph_capture", "traced")


def engine_module(name: str) -> ModuleType:
    """The adapter module of engine `name`, e.g. `llamacpp` -> tokenbench.deploy.engines.llamacpp."""
    if not name.isidentifier():
        raise DeployError(f"'{name}' is not an engine name", "use one of: llamacpp, sglang, vllm")
    full = f"{__name__}.{name}"
    try:
        return importlib.import_module(full)
    except ModuleNotFoundError as exc:
        if exc.name != full:
            raise
        raise DeployError(f"this tokenbench has no adapter for engine '{name}'",
                          "use engine: llamacpp, or a tokenbench version that supports it") from None


def has_adapter(name: str | None) -> bool:
    """True when `name` is an engine with an adapter module here (facts may name engines that have none)."""
    try:
        return bool(name) and engine_module(str(name)) is not None
    except DeployError:
        return False


def metric_names() -> dict[str, dict[str, Any]]:
    """Every adapter's /metrics names by engine: what the monitor maps to common signals and detects
    the engine by (passed to monitor.prometheus at the call site; monitor/ does not import deploy/)."""
    return {name: engine_module(name).METRIC_NAMES for name in typing.get_args(Engine) if has_adapter(name)}


def reset_cache_path(engine: str | None) -> str | None:
    """The engine's prefix-cache reset endpoint, if it has one."""
    return getattr(engine_module(str(engine)), "RESET_CACHE_PATH", None) if has_adapter(engine) else None


def expected_ctx(profile: Profile) -> int | None:
    """Per-sequence context a profile will give, when it can be known before launch: the engine's own
    rule, else a `max-model-len` / `context-length` arg."""
    rule = getattr(engine_module(profile.engine), "ctx_per_seq", None)
    if rule and (ctx := rule(profile)) is not None:
        return ctx
    for flag in ("max-model-len", "context-length"):
        value = profile.effective_args().get(flag)
        if isinstance(value, int):
            return value
    return None


def graph_capture(profile: Profile) -> GraphCapture | None:
    """The decode graphs a profile captures, by its engine's rule (None: the engine has no such rule)."""
    rule = getattr(engine_module(profile.engine), "graph_capture", None)
    return rule(profile) if rule else None


def with_graphs(facts: ServerFacts, profile: Profile | None) -> ServerFacts:
    """The facts with the captured graph sizes: as the server told them, else as the profile's flags give
    them (by the engine's rule)."""
    if (facts.graphs is None or not facts.graphs.known) and profile is not None:
        derived = graph_capture(profile)
        if derived is not None and (facts.graphs is None or derived.known):
            facts.with_graphs(derived)
    return facts


def traced(profile: Profile, address: str) -> Profile | None:
    """The profile exporting each request's OpenTelemetry span to the OTLP receiver at HOST:PORT, by its engine's
    rule; None when the engine has no such rule (no tracing)."""
    rule = getattr(engine_module(profile.engine), "traced", None) if has_adapter(profile.engine) else None
    return rule(profile, address) if rule else None


def traces_address(argv: list[str]) -> str | None:
    """HOST:PORT an engine command line sends its spans to (`--otlp-traces-endpoint`, a URL or HOST:PORT)."""
    if "--otlp-traces-endpoint" not in argv[:-1]:
        return None
    endpoint = argv[argv.index("--otlp-traces-endpoint") + 1]
    return endpoint.split("://", 1)[-1].split("/", 1)[0] or None


def speculative(profile: Profile | None) -> str | None:
    """The speculative decoding a profile's flags turn on (e.g. "ngram, 3 draft tokens"), by its engine's
    rule; None when off or unknown."""
    rule = getattr(engine_module(profile.engine), "speculative", None) if profile else None
    return rule(profile) if rule else None


def _flag_key(name: str) -> str:
    return name.lstrip("-").replace("_", "-")


def arg_of(profile: Profile, *names: str) -> ArgValue:
    """The value the profile gives one of the flags `names` (written with - or _, with or without the
    dashes): its args (with `when` rules), else its extra_args (`--flag value`, `--flag=value`, bare: True)."""
    wanted = {_flag_key(n) for n in names}
    for key, value in profile.effective_args().items():
        if _flag_key(key) in wanted and value not in (None, False):
            return value
    extra = [str(a) for a in profile.extra_args]
    for i, item in enumerate(extra):
        key, eq, value = item.partition("=")
        if item.startswith("-") and _flag_key(key) in wanted:
            following = extra[i + 1] if i + 1 < len(extra) and not extra[i + 1].startswith("--") else True
            return value if eq else following
    return None


def served_model(profile: Profile) -> str | None:
    """The model id readiness waits for: the engine's own rule, else the profile's served_name."""
    module = engine_module(profile.engine)
    rule = getattr(module, "served_model", None)
    return rule(profile) if rule else profile.model.served_name


def model_arg(profile: Profile, engine: str, path: str, fix: str) -> str:
    """model.path as given (the server resolves it), or a bundled model resolved on this machine; a profile
    with neither is refused: `engine` needs model.path (`path`: what it takes there; `fix`: the hint)."""
    if profile.model.bundled is not None:
        from tokenbench.local_engines import models  # a local model's file: only when one is launched
        return str(models.resolve(profile.model))
    if profile.model.path is None:
        raise UsageError(f"profile '{profile.name}': {engine} needs model.path ({path})", fix)
    return profile.model.path


def profile_args(profile: Profile) -> list[str]:
    """Every engine's tail of argv: the profile's args (with `when` rules), its secret args as
    `${VAR}` placeholders (deploy/secret_refs.py), then extra_args verbatim."""
    return render_args(profile.effective_args(), profile.secret_args, profile.extra_args)


# ---- which engine answers at a URL ----

def _json(base_url: str, path: str, api_key: str | None) -> dict | None:
    status, body = api.call(base_url, path, api_key=api_key, timeout=10, quiet=True)
    if status != 200:
        return None
    try:
        data = json.loads(body)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def detect_engine(base_url: str, api_key: str | None = None) -> str:
    """llamacpp | sglang | vllm | reference | unknown, from the endpoints each engine alone has."""
    props = _json(base_url, "/props", api_key)
    if props and ("build_info" in props or "total_slots" in props):
        return "llamacpp"
    for path in ("/get_server_info", "/server_info"):
        info = _json(base_url, path, api_key)
        if info is not None:
            return "reference" if info.get("engine") == "reference" else "sglang"
    metrics = api.get_text(base_url, "/metrics") or ""
    if "vllm:" in metrics:
        return "vllm"
    return "unknown"


def facts_for(base_url: str, api_key: str | None = None) -> ServerFacts:
    """Facts about the server at `base_url`, read by its engine's adapter where there is one."""
    engine = detect_engine(base_url, api_key)
    try:
        module = engine_module(engine)
    except DeployError:
        return generic_facts(engine, base_url, api_key)
    return module.read_facts(base_url, api_key)


def generic_facts(engine: str, base_url: str, api_key: str | None = None) -> ServerFacts:
    """What any OpenAI-compatible server tells (and SGLang-style /get_server_info where present)."""
    facts = ServerFacts(engine=engine)
    models = _json(base_url, "/v1/models", api_key) or {}
    entries = models.get("data") if isinstance(models.get("data"), list) else []
    if entries and isinstance(entries[0], dict):
        first = entries[0]
        facts.model = first.get("id")
        facts.source["model"] = "/v1/models"
        if isinstance(first.get("max_model_len"), int):
            facts.ctx_per_seq, facts.source["ctx_per_seq"] = first["max_model_len"], "/v1/models max_model_len"
    info = _json(base_url, "/get_server_info", api_key) or _json(base_url, "/server_info", api_key) or {}
    _server_info_facts(facts, info)
    return facts


def _server_info_facts(facts: ServerFacts, info: dict) -> None:
    keys = {"version": "version", "kv_capacity_tokens": "max_total_num_tokens",
            "ctx_per_seq": "context_length", "slots": "max_running_requests"}
    for attr, key in keys.items():
        value = info.get(key)
        if value is not None and (attr == "version" or isinstance(value, int)):
            setattr(facts, attr, str(value) if attr == "version" else value)
            facts.source[attr] = f"/get_server_info {key}"
    if info.get("speculative_algorithm"):
        drafts = info.get("speculative_num_draft_tokens")
        facts.speculative = str(info["speculative_algorithm"]) + (f", {drafts} draft tokens" if drafts else "")
        facts.source["speculative"] = "/get_server_info speculative_algorithm"
    if info:
        facts.raw["server_info"] = {k: info[k] for k in sorted(info) if k in keys.values() or k == "engine"}
        facts.with_graphs(graphs.from_server_info(info, "/get_server_info"))
