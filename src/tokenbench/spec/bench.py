"""What to measure: target, workload, load cells and SLOs. Pure data, no I/O."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from tokenbench.spec.base import StrictModel

FINAL_USAGE_ONLY = ("ask for the usage only at the end of the stream, as vllm bench serve does (default: on every "
                    "chunk too, vLLM/SGLang continuous_usage_stats, the exact count per chunk; it costs the server "
                    "a little); counts then come from token ids, else chunks reconciled with the final usage")

NO_MIN_TOKENS = ("leave min_tokens out of the request body: only max_tokens with ignore_eos, as vllm bench serve and "
                 "sglang.bench_serving send (default: min_tokens = max_tokens too, so a server that ignores "
                 "ignore_eos still gives exactly output_len tokens)")
EXTRA_BODY = ("JSON object merged over every request body, last (vLLM's --extra-body), e.g. "
              "'{\"top_p\": 1, \"repetition_penalty\": 1.0}'; it may not set model, prompt, messages or stream")
NEW_CONNECTION = ("send every request on a new connection, closed after it (as sglang.bench_serving, which opens "
                  "an HTTP session per request); default: keep-alive connections reused")
WARMUP_FIRST_PROMPT = ("every warmup request sends the cell's first measured prompt, as vllm bench serve "
                       "(--num-warmups) and sglang.bench_serving (--warmup-requests) do: with prefix caching the "
                       "first measured request then finds its prompt cached; default: fresh prompts of the "
                       "measured shape, none of them measured again")
PROMPT_AS_TEXT = ("random completions prompts travel as text the server tokenizes (words of measured token "
                  "counts, input_len tokens by the server's count with the special tokens it adds, e.g. BOS), "
                  "as vllm bench serve and sglang.bench_serving send them; default: input_len token ids")
FIXED_BODY_KEYS = ("model", "prompt", "messages", "stream")


def check_extra_body(body: dict[str, Any]) -> dict[str, Any]:
    """extra_body may add or change sampling fields, not what tokenbench must send to measure."""
    fixed = [k for k in FIXED_BODY_KEYS if k in body]
    if fixed:
        raise ValueError(f"extra_body may not set {', '.join(fixed)}: tokenbench sets them to measure")
    return body


class Target(StrictModel):
    base_url: str = Field(description="server root, e.g. http://127.0.0.1:8000")
    model: str | None = Field(None, description="model name; default: the first one /v1/models lists")
    api_key_env: str | None = Field(None, description="environment variable that holds the API key")
    api_key_file: str | None = Field(None, description="file whose first line is the API key")
    timeout_s: float = Field(600.0, gt=0, description="per-request timeout (whole request)")
    connect_in_ttft: bool = Field(False, description="count a new connection's set-up (TCP, TLS) in TTFT, as "
                                  "vLLM's client does; default: it is its own figure, connect_ms")
    final_usage_only: bool = Field(False, description=FINAL_USAGE_ONLY)
    no_min_tokens: bool = Field(False, description=NO_MIN_TOKENS)
    extra_body: dict[str, Any] = Field(default_factory=dict, description=EXTRA_BODY)
    new_connection_per_request: bool = Field(False, description=NEW_CONNECTION)

    _extra = field_validator("extra_body")(check_extra_body)


WorkloadKind = Literal["random", "sharegpt", "jsonl", "prefix", "image", "trace"]
FIXED_LENGTH_KINDS = ("random", "prefix", "image")     # input_len / output_len given; sweeps take them from pairs
DATASET_KINDS = ("sharegpt", "jsonl", "trace")          # lengths come from the file (output_len may force)


class WorkloadSource(StrictModel):
    """What prompts are made of, apart from the asked lengths. docs/workloads.md describes each kind."""

    kind: WorkloadKind = Field("random", description="random | sharegpt | jsonl | prefix | image | trace")
    output_len: int | None = Field(None, gt=0, description="exact output tokens (max_tokens=min_tokens, ignore_eos); "
                                   "for sharegpt/jsonl/trace: forces every request's output length")
    dataset_path: str | None = Field(None, description="local file: ShareGPT JSON/JSONL, prompt JSONL, mooncake "
                                     "trace JSONL; for image: an image file or a folder of images")
    min_input_len: int | None = Field(None, gt=0, description="dataset filter: drop prompts shorter than this")
    max_input_len: int | None = Field(None, gt=0, description="dataset filter: drop prompts longer than this")
    min_output_len: int | None = Field(None, gt=0, description="dataset filter: drop entries asking fewer tokens")
    max_output_len: int | None = Field(None, gt=0, description="dataset filter: drop entries asking more tokens")
    prefix_len: int | None = Field(None, gt=0, description="prefix: tokens shared by every prompt of a group")
    num_groups: int = Field(1, gt=0, description="prefix: groups, each with its own shared prefix")
    image_count: int = Field(1, gt=0, description="image: images per request")
    image_width: int = Field(512, gt=0, le=8192, description="image: synthetic image width, pixels")
    image_height: int = Field(512, gt=0, le=8192, description="image: synthetic image height, pixels")
    image_format: Literal["png", "bmp"] = Field("png", description="image: synthetic image format")
    time_scale: float = Field(1.0, gt=0, description="trace: multiply the trace's gaps (0.5 replays twice as fast)")
    tokenizer_path: str | None = Field(None, description="local Hugging Face tokenizer dir (tokenizer.json; "
                                       "config.json gives the vocab size): builds chat prompts and counts "
                                       "datasets without the server's /tokenize; default: ask the server")
    vocab_size: int | None = Field(None, ge=2, description="vocabulary size, for a server that does not report it")
    prompt_as_text: bool = Field(False, description=PROMPT_AS_TEXT)

    def _check_kind(self, input_len: int | None) -> None:
        kind = self.kind
        if kind in FIXED_LENGTH_KINDS and (input_len is None or self.output_len is None):
            raise ValueError(f"a {kind} workload needs input_len and output_len (--input-len, --output-len)")
        if kind in DATASET_KINDS and input_len is not None:
            raise ValueError(f"input_len does not apply to {kind}: prompt lengths come from the dataset "
                             "(filter them with min_input_len / max_input_len)")
        if kind in DATASET_KINDS and not self.dataset_path:
            raise ValueError(f"a {kind} workload needs dataset_path (--dataset-path FILE)")
        if kind == "prefix" and (self.prefix_len is None or input_len is None or self.prefix_len >= input_len):
            raise ValueError(f"a prefix workload needs 0 < prefix_len < input_len (got prefix_len="
                             f"{self.prefix_len}, input_len={input_len}): input_len counts prefix + unique suffix")
        for name in ("prefix_len",) if kind != "prefix" else ():
            if getattr(self, name) is not None:
                raise ValueError(f"{name} applies to prefix workloads only")
        if kind != "trace" and self.time_scale != 1.0:
            raise ValueError("time_scale applies to trace workloads only")
        if self.dataset_path is not None and kind in ("random", "prefix"):
            raise ValueError(f"dataset_path does not apply to {kind} workloads")
        for low, high in (("min_input_len", "max_input_len"), ("min_output_len", "max_output_len")):
            lo, hi = getattr(self, low), getattr(self, high)
            if lo is not None and hi is not None and lo > hi:
                raise ValueError(f"{low} {lo} is above {high} {hi}: no entry could pass")
        if kind not in DATASET_KINDS and any(getattr(self, f) is not None for f in LENGTH_FILTERS):
            raise ValueError(f"length filters apply to dataset workloads (sharegpt, jsonl, trace), not {kind}")


ALLOW_CLIENT_LAG = ("keep a cell whose client lagged (event-loop lag, CPU) as ok, its figures marked '~' with "
                    "the reason, instead of invalid")
LENGTH_FILTERS = ("min_input_len", "max_input_len", "min_output_len", "max_output_len")


class Workload(WorkloadSource):
    api: Literal["completions", "chat"] = "completions"
    input_len: int | None = Field(None, gt=0, description="exact prompt tokens (random, prefix: prefix + suffix; "
                                  "image: the text part)")
    seed: int = 0

    @model_validator(mode="after")
    def _consistent(self) -> "Workload":
        self._check_kind(self.input_len)
        if self.kind == "image" and self.api != "chat":
            raise ValueError("image workloads use the chat API (--api chat): images travel as image_url parts")
        if self.prompt_as_text and (self.kind != "random" or self.api != "completions"):
            raise ValueError(f"prompt_as_text applies to random completions prompts (chat prompts are text "
                             f"already), not to {self.kind} on the {self.api} API")
        return self

    @property
    def fixed_lengths(self) -> bool:
        """Every request asks the same input_len and output_len."""
        return self.kind in FIXED_LENGTH_KINDS

    @property
    def label(self) -> str:
        """The workload part of a cell key: `512:128` for random, the kind and its knobs otherwise
        (parentheses, not brackets: consoles read `[...]` as markup)."""
        lengths = f"{self.input_len}:{self.output_len}"
        out = f":{self.output_len}" if self.output_len else ""
        name = Path(self.dataset_path).name if self.dataset_path else ""
        if self.kind == "random":
            return lengths
        if self.kind == "prefix":
            return f"prefix({self.num_groups}x{self.prefix_len}):{lengths}"
        if self.kind == "image":
            src = name or f"{self.image_width}x{self.image_height}.{self.image_format}"
            return f"image({src}*{self.image_count}):{lengths}"
        if self.kind == "trace":
            return f"trace({name},x{self.time_scale:g}){out}"
        return f"{self.kind}({name}){out}"


class SLO(StrictModel):
    ttft_ms: float | None = Field(None, gt=0, description="goodput SLO: time to first token, ms")
    tpot_ms: float | None = Field(None, gt=0, description="goodput SLO: time per output token, ms")
    e2el_ms: float | None = Field(None, gt=0, description="goodput SLO: end-to-end latency, ms")

    def is_empty(self) -> bool:
        return self.ttft_ms is None and self.tpot_ms is None and self.e2el_ms is None


class Load(StrictModel):
    """One cell's load: closed-loop concurrency, an open-loop request rate, or a trace's own arrivals."""

    concurrency: int | None = Field(None, gt=0, description="closed loop: requests in flight")
    request_rate: float | None = Field(None, gt=0, description="open loop: requests/s")
    arrival: Literal["poisson", "constant", "trace"] = Field(
        "poisson", description="open-loop arrivals; trace: the trace workload's timestamps (no rate)")
    max_concurrency: int | None = Field(None, gt=0, description="cap on in-flight requests in rate mode")
    burstiness: float = Field(1.0, gt=0, description="Poisson arrivals: shape of the gamma-distributed gaps "
                              "(vLLM's --burstiness): 1 = Poisson, < 1 burstier, > 1 more even; same mean rate")
    num_prompts: int | None = Field(None, gt=0, description="requests per cell (trace: at most this many rows)")
    duration_s: float | None = Field(None, gt=0, description="seconds per cell (trace: the rows due before this)")
    warmup_requests: int | None = Field(None, ge=0, description="default: the cell's concurrency")
    warmup_first_prompt: bool = Field(False, description=WARMUP_FIRST_PROMPT)

    @model_validator(mode="after")
    def _one_mode(self) -> "Load":
        if self.arrival == "trace":
            if self.concurrency is not None or self.request_rate is not None:
                raise ValueError("a trace replay takes its arrivals from the trace: drop concurrency and request_rate "
                                 "(speed it up or slow it down with the workload's time_scale)")
            return self
        if (self.concurrency is None) == (self.request_rate is None):
            raise ValueError("give exactly one of concurrency or request_rate")
        if self.burstiness != 1.0 and (self.request_rate is None or self.arrival != "poisson"):
            raise ValueError("burstiness shapes Poisson arrivals: it needs a request rate and arrival poisson")
        if self.num_prompts is None and self.duration_s is None:
            raise ValueError("give num_prompts or duration_s")
        return self

    @property
    def label(self) -> str:
        if self.concurrency is not None:
            return f"c={self.concurrency}"
        if self.arrival == "trace":
            return "replay" + (f",max={self.max_concurrency}" if self.max_concurrency else "")
        return f"rate={self.request_rate:g}/s" + (f",b={self.burstiness:g}" if self.burstiness != 1.0 else "")

    @property
    def open_loop(self) -> bool:
        return self.concurrency is None

    @property
    def in_flight_cap(self) -> int | None:
        return self.concurrency if self.concurrency is not None else self.max_concurrency

    def warmup_count(self) -> int:
        if self.warmup_requests is not None:
            return self.warmup_requests
        return self.in_flight_cap or 1


class BenchSpec(StrictModel):
    target: Target
    workload: Workload
    cells: list[Load] = Field(min_length=1)
    slo: SLO = Field(default_factory=SLO)
    allow_length_mismatch: bool = False
    allow_client_lag: bool = Field(False, description=ALLOW_CLIENT_LAG)
    max_error_rate: float = Field(0.0, ge=0, le=1, description="fail a cell above this failed fraction")

    @model_validator(mode="after")
    def _trace_arrivals(self) -> "BenchSpec":
        traced = [c.arrival == "trace" for c in self.cells]
        if self.workload.kind == "trace" and not all(traced):
            raise ValueError("a trace workload replays the trace's arrivals: its cells take no concurrency "
                             "or request_rate (arrival: trace)")
        if self.workload.kind != "trace" and any(traced):
            raise ValueError("arrival 'trace' needs a trace workload (kind: trace, dataset_path: FILE)")
        return self
