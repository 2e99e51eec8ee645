"""llama.cpp: its own C++ HTTP server, run by `tokenbench.local_engines.llamacpp_server` (the xllamacpp wheel).

Context: llama.cpp splits the total context `n_ctx` evenly over its `n_parallel` slots, so one
sequence (input + output) gets n_ctx / slots tokens, and the KV cache holds slots x that in all.
Speculative decoding: the launcher passes `--speculative.<param>` to xllamacpp's CommonParams (e.g.
`speculative.types`, `speculative.model.path`; llama-server: `--model-draft`); recent builds count drafts
in `llamacpp:spec_decode_*` counters (/metrics with --metrics).
"""

from __future__ import annotations

import importlib.metadata
import sys
from pathlib import Path

from tokenbench.client import api
from tokenbench.deploy.engines import arg_of, profile_args
from tokenbench.local_engines import models
from tokenbench.spec.deploy_profile import Profile
from tokenbench.spec.server_facts import ServerFacts

LAUNCHER = "tokenbench.local_engines.llamacpp_server"
DEFAULT_PORT = 8080      # the engine's own default: `deploy up` uses it unless it is taken


def ctx_per_seq(profile: Profile) -> int | None:
    """llama.cpp splits its context (--ctx-size) evenly over its slots."""
    par = profile.parallelism
    return par.ctx // (par.slots or 1) if par.ctx else None


def served_model(profile: Profile) -> str:
    """The id /v1/models lists: served_name, else the bundled name, else the file name without .gguf."""
    ref = profile.model
    return ref.served_name or ref.bundled or Path(ref.path or "").name.removesuffix(".gguf")


def speculative(profile: Profile) -> str | None:
    """Drafting the profile's args turn on: any `speculative.*` CommonParams value (types other than
    none, a draft model) or llama-server's `--model-draft`."""
    spec = {k.lstrip("-"): v for k, v in profile.effective_args().items() if k.lstrip("-").startswith("speculative.")}
    on = {k: v for k, v in spec.items() if v not in (None, False) and str(v).lower() not in ("none", "[]", "")}
    draft = arg_of(profile, "model-draft", "md")
    if draft is not None:
        on["model-draft"] = draft
    return ", ".join(f"{k.removeprefix('speculative.')}={v}" for k, v in sorted(on.items())) or None


def command_prefix(profile: Profile) -> list[str]:
    """The launcher, or the profile's `command` (a leading `python` means this Python)."""
    if not profile.command:
        return [sys.executable, "-m", LAUNCHER]
    first, *rest = profile.command
    return [sys.executable if first in ("python", "python3") else first, *rest]


def launch_argv(profile: Profile, port: int) -> list[str]:
    par = profile.parallelism
    argv = [*command_prefix(profile), "--model", str(models.resolve(profile.model)),
            "--host", profile.host, "--port", str(port), "--alias", served_model(profile)]
    for flag, value in (("--slots", par.slots), ("--ctx", par.ctx), ("--threads", par.threads)):
        if value is not None:
            argv += [flag, str(value)]
    return argv + profile_args(profile)


def read_facts(base_url: str, api_key: str | None = None) -> ServerFacts:
    facts = ServerFacts(engine="llamacpp")
    props = _dict(api.get_json(base_url, "/props", api_key))
    meta = _model_meta(facts, base_url, api_key)
    facts.slots = _int(props.get("total_slots"))
    facts.ctx_per_seq = _int((props.get("default_generation_settings") or {}).get("n_ctx"))
    facts.source.update(slots="/props total_slots", ctx_per_seq="/props default_generation_settings.n_ctx")
    if facts.ctx_per_seq is None:
        facts.ctx_per_seq, facts.source["ctx_per_seq"] = _slots_ctx(base_url, api_key), "/slots n_ctx"
    if facts.ctx_per_seq is None:
        facts.ctx_per_seq, facts.source["ctx_per_seq"] = _int(meta.get("n_ctx")), "/v1/models meta.n_ctx"
    if facts.slots and facts.ctx_per_seq:
        facts.kv_capacity_tokens = facts.slots * facts.ctx_per_seq
        facts.source["kv_capacity_tokens"] = "total_slots x n_ctx per slot"
    facts.version = _version(props.get("build_info"))
    facts.source["version"] = "/props build_info + local xllamacpp"
    facts.raw = {"props": {k: props.get(k) for k in ("build_info", "total_slots", "model_path", "model_ftype")},
                 "meta": meta}
    return facts


def _model_meta(facts: ServerFacts, base_url: str, api_key: str | None) -> dict:
    data = _dict(api.get_json(base_url, "/v1/models", api_key)).get("data") or [{}]
    first = data[0] if isinstance(data[0], dict) else {}
    facts.model, facts.source["model"] = first.get("id"), "/v1/models"
    meta = first.get("meta") or {}
    keep = ("n_ctx", "n_ctx_train", "n_vocab", "n_params", "n_embd", "size", "ftype")
    return {k: meta[k] for k in keep if k in meta}


def _slots_ctx(base_url: str, api_key: str | None) -> int | None:
    slots = api.get_json(base_url, "/slots", api_key)
    return _int(slots[0].get("n_ctx")) if isinstance(slots, list) and slots and isinstance(slots[0], dict) else None


def _version(build_info: object) -> str | None:
    try:
        wheel = f"xllamacpp {importlib.metadata.version('xllamacpp')}"
    except importlib.metadata.PackageNotFoundError:
        wheel = None
    parts = [f"llama.cpp {build_info}" if build_info else None, wheel]
    return " / ".join(p for p in parts if p) or None


def _dict(value: object) -> dict:
    return value if isinstance(value, dict) else {}


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


# ---- /metrics names -> tokenbench's common server signals (format: monitor/prometheus.py) ----

METRIC_NAMES = {
    "prefix": "llamacpp:",
    "signals": {
        "running": {"metrics": ["llamacpp:requests_processing"], "reduce": "sum"},
        "waiting": {"metrics": ["llamacpp:requests_deferred"], "reduce": "sum"},
        "kv_usage": {"metrics": ["llamacpp:kv_cache_usage_ratio"], "reduce": "max"},
        "prompt_tokens": {"metrics": ["llamacpp:prompt_tokens_total"], "reduce": "sum"},
        "generation_tokens": {"metrics": ["llamacpp:tokens_predicted_total"], "reduce": "sum"},
    },
    # read over a cell (monitor/counters.py): drafts as vLLM counts them (recent builds)
    "counters": {
        "spec_drafts": "llamacpp:spec_decode_num_drafts_total",
        "spec_draft_tokens": "llamacpp:spec_decode_num_draft_tokens_total",
        "spec_accepted_tokens": "llamacpp:spec_decode_num_accepted_tokens_total",
    },
}
