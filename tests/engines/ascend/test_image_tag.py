"""The FlagRelease image-name parser: every component of Study A's image, and tolerance."""

from __future__ import annotations

import pytest

from tokenbench.host.image_tag import parse_image

# Study A's image, exactly as in shared/seeds/000_460c11619f17c32f.txt
STUDY_A_IMAGE = ("harbor.baai.ac.cn/flagrelease-public/minicpm5-2b-ascend001-gems5.3.0-treenone-cx0.13.0-pluginnone-"
                 "vllmnone-sglang0.5.11-sglangfl0.1.0-cp311-ptnpu28-cann85-a64-25.5.0:202609070118")


def test_study_a_every_component():
    t = parse_image(STUDY_A_IMAGE)
    assert (t.registry, t.tag, t.built) == ("harbor.baai.ac.cn", "202609070118", "2026-09-07 01:18")
    assert (t.model, t.vendor) == ("minicpm5-2b", "ascend")
    assert t.components() == {
        "built": "2026-09-07 01:18", "model": "minicpm5-2b", "vendor": "ascend",
        "gems": "5.3.0", "tree": "none", "cx": "0.13.0", "plugin": "none", "vllm": "none", "sglang": "0.5.11",
        "sglangfl": "0.1.0", "python": "3.11", "ptnpu": "2.8", "cann": "8.5", "arch": "aarch64",
        "driver": "25.5.0"}
    assert t.raw == {"gems": "gems5.3.0", "tree": "treenone", "cx": "cx0.13.0", "plugin": "pluginnone",
                     "vllm": "vllmnone", "sglang": "sglang0.5.11", "sglangfl": "sglangfl0.1.0", "python": "cp311",
                     "ptnpu": "ptnpu28", "cann": "cann85", "arch": "a64", "driver": "25.5.0"}
    assert t.extra == []


@pytest.mark.parametrize("image,expected", [
    # components missing, reordered, extra tokens and the vllm-ascend hyphen (published FlagRelease names)
    ("harbor.baai.ac.cn/flagrelease-public/lfm2.5-1.2b-instruct-ascend001-gems5.3.4-tree0.6.0-cxnone-plugin0.2.0-"
     "vllm-ascend0.20.2-cp311-ptnpu210-cann90-a64-25.5.0:202608220700-v2",
     {"vllm_ascend": "0.20.2", "ptnpu": "2.10", "cann": "9.0", "tree": "0.6.0", "built": "2026-08-22 07:00"}),
    ("harbor.baai.ac.cn/flagrelease-public/kunlunxin001-gems5.0.0-treenone-triton3.0.0-cx0.13.0-plugin0.2.0-"
     "vllm0.20.2-cp310-pt29-x64-v5.0.21.43:tele4",
     {"vendor": "kunlunxin", "triton": "3.0.0", "torch": "2.9", "arch": "x86_64", "driver": "v5.0.21.43"}),
    ("harbor.baai.ac.cn/flagrelease-public/rnj-1-instruct-pp001-gemsnone-treenone-cxnone-pluginnone-vllm0.23.0-"
     "cp312-pt210-hggc130-x64-1.3.2-d7f5a2:202609051027-v2",
     {"model": "rnj-1-instruct", "platform": "hggc130", "driver": "1.3.2", "torch": "2.10"}),
    ("harbor.baai.ac.cn/flagrelease-public/flagrelease-glm-5.2-mthreads-sglang_0.5.11-plugin_0.1.0-tree_none-"
     "gems_5.0.2-vllm_none-cx_none-python_3.10.12-torch_2.9.0-pcp_musa4.3.5-driver_3.3.6-server:202606160848",
     {"sglang": "0.5.11", "python": "3.10.12", "torch": "2.9.0", "platform": "musa4.3.5", "driver": "3.3.6"}),
    ("quay.io/ascend/vllm-ascend:v0.10.2rc1", {"vllm_ascend": "0.10.2rc1"}),
    ("lmsysorg/sglang:v0.5.2-cu126", {"sglang": "0.5.2"}),
    ("vllm/vllm-openai:latest", {}),
    ("ubuntu", {}),
])
def test_tolerant(image, expected):
    comps = parse_image(image).components()
    assert {k: comps.get(k) for k in expected} == expected
    if not expected:
        assert comps == {}


def test_extra_tokens_are_kept():
    t = parse_image("r.example/x/m-ascend001-gems1.0-a64-25.5.0-server-newthing7:1")
    assert t.extra == ["server", "newthing7"] and t.driver == "25.5.0" and t.gems == "1.0"
