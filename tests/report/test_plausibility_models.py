"""Issue 15: the roofline knows active parameters (MoE), weight and KV byte widths (FP8/INT4/GGUF) and
speculative decoding, and says "not checked" where the run does not tell it what it needs."""

import pytest

from tokenbench.judge import hardware
from tokenbench.judge.model_facts import speculative_tokens, weight_bytes
from tokenbench.judge.plausibility import ModelSize, Overrides, Roofline, Unknown, size_or_reason
from tokenbench.report.explain import shaped_by
from tokenbench.spec.deploy_profile import Profile
from tokenbench.spec.server_facts import ServerFacts

H100 = hardware.lookup("h100")


def prof(partial: dict) -> Profile:
    """A profile stating only what a test gives (a name, an engine and a model path filled in)."""
    model = {"path": "model", **partial.get("model", {})}
    return Profile.model_validate({"name": "t", "engine": "vllm", **partial, "model": model})


def size(profile, facts=None, ov=Overrides()):
    return size_or_reason(prof(profile), ServerFacts.from_dict(facts or {}), ov)


def test_moe_bounds_use_the_active_parameters():
    prof = {"model": {"path": "/models/Qwen3-30B-A3B", "params_b": 30.5, "bytes_per_param": 2}}
    s = size(prof)
    assert s.params_b == 3.0 and s.total_params_b == 30.5
    moe, dense = Roofline(H100, 1, s), Roofline(H100, 1, ModelSize(30.5, 2))
    assert moe.per_stream == pytest.approx(dense.per_stream * 30.5 / 3)
    # a 3B-active MoE decoding at 400 tok/s per stream is fast, not impossible
    assert dense.per_stream < 400 < moe.per_stream
    assert ("plaus.moe", {"active": "3", "total": "30.5"}) in shaped_by(moe)


def test_moe_without_active_parameters_is_not_checked():
    mixtral = {"model": {"path": "/models/Mixtral-8x7B-Instruct", "params_b": 46.7, "bytes_per_param": 2}}
    assert size(mixtral) == Unknown("no_active", 46.7)
    assert size({"model": {"params_b": 20, "bytes_per_param": 2, "moe": True}}).reason == "no_active"
    assert size(mixtral, ov=Overrides(active_params_b=12.9)).params_b == 12.9
    explicit = {"model": {"params_b": 46.7, "bytes_per_param": 2, "active_params_b": 12.9}}
    assert size(explicit).params_b == 12.9


@pytest.mark.parametrize("profile, width", [
    ({"args": {"quantization": "fp8"}}, 1.0), ({"args": {"quantization": "awq_marlin"}}, 0.5),
    ({"args": {"quantization": "gptq"}}, 0.5), ({"args": {"dtype": "bfloat16"}}, 2.0),
    ({"model": {"path": "/m/gemma-3-270m-it-Q4_K_M.gguf"}}, 0.5), ({"model": {"path": "/m/x-Q8_0.gguf"}}, 1.0),
    ({"args": {}}, None),
])
def test_weight_byte_widths(profile, width):
    assert weight_bytes(prof(profile)) == width


def test_fp8_weights_double_the_per_stream_bound():
    fp8 = size({"model": {"params_b": 8}, "args": {"quantization": "fp8", "kv-cache-dtype": "fp8_e4m3"}})
    bf16 = size({"model": {"params_b": 8}, "args": {"dtype": "bfloat16"}})
    assert fp8.bytes_per_param == 1 and fp8.kv_bytes == 1 and bf16.bytes_per_param == 2
    assert Roofline(H100, 1, fp8).per_stream == pytest.approx(2 * Roofline(H100, 1, bf16).per_stream)


@pytest.mark.parametrize("args, expected", [
    ({"speculative-config": '{"method": "eagle", "num_speculative_tokens": 3}'}, (True, 3)),
    ({"speculative_config": {"model": "d", "num_speculative_tokens": 5}}, (True, 5)),
    ({"speculative-config": '{"method": "ngram"}'}, (True, None)),
    ({"speculative-algorithm": "EAGLE", "speculative-num-draft-tokens": 4}, (True, 4)),
    ({"model-draft": "/m/draft.gguf"}, (True, 16)),
    ({"dtype": "bfloat16"}, (False, 0)),
])
def test_speculative_decoding_is_read_from_the_engine_args(args, expected):
    flags = {k: v for k, v in args.items() if not isinstance(v, dict)}       # a profile's flags are scalars;
    told = {k: v for k, v in args.items() if isinstance(v, dict)}            # a config object: the server's facts
    assert speculative_tokens(prof({"args": flags}), ServerFacts.from_dict(told)) == expected


def test_speculative_decoding_raises_decode_bounds_not_compute():
    prof = {"model": {"params_b": 8, "bytes_per_param": 2},
            "args": {"speculative-config": '{"num_speculative_tokens": 3}'}}
    spec, plain = Roofline(H100, 1, size(prof)), Roofline(H100, 1, ModelSize(8, 2))
    assert spec.per_stream == pytest.approx(4 * plain.per_stream) and spec.compute == plain.compute
    unknown = {**prof, "args": {"speculative-config": '{"method": "ngram"}'}}
    assert size(unknown) == Unknown("spec_unknown")
    assert size(unknown, ov=Overrides(spec_tokens=2)).spec_tokens == 2
