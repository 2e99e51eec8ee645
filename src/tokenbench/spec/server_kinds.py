"""What an OpenAI-compatible server accepts, as the capability probe finds it (load/probe.py) or as a named
server kind is known to behave (`--backend`, in vLLM's spelling where it has one). Pure data: the probe
fills `Capabilities`, `--no-probe` takes a kind's `known` ones, and docs/compatibility.md is the table of
`KINDS`. How each request keeps its lengths follows from the capabilities (`length_method`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic import Field

from tokenbench.spec.base import StrictModel

ServerKind = Literal["openai", "vllm", "sglang", "llama.cpp", "tgi", "tensorrt-llm", "lmdeploy", "mindie",
                     "transformers", "gateway"]
LengthMethod = Literal["ignore_eos+min_tokens", "ignore_eos", "min_tokens", "max_tokens"]
PromptMethod = Literal["token ids", "text", "chat messages"]
EXACT_METHODS: tuple[LengthMethod, ...] = ("ignore_eos+min_tokens", "ignore_eos", "min_tokens")


class Capabilities(StrictModel):
    """What the server accepted, stored with the run beside the server's facts. None: not probed (a kind's
    known behaviour or the default was assumed); `refused` says, one line each, what was dropped and why."""

    kind: str | None = Field(None, description="the named server kind given (--backend), if any")
    probed: bool = Field(False, description="measured by the probe (else assumed from the kind)")
    api: Literal["completions", "chat"] = "completions"   # the API the run uses (the probe's main request)
    models_status: int | None = None             # HTTP status of GET /v1/models
    models_listed: int | None = None             # ids it listed
    endpoints: dict[str, bool] = Field(default_factory=dict)   # completions / chat / responses -> served
    token_ids: bool | None = None                # completions prompt as a list of token ids
    ignore_eos: bool | None = None
    min_tokens: bool | None = None
    stream_options: bool | None = None           # stream_options accepted
    stream_usage: bool | None = None             # usage came in the stream
    continuous_usage: bool | None = None         # usage on every chunk (continuous_usage_stats)
    done_marker: bool | None = None              # `data: [DONE]` ends the stream (else a clean end)
    tokenize: bool | None = None                 # POST /tokenize answers
    refused: list[str] = Field(default_factory=list)      # one line per field left out: why
    dropped: list[str] = Field(default_factory=list)      # the fields left out (body keys; "prompt": token ids)
    requests: int = 0                            # the probe's own requests
    method: str = ""                             # the line the run states: how its lengths were kept (method_line)
    seconds: float = 0.0

    @property
    def length_method(self) -> LengthMethod:
        """The strongest exact-length method the server allows."""
        eos, minimum = self.ignore_eos is not False, self.min_tokens is not False
        return ("ignore_eos+min_tokens" if eos and minimum else "ignore_eos" if eos
                else "min_tokens" if minimum else "max_tokens")

    @property
    def exact(self) -> bool:
        return self.length_method in EXACT_METHODS

    @property
    def prompt_method(self) -> PromptMethod:
        if self.api == "chat":
            return "chat messages"
        return "text" if self.token_ids is False else "token ids"

    def method_line(self, min_tokens_asked: bool = True, ignore_eos_asked: bool = True) -> str:
        """One line: how lengths were kept and how prompts travel (console, JSON, report)."""
        method = self.length_method
        if not ignore_eos_asked:
            method = "min_tokens" if "min_tokens" in method and min_tokens_asked else "max_tokens"
        elif not min_tokens_asked and method == "ignore_eos+min_tokens":
            method = "ignore_eos"
        how = "exact" if method in EXACT_METHODS else "not forced (measured per request; early ends counted)"
        return f"output lengths {how} by {method}; prompts as {self.prompt_method}"


@dataclass(frozen=True)
class KindInfo:
    """A named server kind: what it is known to accept (taken as is with --no-probe) and how it differs."""

    name: ServerKind
    server: str                     # what it is
    known: Capabilities
    differs: str                    # its known differences from vLLM's OpenAI server, in a sentence or two
    ignored: tuple[str, ...] = ()   # fields it accepts without honouring them: the probe cannot tell, the kind can


def _known(kind: str, **given: bool) -> Capabilities:
    return Capabilities(kind=kind, **{"token_ids": True, "ignore_eos": True, "min_tokens": True,
                                      "stream_options": True, "stream_usage": True, "continuous_usage": False,
                                      "done_marker": True, "tokenize": False, **given})


KINDS: dict[str, KindInfo] = {k.name: k for k in (
    KindInfo("openai", "any OpenAI-compatible server (the OpenAI API's own fields only)",
             _known("openai", ignore_eos=False, min_tokens=False),
             "standard fields only: no ignore_eos or min_tokens, so output lengths are measured, not forced"),
    KindInfo("vllm", "vLLM's OpenAI server (vllm serve)", _known("vllm", continuous_usage=True, tokenize=True),
             "the reference behaviour: usage on a final chunk with `choices: []`, continuous_usage_stats, /tokenize"),
    KindInfo("sglang", "SGLang (python -m sglang.launch_server)", _known("sglang", continuous_usage=True, tokenize=True),
             "as vLLM; /v1/models lists the served path as its root"),
    KindInfo("llama.cpp", "llama.cpp's llama-server", _known("llama.cpp", min_tokens=False, tokenize=True),
             "unknown fields ignored (min_tokens silently); completions put usage on the finish chunk; "
             "/v1/models meta holds n_ctx and n_vocab", ("min_tokens",)),
    KindInfo("tgi", "Hugging Face Text Generation Inference (Messages API)",
             _known("tgi", token_ids=False, ignore_eos=False, min_tokens=False),
             "prompts as text only; ignore_eos and min_tokens are no fields of its OpenAI routes (accepted, "
             "ignored); finish_reason eos_token; /tokenize takes `inputs`", ("ignore_eos", "min_tokens")),
    KindInfo("tensorrt-llm", "TensorRT-LLM (trtllm-serve)", _known("tensorrt-llm"),
             "vLLM's request fields (ignore_eos, min_tokens, token-id prompts); no /tokenize"),
    KindInfo("lmdeploy", "LMDeploy (lmdeploy serve api_server)", _known("lmdeploy", min_tokens=False),
             "ignore_eos yes, min_tokens no (min_new_tokens is its own name); /v1/encode instead of /tokenize",
             ("min_tokens",)),
    KindInfo("mindie", "Huawei MindIE Service (OpenAI API)", _known("mindie", token_ids=False, min_tokens=False),
             "chat API; ignore_eos as an extension field, min_tokens not one; usage on the last chunk with "
             "include_usage", ("min_tokens",)),
    KindInfo("transformers", "Hugging Face `transformers serve` (5.x, continuous batching)",
             _known("transformers", token_ids=False, ignore_eos=False, min_tokens=False, done_marker=False),
             "/v1/models lists the hub cache (500 or empty for a local model); ignore_eos/min_tokens refused "
             "(422); prompts must be strings (400); no [DONE]; usage on the finish chunk whatever stream_options says"),
    KindInfo("gateway", "an API gateway in front of a server (e.g. LiteLLM proxy)",
             _known("gateway", token_ids=True, ignore_eos=True, min_tokens=True),
             "lists its own model names; may buffer the stream (marked from what the client sees); no /tokenize"),
)}
