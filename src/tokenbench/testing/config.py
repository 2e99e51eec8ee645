"""ReferenceConfig: how the reference server behaves (the CLI derives its flags from these fields)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

from tokenbench.errors import UsageError
from tokenbench.testing import faults as F

REASONING_FIELDS = ("reasoning", "reasoning_content", "both")


@dataclass(kw_only=True)
class ReferenceConfig:
    """How the reference server behaves. Times in ms; every field is documented for the CLI."""

    ttft_ms: float = field(metadata={"help": "time to first token, from admission"})
    itl_ms: float = field(metadata={"help": "time between consecutive tokens"})
    tokens_per_chunk: int = field(default=1, metadata={"help": "tokens carried by each SSE chunk"})
    chunks_per_write: int = field(default=1, metadata={
        "help": "SSE chunks written together in one write, when the last of them is due (a server's multi-step "
                "scheduling or stream interval: several events in one read, each its own token chunk)"})
    vocab_size: int = field(default=32000, metadata={"help": "token ids are in [0, vocab_size)"})
    report_vocab: bool = field(default=True, metadata={
        "help": "report vocab_size in /get_server_info (off: a server whose vocabulary clients must be told)"})
    model: str = field(default="reference-model", metadata={"help": "model name served"})
    max_model_len: int = field(default=131072, metadata={"help": "context length (prompt + output)"})
    kv_capacity_tokens: int | None = field(
        default=None, metadata={"help": "KV tokens: running requests' prompt+max_tokens must fit"})
    max_running: int | None = field(
        default=None, metadata={"help": "requests decoding at once; the rest wait in a FIFO"})
    honor_ignore_eos: bool = field(
        default=True, metadata={"help": "if off, ignore ignore_eos/min_tokens and stop early"})
    send_usage: bool = field(default=True, metadata={"help": "report usage when asked"})
    send_log: str | None = field(default=None, metadata={"help": "JSONL send log path"})
    continuous_usage: bool = field(
        default=True, metadata={"help": "honour stream_options.continuous_usage_stats (usage on every chunk)"})
    usage_chunk: bool = field(
        default=False, metadata={"help": "completions: usage on a separate final chunk with `choices: []` (vLLM, "
                                          "SGLang), not on the last token's chunk (llama.cpp)"})
    token_ids: bool = field(default=True, metadata={"help": "send each chunk's token_ids (vLLM sends none)"})
    tokenize_endpoint: bool = field(
        default=True, metadata={"help": "serve /tokenize and /detokenize (off: like a gateway, 404)"})
    reasoning_tokens: int = field(
        default=0, metadata={"help": "chat: the first N output tokens stream as reasoning"})
    reasoning_field: str = field(
        default="reasoning", metadata={"help": "delta field of reasoning: reasoning, reasoning_content or both"})
    empty_every: int = field(
        default=0, metadata={"help": "every Nth output token (the first included) streams with empty text"})
    tool_calls: bool = field(
        default=False, metadata={"help": "chat: the answer streams as tool-call argument deltas"})
    api_key: str | None = None
    recording: str | None = field(
        default=None, metadata={"help": "replay a recorded server (a recording's JSON file: testing/recordings.py), "
                                        "its events paced by ttft_ms and itl_ms"})
    faults: dict[str, float] = field(default_factory=dict)
    seed: int = field(default=0, metadata={"help": "seed for fault draws and sampling"})
    stall_s: float = field(default=5.0, metadata={"help": "length of the `stall` fault"})
    slow_headers_s: float = field(default=5.0, metadata={"help": "delay of the `slow_headers` fault"})
    slow_end_s: float = field(
        default=0.3, metadata={"help": "`slow_end` fault: the stream's end (usage chunk, [DONE]) this late"})
    proxy_buffer_bytes: int = field(
        default=4096, metadata={"help": "`proxy_buffer` fault: the body arrives in pieces of this many bytes"})
    itl_end_ms: float | None = field(default=None, metadata={
        "help": "ITL ramps linearly from itl_ms to this over ramp_s seconds from the first generation request's "
                "arrival (a server slowing down across a cell); unset: a steady ITL"})
    ramp_s: float = field(default=60.0, metadata={"help": "length of the ITL ramp (itl_end_ms)"})
    # ---- load model (docs/reference-server.md "Load model"); the defaults leave it off ----
    itl_per_running_ms: float = field(
        default=0.0, metadata={"help": "load model: ITL grows by this per running request "
                                       "(itl = itl_ms + this x running)"})
    prefill_ms_per_token: float = field(
        default=0.0, metadata={"help": "load model: prefill ms per uncached prompt token, one prompt at a time "
                                       "(FIFO); the first token is due ttft_ms after its prefill ends"})
    captured_batch_sizes: tuple[int, ...] | None = field(
        default=None, metadata={"help": "load model: captured (CUDA-graph) batch sizes; a running batch is padded "
                                        "to the next one, above the largest it runs eager"})
    eager_itl_factor: float = field(
        default=1.0, metadata={"help": "load model: ITL multiplied by this when the batch runs eager"})
    eager_itl_ms: float = field(
        default=0.0, metadata={"help": "load model: ms added to ITL (after the factor) when the batch runs eager"})
    # ---- prefix cache (docs/reference-server.md "Prefix cache") ----
    prefix_cache_blocks: int | None = field(
        default=None, metadata={"help": "prefix cache of this many blocks (LRU); unset: no prefix cache"})
    block_size: int = field(default=16, metadata={"help": "prefix cache: tokens per block"})
    # ---- speculative decoding (docs/reference-server.md "Speculative decoding") ----
    spec_tokens: int = field(
        default=0, metadata={"help": "speculative decoding: draft tokens per step (0: off)"})
    spec_accept_text: float = field(
        default=0.7, metadata={"help": "speculative decoding: acceptance of each draft token, text-like prompt"})
    spec_accept_random: float = field(
        default=0.1, metadata={"help": "speculative decoding: acceptance of each draft token, random-id prompt"})
    # ---- the server's own timings (docs/reference-server.md "Spans") ----
    otlp_endpoint: str | None = field(
        default=None, metadata={"help": "export an OpenTelemetry span per request that carries a traceparent to "
                                        "this OTLP endpoint (http: http://HOST:PORT/v1/traces; grpc: HOST:PORT)"})
    otlp_protocol: str = field(default="http", metadata={"help": "OTLP transport of the spans: http or grpc"})
    span_clock_offset_ms: float = field(
        default=0.0, metadata={"help": "the spans' clock runs this far ahead of the server's wall clock (to test "
                                       "a client's clock-offset estimate)"})
    vllm_metrics: bool = field(
        default=False, metadata={"help": "/metrics also under vLLM's names, with its request-time histograms "
                                         "(queue, prefill, decode, inference, TTFT, e2e)"})

    def __post_init__(self) -> None:
        if self.ttft_ms < 0 or self.itl_ms < 0 or self.stall_s < 0 or self.slow_headers_s < 0:
            raise UsageError("negative time in reference config", hint="times are >= 0")
        if self.tokens_per_chunk < 1 or self.chunks_per_write < 1 or self.vocab_size < 4 or self.max_model_len < 2:
            raise UsageError("tokens_per_chunk >= 1, chunks_per_write >= 1, vocab_size >= 4, max_model_len >= 2 "
                             "required")
        if (self.itl_end_ms is not None and self.itl_end_ms < 0) or self.ramp_s <= 0:
            raise UsageError("itl_end_ms >= 0 and ramp_s > 0 required")
        if any(x is not None and x < 1 for x in (self.max_running, self.kv_capacity_tokens)):
            raise UsageError("max_running and kv_capacity_tokens must be >= 1 when set")
        if self.reasoning_tokens < 0 or self.empty_every < 0:
            raise UsageError("reasoning_tokens and empty_every must be >= 0")
        if self.reasoning_field not in REASONING_FIELDS:
            raise UsageError(f"reasoning_field '{self.reasoning_field}' is unknown",
                             hint=f"one of {', '.join(REASONING_FIELDS)}")
        self.faults = F.validate_faults(self.faults)
        self._check_load_model()
        self._check_cache_and_spec()

    def _check_load_model(self) -> None:
        if min(self.itl_per_running_ms, self.prefill_ms_per_token, self.eager_itl_ms, self.slow_end_s) < 0:
            raise UsageError("negative time in reference config", hint="times are >= 0")
        if self.eager_itl_factor < 1.0 or self.proxy_buffer_bytes < 1:
            raise UsageError("eager_itl_factor >= 1 and proxy_buffer_bytes >= 1 required")
        if self.captured_batch_sizes is not None:
            sizes = tuple(sorted(set(self.captured_batch_sizes)))
            if not sizes or sizes[0] < 1 or not all(type(s) is int for s in sizes):
                raise UsageError(f"captured_batch_sizes {list(self.captured_batch_sizes)} is not a set of "
                                 "batch sizes", hint="positive integers, e.g. 1,2,4,8,16")
            self.captured_batch_sizes = sizes

    def _check_cache_and_spec(self) -> None:
        if self.block_size < 1 or (self.prefix_cache_blocks or 1) < 1 or self.spec_tokens < 0:
            raise UsageError("block_size >= 1, prefix_cache_blocks >= 1 when set, spec_tokens >= 0 required")
        if not (0.0 <= self.spec_accept_text <= 1.0 and 0.0 <= self.spec_accept_random <= 1.0):
            raise UsageError("spec_accept_text and spec_accept_random are probabilities", hint="in [0, 1]")
        if self.otlp_protocol not in ("http", "grpc"):
            raise UsageError(f"otlp_protocol '{self.otlp_protocol}' is unknown", hint="http or grpc")
        if self.spec_tokens and (self.tokens_per_chunk != 1 or self.chunks_per_write != 1):
            raise UsageError("speculative decoding streams one step per chunk, each in its own write",
                             hint="drop tokens_per_chunk and chunks_per_write (they must stay 1) or spec_tokens")

    @property
    def load_model(self) -> bool:
        """Whether timing depends on load (running streams, prefill tokens, captured batch sizes)."""
        return bool(self.itl_per_running_ms or self.prefill_ms_per_token or self.captured_batch_sizes)

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> ReferenceConfig:
        return cls(**json.loads(text))

