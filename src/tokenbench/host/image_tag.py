"""Component versions encoded in a FlagRelease container image name.

FlagRelease names its images after the stack inside them, in two styles seen in published images:

    compact     <model>-<vendor><NNN>-gems5.3.0-treenone-cx0.13.0-pluginnone-vllmnone-sglang0.5.11-
                sglangfl0.1.0-cp311-ptnpu28-cann85-a64-25.5.0[-extra...]:<YYYYMMDDHHMM>[-v2]
    underscore  flagrelease-<model>-<vendor>-sglang_0.5.11-plugin_0.1.0-tree_none-gems_5.0.2-...-
                python_3.10.12-torch_2.9.0-pcp_musa4.3.5-driver_3.3.6-server:<tag>

Parsing is tolerant: components may be missing, in another order or unknown (kept in `extra`);
`none` means the image does not contain that component (e.g. treenone: no FlagTree). Decoding
conventions (documented guesses where the name alone cannot prove them): cpNNN is CPython
(cp311 -> 3.11, certain); ptnpu28 / pt29 / pt210 are torch_npu / torch major+minor (-> 2.8, 2.9, 2.10);
cann85 -> CANN 8.5; the version-like token right after the architecture is the NPU/GPU driver
(25.5.0 matches `npu-smi` 25.5.0 in Study A); a 12-digit tag is the build time YYYYMMDDHHMM.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field

# key -> field; longest keys are tried first so that sglangfl is not read as sglang + "fl..."
KEYS = {
    "gems": "gems", "tree": "tree", "flagtree": "tree", "cx": "cx", "plugin": "plugin", "scale": "scale",
    "vllm_ascend": "vllm_ascend", "vllm_fl": "vllm_fl", "vllm": "vllm", "sglangfl": "sglangfl",
    "sglang": "sglang", "triton": "triton", "cp": "python", "python": "python", "ptnpu": "ptnpu",
    "pt": "torch", "torch": "torch", "cann": "cann", "pcp": "platform", "musa": "platform",
    "maca": "platform", "hggc": "platform", "corex": "platform", "dtk": "platform", "driver": "driver",
    "arc": "arch", "arch": "arch", "gpu": "gpu", "model": "model",
}
_UNDERSCORE_ONLY = {"arc", "arch", "gpu", "model"}
_FREE_VALUE = _UNDERSCORE_ONLY | {"pcp"}                  # values that need not start with a digit
# official engine images: the tag is the engine's version (quay.io/ascend/vllm-ascend:v0.10.2rc1)
ENGINE_IMAGES = {"vllm-ascend": "vllm_ascend", "vllm-openai": "vllm", "sglang": "sglang"}
_TAG_VERSION = re.compile(r"^v?(\d+\.\d+[\w.]*?)(?:-.*)?$")
_ORDER = sorted(KEYS, key=len, reverse=True)
_COMPACT_VALUE = re.compile(r"^(none|v?\d[\w.+]*)$")
_ARCH = {"a64": "aarch64", "arm64": "aarch64", "aarch64": "aarch64", "x64": "x86_64", "amd64": "x86_64",
         "x86_64": "x86_64"}
_VENDOR = re.compile(r"^([a-z]+)(\d{3})$")
_VERSIONISH = re.compile(r"^v?\d+(\.\d+)+[\w.]*$")
_BUILD = re.compile(r"^(\d{4})(\d{2})(\d{2})(\d{2})(\d{2})(?:-(.+))?$")


@dataclass(slots=True, kw_only=True)
class ImageTag:
    image: str
    registry: str | None = None
    repository: str = ""
    tag: str | None = None
    built: str | None = None            # from a YYYYMMDDHHMM tag
    model: str | None = None
    vendor: str | None = None           # e.g. ascend001 -> ascend
    gems: str | None = None
    tree: str | None = None
    cx: str | None = None
    plugin: str | None = None
    scale: str | None = None
    vllm: str | None = None
    vllm_ascend: str | None = None
    vllm_fl: str | None = None
    sglang: str | None = None
    sglangfl: str | None = None
    triton: str | None = None
    python: str | None = None
    torch: str | None = None
    ptnpu: str | None = None
    cann: str | None = None
    platform: str | None = None         # non-CANN compute platform token, e.g. musa43, hggc130
    arch: str | None = None             # aarch64 | x86_64
    driver: str | None = None
    gpu: str | None = None
    raw: dict[str, str] = field(default_factory=dict)     # component -> text as written in the name
    extra: list[str] = field(default_factory=list)        # tokens not recognised

    def components(self) -> dict[str, str]:
        """The recognised components only (what the image name says it contains)."""
        skip = {"image", "registry", "repository", "tag", "raw", "extra"}
        return {k: v for k, v in asdict(self).items() if k not in skip and v is not None}

    def to_dict(self) -> dict:
        return asdict(self)


def split_reference(image: str) -> tuple[str | None, str, str | None]:
    """(registry, repository path, tag) of an image reference; digests are kept in the tag."""
    ref, tag = image, None
    if "@" in ref:
        ref, tag = ref.split("@", 1)
    last = ref.rsplit("/", 1)[-1]
    if tag is None and ":" in last:
        ref, tag = ref.rsplit(":", 1)
    parts = ref.split("/")
    registry = parts[0] if len(parts) > 1 and ("." in parts[0] or ":" in parts[0] or parts[0] == "localhost") else None
    return registry, "/".join(parts[1:] if registry else parts), tag


def parse_image(image: str) -> ImageTag:
    """Every component the image name encodes; never fails (an unrelated name yields few fields)."""
    registry, repository, tag = split_reference(image)
    out = ImageTag(image=image, registry=registry, repository=repository, tag=tag)
    tokens = repository.rsplit("/", 1)[-1].replace("vllm-ascend", "vllm_ascend").split("-")
    start = _first_component(tokens)
    if start < len(tokens):
        _model_and_vendor(out, tokens[:start])
        _components(out, tokens[start:])
    else:
        _engine_image(out, repository.rsplit("/", 1)[-1], tag)
    if tag and (m := _BUILD.match(tag)):
        out.built = f"{m[1]}-{m[2]}-{m[3]} {m[4]}:{m[5]}"
    return out


def _first_component(tokens: list[str]) -> int:
    """Index of the first component token: after a <vendor><NNN> token when there is one."""
    for i, tok in enumerate(tokens[:-1]):
        if _VENDOR.match(tok) and _component(tokens[i + 1]):
            return i + 1
    for i, tok in enumerate(tokens):
        if _component(tok):
            return i
    return len(tokens)


def _components(out: ImageTag, tokens: list[str]) -> None:
    after_arch = False
    for tok in tokens:
        hit = _component(tok)
        if hit is None and tok in _ARCH:
            hit = ("arch", tok)
        if hit is None:
            if after_arch and out.driver is None and _VERSIONISH.match(tok):
                out.driver, out.raw["driver"] = tok, tok
            else:
                out.extra.append(tok)
            continue
        key, value = hit
        attr = KEYS[key]
        out.raw[attr] = tok
        setattr(out, attr, _decode(attr, key, value, tok))
        after_arch = after_arch or attr == "arch"


def _component(tok: str) -> tuple[str, str] | None:
    for key in _ORDER:
        rest = tok[len(key) + 1:]
        if tok.startswith(key + "_") and rest and (key in _FREE_VALUE or _COMPACT_VALUE.match(rest.split("_")[0])):
            return key, rest
        if key not in _UNDERSCORE_ONLY and tok.startswith(key) and _COMPACT_VALUE.match(tok[len(key):]):
            return key, tok[len(key):]
    return None


def _decode(attr: str, key: str, value: str, tok: str) -> str:
    if attr == "arch":
        return _ARCH.get(value, value)
    if attr == "platform":
        return value if "_" in tok[:len(key) + 1] else tok      # pcp_musa4.3.5 -> musa4.3.5; musa43 kept
    if value == "none" or not value.isdigit():
        return value
    if key == "cp" or (attr in ("torch", "ptnpu", "cann") and len(value) >= 2):
        return f"{value[0]}.{value[1:]}"                        # cp311 -> 3.11, ptnpu28 -> 2.8, cann85 -> 8.5
    return value


def _engine_image(out: ImageTag, name: str, tag: str | None) -> None:
    attr = ENGINE_IMAGES.get(name)
    if attr and tag and (m := _TAG_VERSION.match(tag)):
        setattr(out, attr, m[1])
        out.raw[attr] = f"{name}:{tag}"


def _model_and_vendor(out: ImageTag, lead: list[str]) -> None:
    if lead and (m := _VENDOR.match(lead[-1])):
        out.vendor = m[1]
        lead = lead[:-1]
    if lead:
        out.model = "-".join(lead)
