"""What a run's profile and server facts say about the model, for the roofline: parameters active per
token (MoE), weight and KV-cache byte widths (BF16, FP8, INT4, GGUF quantizations) and speculative
decoding. Each reader says None where it cannot know, so the check says "not checked" instead of
guessing. Byte widths are the nominal (smallest) ones: a looser bound never calls a real result
impossible.
"""

from __future__ import annotations

import json
import re
from typing import Any

from tokenbench.spec.deploy_profile import Profile
from tokenbench.spec.server_facts import ServerFacts

DTYPE_BYTES = {"bfloat16": 2.0, "bf16": 2.0, "float16": 2.0, "fp16": 2.0, "half": 2.0, "float32": 4.0,
               "fp32": 4.0, "int8": 1.0, "fp8": 1.0}
QUANT_BYTES = (("fp8", 1.0), ("int8", 1.0), ("w8a8", 1.0), ("awq", 0.5), ("gptq", 0.5), ("int4", 0.5),
               ("w4a16", 0.5), ("nvfp4", 0.5), ("mxfp4", 0.5), ("bitsandbytes", 0.5))
GGUF_BITS = re.compile(r"(?:^|[-_.])(?:I?Q)([2-8])(?:_[0-9A-Z_]+)?(?:[-_.]|$)", re.I)
ACTIVE_IN_NAME = re.compile(r"(?:^|[-_/])A(\d+(?:\.\d+)?)B(?:[-_/.]|$)")
EXPERTS_IN_NAME = re.compile(r"\d+x\d+(?:\.\d+)?B|(?:^|[-_/])MoE(?:[-_/]|$)", re.I)


def args_of(profile: Profile | None) -> dict[str, Any]:
    """The profile's engine arguments (free-form: the engine's own flags) with `-` and `_` spelled alike."""
    return {str(k).replace("-", "_").lower(): v for k, v in (profile.args if profile else {}).items()}


def model_name(profile: Profile | None, facts: ServerFacts | None) -> str:
    path = profile.model.path if profile else None
    return " ".join(str(x) for x in (path, facts.model if facts else None) if x)


def weight_bytes(profile: Profile | None) -> float | None:
    """Bytes per weight from a quantization argument, a GGUF file's quantization tag, or the dtype."""
    args = args_of(profile)
    quant = str(args.get("quantization") or "").lower()
    for tag, width in QUANT_BYTES:
        if tag in quant:
            return width
    name = model_name(profile, None)
    if ".gguf" in name.lower() and (m := GGUF_BITS.search(name.rsplit("/", 1)[-1])):
        return int(m.group(1)) / 8
    return DTYPE_BYTES.get(str(args.get("dtype", "")).lower())


def kv_bytes(profile: Profile | None) -> float | None:
    """Bytes per KV-cache element: kv_cache_dtype (fp8: 1), else None (the weights' dtype)."""
    kv = str(args_of(profile).get("kv_cache_dtype") or "").lower()
    return 1.0 if kv.startswith("fp8") else DTYPE_BYTES.get(kv)


def active_params(profile: Profile | None, facts: ServerFacts) -> tuple[float | None, bool]:
    """(parameters active per token in billions, or None; whether the model is known to be MoE)."""
    m = profile.model if profile else None
    active = facts.active_params_b or (m.active_params_b if m else None)
    name = model_name(profile, facts)
    if active is None and (hit := ACTIVE_IN_NAME.search(name)):
        active = float(hit.group(1))
    experts = facts.num_experts or facts.other.get("n_routed_experts")
    moe = bool((m and m.moe) or facts.moe or (isinstance(experts, int) and experts > 1)
               or active is not None or EXPERTS_IN_NAME.search(name))
    return (float(active) if active else None), moe


def _spec_config(args: dict) -> dict | None:
    cfg = args.get("speculative_config")
    if isinstance(cfg, str):
        try:
            cfg = json.loads(cfg)
        except ValueError:
            return {}
    return cfg if isinstance(cfg, dict) else None


def speculative_tokens(profile: Profile | None, facts: ServerFacts) -> tuple[bool, int | None]:
    """(speculative decoding on, draft tokens per step when known). vLLM: speculative_config with
    num_speculative_tokens; SGLang: speculative_algorithm / speculative_num_draft_tokens; llama.cpp:
    model_draft with draft_max (its default 16)."""
    args = {**args_of(profile), **{k: v for k, v in facts.other.items() if k.startswith("speculative")}}
    cfg = _spec_config(args)
    if cfg is not None:
        k = cfg.get("num_speculative_tokens")
        return True, int(k) if isinstance(k, int) else None
    if args.get("speculative_algorithm") or args.get("speculative_num_draft_tokens"):
        k = args.get("speculative_num_draft_tokens")
        return True, int(str(k)) if str(k or "").isdigit() else None
    if args.get("model_draft") or args.get("md"):
        k = args.get("draft_max", args.get("draft", 16))
        return True, int(k) if str(k).isdigit() else None
    return False, 0
