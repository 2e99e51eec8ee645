"""The study spec, the one spec shape of `bench` and `sweep`: target, workload (pairs of lengths, or a
dataset) x concurrency/rates x server-config variants x repeats, how the client runs and what a cell must
meet. A benchmark is a study with one server configuration; each option is declared here once."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Annotated, Any, ClassVar, Literal

from pydantic import AfterValidator, Field, ValidationError, field_validator, model_validator

from tokenbench.spec import conflicts
from tokenbench.spec.base import StrictModel
from tokenbench.spec.bench import (
    DATASET_KINDS,
    DAY_S,
    MAX_BURSTINESS,
    MAX_RATE,
    MAX_TOKENS,
    MAX_WARMUP,
    MIN_RATE,
    PAIR_KINDS,
    RATE_CAP,
    SESSION_KINDS,
    SLO,
    WARMUP_FIRST_PROMPT,
    WARMUP_REQUESTS,
    WINDOW,
    SessionWindow,
    Workload,
    WorkloadSource,
)
from tokenbench.spec.ports import PORTS_HELP, check_ports, split_listen
from tokenbench.spec.server_kinds import ServerKind
from tokenbench.spec.slo import Limit, Tier
from tokenbench.spec.study_name import derived_name

FINAL_USAGE_ONLY = ("ask for the usage only at the end of the stream, as vllm bench serve does (default: on every "
                    "chunk too, vLLM/SGLang continuous_usage_stats, the exact count per chunk; it costs the server "
                    "a little); counts then come from token ids, else chunks reconciled with the final usage")
NO_MIN_TOKENS = ("leave min_tokens out of the request body: only max_tokens with ignore_eos, as vllm bench serve and "
                 "sglang.bench_serving send (default: min_tokens = max_tokens too, so a server that ignores "
                 "ignore_eos still gives exactly output_len tokens)")
EXTRA_BODY = ("JSON object merged over every request body, last (vLLM's --extra-body), e.g. "
              "'{\"logprobs\": null, \"repetition_penalty\": 1.0}'; it may not set model, prompt, messages or stream")
BACKEND = ("the kind of server at the target (vLLM's --backend spelling): openai, vllm, sglang, llama.cpp, tgi, "
           "tensorrt-llm, lmdeploy, mindie, transformers or gateway; the probe still checks what it accepts, and "
           "with --no-probe its known behaviour is taken as is (docs/compatibility.md); default: probe only")
NO_PROBE = ("skip the capability probe (a few small requests once per target) for a server already known: take "
            "--backend's known behaviour, else assume every field (ignore_eos, min_tokens, token-id prompts) is "
            "accepted")
NO_IGNORE_EOS = ("leave ignore_eos out of the request body (the probe drops it by itself where the server refuses "
                 "it): output lengths are then forced by min_tokens where accepted, else measured per request and "
                 "early ends counted")
NEW_CONNECTION = ("send every request on a new connection, closed after it (as sglang.bench_serving, which opens "
                  "an HTTP session per request); default: keep-alive connections reused")
FIXED_BODY_KEYS = ("model", "prompt", "messages", "stream")
SERVER_TRACES = ("the server's own per-request timings (OpenTelemetry spans): auto = on when tokenbench deploys an "
                 "engine that exports them (vLLM; SGLang), when --otlp-listen is given, or when the deployment at "
                 "--base-url was started with `deploy up --otlp-listen`; on = always (every request "
                 "carries a W3C traceparent and an OTLP receiver listens; a server that exports nothing leaves every "
                 "request unjoined, counted); off = never")
OTLP_LISTEN = ("HOST:PORT of tokenbench's OTLP receiver (HTTP/protobuf and gRPC on one port), for a server you point "
               "at it yourself (vLLM: --otlp-traces-endpoint http://HOST:PORT/v1/traces); HOST:LO-HI: the first free "
               "port of that range; default 127.0.0.1 and a free port (of --ports, when given)")

SHORT_KEYS = {"tp": "parallelism.tp", "dp": "parallelism.dp", "slots": "parallelism.slots",
              "threads": "parallelism.threads", "ctx": "parallelism.ctx"}


def merge_axes(axes: Iterable[tuple[str, list[Any]]]) -> dict[str, list[Any]]:
    """Server-config axes under their full keys, the values of one key given again (or by its short name:
    slots and parallelism.slots) merged in order; a value given twice for one key is refused, as it would
    plan the same config twice (ValueError)."""
    out: dict[str, list[Any]] = {}
    for key, values in axes:
        out.setdefault(SHORT_KEYS.get(key, key), []).extend(values)
    for key, values in out.items():
        seen = [str(x) for x in values]
        twice = next((x for i, x in enumerate(seen) if x in seen[:i]), None)
        if twice is not None:
            raise ValueError(f"{key}={twice} is given twice (values {', '.join(seen)})")
    return out


def _non_empty_axis(values: list[Any]) -> list[Any]:
    if not values:
        raise ValueError("this axis is empty: give at least one value or remove it")
    return values


def check_extra_body(body: dict[str, Any]) -> dict[str, Any]:
    """extra_body may add or change sampling fields, not what tokenbench must send to measure."""
    fixed = [k for k in FIXED_BODY_KEYS if k in body]
    if fixed:
        raise ValueError(f"extra_body may not set {', '.join(fixed)}: tokenbench sets them to measure")
    return body


class Target(StrictModel):
    """The server under test (a running one, or a profile deployed per server config) and how the client
    talks to it."""

    base_url: str | None = Field(None, description="server root of an already running server, "
                                 "e.g. http://127.0.0.1:8000")
    profile: str | None = Field(None, description="a profile name or path, deployed per server config")
    set: list[str] = Field(default_factory=list, description="profile overrides applied to every config")
    model: str | None = Field(None, description="model name; default: the first one /v1/models lists")
    api_key_env: str | None = Field(None, description="environment variable that holds the API key "
                                    "(OPENAI_API_KEY is read when set and no key is named)")
    api_key_file: str | None = Field(None, description="file whose first line is the API key")
    timeout_s: float = Field(600.0, gt=0, le=1e6, description="per-request timeout (whole request), seconds")
    connect_in_ttft: bool = Field(False, description="count a new connection's set-up (TCP, TLS) in TTFT, as "
                                  "vLLM's client does; default: it is its own figure, connect_ms")
    final_usage_only: bool = Field(False, description=FINAL_USAGE_ONLY)
    no_min_tokens: bool = Field(False, description=NO_MIN_TOKENS)
    no_ignore_eos: bool = Field(False, description=NO_IGNORE_EOS)
    backend: ServerKind | None = Field(None, description=BACKEND)
    no_probe: bool = Field(False, description=NO_PROBE)
    extra_body: dict[str, Any] = Field(default_factory=dict, description=EXTRA_BODY)
    new_connection_per_request: bool = Field(False, description=NEW_CONNECTION)
    server_traces: Literal["auto", "on", "off"] = Field("auto", description=SERVER_TRACES)
    otlp_listen: str | None = Field(None, description=OTLP_LISTEN)
    ports: Annotated[str | None, AfterValidator(check_ports)] = Field(None, description=PORTS_HELP)
    via_proxy: bool = Field(False, description="the server is reached through a proxy or gateway: a stream that "
                            "arrives in pieces is named as that proxy's buffering (default: upstream, the server "
                            "or a proxy, not told apart)")
    server_chunks_per_write: int | None = Field(
        None, ge=1, le=MAX_TOKENS, description="token chunks the server writes at once (its multi-step scheduling or stream "
        "interval), where its server info does not say: bursts of up to that many while the client waits idle "
        "are the server's own shape, its figures as sent")

    _extra = field_validator("extra_body")(check_extra_body)

    @field_validator("backend", mode="before")
    @classmethod
    def _any_case(cls, v: Any) -> Any:
        """A server kind in any case (TGI is tgi), as --backend takes it."""
        return v.strip().lower() if isinstance(v, str) else v

    @field_validator("otlp_listen")
    @classmethod
    def _host_port(cls, v: str | None) -> str | None:
        if v is not None:
            split_listen(v)
        return v

    @model_validator(mode="after")
    def _one_server(self) -> "Target":
        if (self.base_url is None) == (self.profile is None):
            raise ValueError("give exactly one of base_url or profile")
        return self


class Requests(StrictModel):
    """Requests per cell: num_prompts, else max(per_concurrency x concurrency, min), or a duration."""

    num_prompts: int | None = Field(None, ge=1, description="requests per cell (trace: at most this many rows); "
                                    "default: max(per_concurrency x concurrency, min)")
    per_concurrency: int = Field(4, ge=1, le=1_000_000, description="requests per cell per unit of concurrency")
    min: int = Field(16, ge=1, le=1_000_000_000, description="fewest requests per cell")
    duration_s: float | None = Field(None, gt=0, le=1e7, description="seconds per cell instead of a request count "
                                     "(trace: the rows due before this)")
    num_sessions: int | None = Field(None, ge=1, le=1_000_000_000, description="sessions per cell (sessions workload); default: the "
                                     "cell's users, or `min` for session rates")


def cpu_set(text: str) -> frozenset[int]:
    """'1', '0,2', '2-3,6': the CPUs a list names (`all` is handled by the caller)."""
    out: set[int] = set()
    for part in text.replace(" ", "").split(","):
        lo, dash, hi = part.partition("-")
        if not lo.isdigit() or (dash and not hi.isdigit()) or (dash and int(hi) < int(lo)):
            raise ValueError(f"'{text}' is not a CPU list: give CPU numbers and ranges, e.g. 1 or 0,2 or 2-3 (or all)")
        out.update(range(int(lo), int(hi if dash else lo) + 1))
    return frozenset(out)


def _cpus(value: str | None) -> str | None:
    if value is not None and value != "all":
        cpu_set(value)
    return value


class Client(StrictModel):
    """How the client side runs (not what is measured)."""

    workers: int = Field(1, ge=1, le=4096, description="client processes sharing the load (each with its own event loop)")
    ray_address: str | None = Field(None, description="run the workers as Ray actors on this cluster (ADDRESS)")
    keep_raw: str | None = Field(None, description="also append every request's raw response body, each read with "
                                 "its arrival time, to this JSONL file (one process; raw bytes are otherwise "
                                 "dropped as soon as a request is parsed)")
    cpus: Annotated[str | None, AfterValidator(_cpus)] = Field(
        None, description="CPUs the client (and its workers) run on, e.g. 1 or 2-3; a local engine tokenbench "
        "deploys gets the others. Default: when tokenbench deploys a local engine, the last core(s), one per "
        "worker, for the client and the rest for the engine (one CPU: no isolation); else not pinned. all: never "
        "pin")


class Sampling(StrictModel):
    """Sampling parameters of every request (vLLM's and SGLang's sampling flags). Output lengths stay exact
    whatever they are: every request also asks ignore_eos and min_tokens = max_tokens."""

    temperature: float = Field(0.0, ge=0, le=100, description="sampling temperature; default 0 (greedy)")
    top_p: float | None = Field(None, gt=0, le=1, description="nucleus sampling: top-p (default: the server's)")
    top_k: int | None = Field(None, ge=-1, le=MAX_TOKENS, description="top-k sampling, -1 = off (default: the server's)")
    min_p: float | None = Field(None, ge=0, le=1, description="min-p sampling (default: the server's)")
    frequency_penalty: float | None = Field(None, ge=-2, le=2, description="frequency penalty (default: the server's)")
    presence_penalty: float | None = Field(None, ge=-2, le=2, description="presence penalty (default: the server's)")
    repetition_penalty: float | None = Field(None, gt=0, le=100, description="repetition penalty (default: the server's)")

    def body(self) -> dict[str, float]:
        """The fields a request body carries: temperature always, the others when given."""
        return self.model_dump(exclude_none=True)


class Tune(StrictModel):
    """`tokenbench tune`: how the best server config for the SLOs is searched (docs/metrics.md, "Tune")."""

    budget_cells: int | None = Field(None, ge=1, le=1_000_000, description="most cells the tune runs over every config "
                                     "(default: capacity_budget per config)")
    budget_minutes: float | None = Field(None, gt=0, le=1e6, description="start no cell after this many minutes of this "
                                         "session (a resume has the budget again); configs not reached are listed "
                                         "as not run")
    baseline: str | None = Field(None, description="the server config the gain is stated against, by name (e.g. "
                                 "slots=4); default: the profile as given (the varied config equal to it, else one "
                                 "more config, 'default')")
    no_confirm: bool = Field(False, description="do not confirm the recommended config on a fresh launch (by "
                             "default it is, with a sustain cell at its answer, sustain_s long, before it is printed; "
                             "one that misses the SLO there or whose engine dies gives way to the next-ranked config)")


class StudySpec(StrictModel):
    """A study: target x workload x load cells x server configs x repeats. A benchmark is a study with one
    server configuration and no relaunch; `tokenbench sweep --fields` lists every key."""

    fields_command: ClassVar[str] = "tokenbench sweep --fields"
    name: str | None = Field(None, description="study name (vLLM's --label): in the stored run, its report, "
                             "compare's columns and the result files; default: the target and the loads, e.g. "
                             "'127.0.0.1:8000 c=1,8,32'")
    series: str | None = Field(None, pattern=r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,79}$",
                               description="a series this run belongs to (e.g. nightly-vllm-h100): runs of one series "
                               "are a history, each figure over time with the noise band learned from its earlier "
                               "launches (`tokenbench history NAME`, and the run's report)")
    target: Target
    workload: WorkloadSource = Field(default_factory=WorkloadSource,
                                     description="kind and knobs (docs/workloads.md); random, text, prefix and "
                                                 "image take their lengths from pairs (or a length_histogram), "
                                                 "datasets and traces from the file")
    pairs: list[tuple[int, int]] = Field(default_factory=list, description="[input, output] token pairs "
                                         "(exact prompt and output tokens)")
    concurrency: list[int] = Field(default_factory=list, description="closed-loop cells: requests in flight")
    rates: list[float] = Field(default_factory=list, description="open-loop cells: requests/s (N requests span "
                               "(N - 1) / rate; the rate sent is stored beside it: docs/metrics.md)")
    arrival: Literal["poisson", "constant"] = Field("poisson", description="open-loop arrivals between requests "
                                                    "(poisson: gaps scaled to the rate exactly, as vLLM)")
    burstiness: float = Field(1.0, gt=0, le=MAX_BURSTINESS, description="Poisson arrivals: gamma shape of the gaps (1 = Poisson, "
                              "< 1 burstier, > 1 more even; same mean rate)")
    users: list[int] = Field(default_factory=list, description="sessions workload, closed-loop cells: users, each "
                             "running one session at a time")
    session_rates: list[float] = Field(default_factory=list, description="sessions workload, open-loop cells: "
                                       "sessions started per second")
    window: SessionWindow | None = Field(None, description=WINDOW)
    ramp_up_s: float | None = Field(None, gt=0, le=DAY_S, description="sessions: the users of a cell start evenly spread over "
                                    "this many seconds (default: all at once)")
    max_concurrency: int | None = Field(None, gt=0, le=1_000_000, description="cap on in-flight requests in rate cells "
                                        "(alone: one closed-loop cell at this concurrency, as vLLM)")
    rate_cap: Literal["queue", "gate"] = Field("queue", description=RATE_CAP)
    vary: dict[str, Annotated[list[Any], AfterValidator(_non_empty_axis)]] = Field(default_factory=dict,
                                       description="server-config axes: profile key -> values (tp, slots, ...)")
    repeats: int = Field(1, ge=1, le=1000, description="runs of every cell, each with fresh prompts (seed + repeat)")
    requests: Requests = Field(default_factory=Requests)
    warmup_requests: int | None = Field(None, ge=0, le=MAX_WARMUP, description=WARMUP_REQUESTS)
    warmup_first_prompt: bool = Field(False, description=WARMUP_FIRST_PROMPT)
    api: Literal["completions", "chat"] = Field("completions", description="OpenAI API: /v1/completions or "
                                                "/v1/chat/completions (image workloads: chat)")
    seed: int = Field(0, description="seed of the prompts, drawn lengths and each cell's arrivals (repeat r uses seed + r); "
                      "given, the prompts are the same in every run (a server's prefix cache may hold them from an "
                      "earlier one); not given, each run salts its prompts' random content (the same lengths and "
                      "arrivals, content no earlier run sent)")
    prompt_salt: str | None = Field(None, description="set by tokenbench when a run starts without a seed: mixed into "
                                    "the random content of every prompt, so a run's prompts share nothing with another "
                                    "run's (stored with the run, so a resume sends the same ones); null: --seed given")
    sampling: Sampling = Field(default_factory=Sampling)
    client: Client = Field(default_factory=Client)
    kv_capacity: int | None = Field(None, gt=0, le=10**12, description="override the KV capacity read from the server")
    slo: SLO = Field(default_factory=SLO)
    allow_length_mismatch: bool = Field(False, description="keep cells whose token counts differ from the ask")
    allow_client_lag: bool = Field(False, description="in this run's report, give intervals and verdicts to the "
                                   "figures the client's delays may have moved beyond their tolerance (still "
                                   "marked '~' with the cause); without it they are shown marked, unjudged")
    max_error_rate: float = Field(0.0, ge=0, le=1, description="fail a cell above this failed fraction")
    stop_on_saturation: bool = Field(False, description="skip higher concurrencies once throughput stops rising")
    find_capacity: Literal["concurrency", "rate", "users", "session_rate"] | None = Field(
        None, description="search the highest load meeting the SLOs per pair and server config: concurrency "
        "(closed loop, whole streams), rate (open loop, requests/s), users (closed-loop sessions: concurrent "
        "agents) or session_rate (open-loop sessions: agents started per second); the flag alone means concurrency")
    capacity_max: float = Field(256, gt=0, le=MAX_RATE, description="upper limit of the capacity search (streams or requests/s)")
    capacity_start: float | None = Field(None, gt=0, le=MAX_RATE, description="the first load the capacity search tries "
                                         "(default: concurrency 1, rate 1 request/s)")
    capacity_precision: float = Field(0.1, gt=0, lt=1, description="the capacity search stops once the "
                                      "boundary's 95 % interval is narrower than this share of its upper end "
                                      "(concurrency: or one stream wide)")
    capacity_budget: int = Field(24, ge=2, le=100_000, description="most cells one capacity search runs per pair and "
                                 "server config, its sustain cell included")
    slo_tiers: list[Tier] = Field(default_factory=list, description="named SLO tiers the capacity search "
                                  "answers from the same cells: a preset (mlperf-llama2-70b-server, "
                                  "mlperf-llama2-70b-interactive, ...) or NAME=LIMIT,LIMIT; several "
                                  "separated by ';'")
    sustain_s: float | None = Field(None, ge=0, le=7 * DAY_S, description="seconds of the sustain cell run at the capacity "
                                    "found (default: long enough for 200 requests at the rate measured there, "
                                    "60 s to 30 min; 0: none)")
    slo_attainment: float = Field(0.9, gt=0, le=1, description="share of requests that must meet every "
                                  "per-request SLO (--slo ttft=MS,...) when that is what a capacity search judges")
    monitor_interval_s: float = Field(1.0, ge=0, le=3600, description="seconds between monitor samples during a cell; 0: "
                                      "no monitor (no /metrics, host or accelerator samples, and none of the "
                                      "figures read from them), as vllm bench serve sends none")
    price_per_hour: float | None = Field(None, gt=0, le=1e6, description="what an hour of the server costs, per device "
                                         "(default) or per node (price_basis): the report gives $ per million "
                                         "input and output tokens and output tokens per $ (docs/metrics.md, Cost)")
    price_basis: Literal["device", "node"] = Field("device", description="what price_per_hour is the price of: "
                                                   "one device-hour (x the server's devices) or one node-hour")
    timeslice_s: float = Field(10.0, ge=0.01, le=DAY_S, description="width of the timeslices every cell keeps, seconds "
                               "(figures per slice, steady state, a sustain cell's drift)")
    tune: Tune | None = Field(None, description="`tokenbench tune`: rank the server configs (vary) by their "
                              "capacity under each SLO tier and recommend one")

    @field_validator("find_capacity", mode="before")
    @classmethod
    def _capacity_flag(cls, v: Any) -> Any:
        """A stored spec's `find_capacity: true` (before the load dimension could be chosen) is concurrency."""
        if v is True:
            return "concurrency"
        return None if v is False else v

    @model_validator(mode="before")
    @classmethod
    def _image_chat(cls, data: Any) -> Any:
        """Images travel as chat image_url parts: an image study uses the chat API unless told otherwise."""
        workload = data.get("workload") if isinstance(data, dict) else None
        if isinstance(workload, dict) and workload.get("kind") == "image" and "api" not in data:
            return {**data, "api": "chat"}
        return data

    @field_validator("pairs")
    @classmethod
    def _positive(cls, v: list[tuple[int, int]]) -> list[tuple[int, int]]:
        for a, b in v:
            if a <= 0 or b <= 0:
                raise ValueError(f"pair [{a}, {b}] must have positive input and output lengths")
            if max(a, b) > MAX_TOKENS:
                raise ValueError(f"pair [{a}, {b}]: a length above {MAX_TOKENS:,} tokens fits no model's context")
        return v

    @field_validator("concurrency", "users")
    @classmethod
    def _conc(cls, v: list[int]) -> list[int]:
        if any(c <= 0 for c in v):
            raise ValueError("concurrency and users must be positive")
        if any(c > 1_000_000 for c in v):
            raise ValueError("concurrency and users are at most 1,000,000 (each holds a connection)")
        return v

    @field_validator("session_rates")
    @classmethod
    def _session_rates(cls, v: list[float]) -> list[float]:
        if any(not MIN_RATE <= r <= MAX_RATE for r in v):
            raise ValueError(f"session rates are from {MIN_RATE:g} to {MAX_RATE:g} sessions per second")
        return v

    @field_validator("rates")
    @classmethod
    def _rates(cls, v: list[float]) -> list[float]:
        if any(r < MIN_RATE for r in v):
            raise ValueError(f"a request rate is at least {MIN_RATE:g} requests/s (one request in {1 / MIN_RATE / 86400:.1f} "
                             "days); give requests per second, e.g. 0.5,1,2")
        if any(r > MAX_RATE for r in v):
            raise ValueError(f"a request rate is at most {MAX_RATE:g} requests/s (gaps below a microsecond); for "
                             "every request at once give inf with --max-concurrency")
        return v

    @field_validator("vary")
    @classmethod
    def _axes(cls, v: dict[str, list[Any]]) -> dict[str, list[Any]]:
        try:
            return merge_axes(v.items())
        except ValueError as exc:
            raise ValueError(f"{exc}: give each value once, one config per combination") from None

    def _no_session_load(self) -> None:
        for name in ("users", "session_rates", "ramp_up_s", "window"):
            if getattr(self, name):
                raise ValueError(f"{name} applies to a sessions workload (--dataset-name sessions)")
        if self.requests.num_sessions is not None:
            raise ValueError("requests.num_sessions applies to a sessions workload (--dataset-name sessions)")

    @model_validator(mode="after")
    def _session_axis(self) -> "StudySpec":
        """A sessions (or trajectories) study's load is in users or session starts; other workloads take neither."""
        if self.workload.kind not in SESSION_KINDS:
            self._no_session_load()
            return self
        if self.concurrency or self.rates or self.max_concurrency:
            raise ValueError("a sessions workload's load is in users (--users 1,4,16) or session starts per second "
                             "(--session-rate 0.5): drop concurrency, rates and max_concurrency")
        if self.client.workers > 1 or self.client.ray_address:
            raise ValueError("sessions run in one client process (each turn waits for the previous answer): drop "
                             "client.workers / client.ray_address (--workers / --ray)")
        if self.requests.num_prompts is not None:
            raise ValueError("a sessions cell counts sessions, not requests: give requests.num_sessions "
                             "(--num-sessions) instead of num_prompts")
        if self.warmup_first_prompt:
            raise ValueError("a session's turns build on its history, so no measured prompt can be sent ahead as "
                             "the warmup: drop warmup_first_prompt (--warmup-first-prompt)")
        if self.ramp_up_s is not None and not self.users:
            raise ValueError("ramp_up_s spreads the starts of users: it needs users (--users)")
        if self.find_capacity in ("concurrency", "rate"):
            raise ValueError(f"find_capacity {self.find_capacity}: a sessions workload's load is in users: search "
                             "users (--find-capacity users) or session starts (--find-capacity session_rate)")
        if not self.users and not self.session_rates and not self.find_capacity:
            raise ValueError("the users axis is empty: give 'users: [1, 4, ...]' (--users) or 'session_rates' "
                             "(--session-rate)")
        return self

    def _check_axis(self) -> None:
        """Which load axis the workload takes, and that it is there (sessions: _session_axis)."""
        if self.workload.kind == "trace":
            if self.concurrency or self.rates:
                raise ValueError("a trace replays its own arrival times: drop 'concurrency' and 'rates' "
                                 "(--concurrency and --request-rate do not apply); speed it up or down with "
                                 "workload.time_scale (--time-scale)")
            if self.find_capacity:
                raise ValueError("a trace replays its own arrival times: a capacity search (find_capacity) sets "
                                 "the load itself; use a random or dataset workload")
        elif self.find_capacity:
            self._check_capacity()
        elif self.workload.kind not in SESSION_KINDS and not self.concurrency and not self.rates and not self.max_concurrency:
            raise ValueError("the concurrency axis is empty: give 'concurrency: [1, 8, ...]' or 'rates: [...]'")

    @model_validator(mode="after")
    def _load_axis(self) -> "StudySpec":
        self._check_axis()
        if self.workload.kind == "trace" and (self.client.workers > 1 or self.client.ray_address):
            raise ValueError("a trace replay runs in one client process (its arrivals are one schedule): "
                             "drop client.workers / client.ray_address (--workers / --ray)")
        if self.client.keep_raw and (self.client.workers > 1 or self.client.ray_address):
            raise ValueError("--keep-raw records the raw bytes of one client process: drop client.workers / "
                             "client.ray_address (--workers / --ray), or client.keep_raw (--keep-raw)")
        if self.vary and self.target.base_url:
            raise ValueError("'vary' needs a profile target (tokenbench must relaunch the server per config)")
        return self


    def _check_capacity(self) -> None:
        if self.find_capacity in ("users", "session_rate") and self.workload.kind not in SESSION_KINDS:
            raise ValueError(f"find_capacity {self.find_capacity} searches sessions: it needs the sessions workload "
                             "(--dataset-name sessions --turns N) or trajectories (--dataset-name trajectories); for "
                             "single requests search concurrency or rate")
        tiers = self.capacity_tiers()
        if not tiers:
            raise ValueError("find_capacity needs SLOs: e.g. --slo ttft:p99<=2000,tpot:p99<=200, or "
                             "--slo-tier mlperf-llama2-70b-server")
        names = [t.name for t in tiers]
        if len(set(names)) < len(names):
            raise ValueError(f"SLO tier names must differ (got {', '.join(names)}; 'slo' is --slo's limits)")

    def capacity_tiers(self) -> list[Tier]:
        """The tiers a capacity search answers: --slo's limits (tier 'slo'), then slo_tiers; with neither,
        the per-request SLOs (--slo ttft=MS) met by slo_attainment of the requests."""
        tiers = ([Tier(name="slo", limits=self.slo.limits)] if self.slo.limits else []) + list(self.slo_tiers)
        if not tiers and not self.slo.is_empty():
            goodput = Limit(metric="goodput", stat="fraction", op=">=", value=self.slo_attainment)
            tiers = [Tier(name="slo", limits=[goodput])]
        return tiers

    @model_validator(mode="after")
    def _said_once(self) -> "StudySpec":
        conflicts.check(self)
        return self

    @model_validator(mode="after")
    def _named(self) -> "StudySpec":
        if self.name is None:
            self.name = derived_name(self)
        return self

    @model_validator(mode="after")
    def _rate_shape(self) -> "StudySpec":
        if self.rate_cap == "gate" and not (self.rates and self.max_concurrency):
            raise ValueError("rate_cap gate shapes a capped rate: it needs a request rate (rates) and max_concurrency")
        if self.burstiness != 1.0 and (not self.rates or self.arrival != "poisson"):
            raise ValueError("burstiness shapes Poisson arrivals: it needs a request rate (rates) and arrival poisson")
        return self

    @model_validator(mode="after")
    def _lengths(self) -> "StudySpec":
        kind = self.workload.kind
        if self.workload.length_histogram is not None:
            if self.pairs:
                raise ValueError("length_histogram gives every request's lengths: drop 'pairs' (--input-len, "
                                 "--output-len)")
        elif (kind in PAIR_KINDS or self.workload.generated) and not self.pairs:
            raise ValueError(f"'pairs' is empty: a {kind} sweep needs [input, output] pairs, e.g. pairs: [[512, 128]]")
        if (kind in PAIR_KINDS or self.workload.generated) and self.workload.output_len is not None:
            raise ValueError("give output lengths in 'pairs', not workload.output_len")
        if kind == "trajectories" and self.workload.dataset_path and self.pairs:
            raise ValueError("a trajectories dataset gives every turn's lengths: drop 'pairs' (--input-len, --output-len)")
        if kind in DATASET_KINDS and self.pairs:
            raise ValueError(f"a {kind} sweep takes its lengths from the dataset: drop 'pairs' "
                             "(force output lengths with workload.output_len)")
        try:
            self.workloads()
        except ValidationError as exc:
            raise ValueError(exc.errors()[0]["msg"].removeprefix("Value error, ")) from None
        return self

    def workloads(self) -> list[Workload]:
        """One workload per pair (random, prefix, image), or the one dataset workload."""
        common = {**self.workload.model_dump(), "api": self.api, "seed": self.seed, "salt": self.prompt_salt}
        if self.workload.from_file or self.workload.length_histogram is not None:
            return [Workload(**common)]
        return [Workload(**{**common, "input_len": a, "output_len": b}) for a, b in self.pairs]

    @model_validator(mode="after")
    def _tune(self) -> "StudySpec":
        if self.tune is None:
            return self
        if not self.target.profile:
            raise ValueError("tune relaunches the server per config: it needs a profile (tokenbench tune PROFILE)")
        if not self.find_capacity:
            raise ValueError("tune ranks configs by their capacity: it needs find_capacity (concurrency, rate "
                             "or users)")
        if len(self.workloads()) != 1:
            raise ValueError("tune ranks configs on one workload: give one pair (--input-len/--output-len) or "
                             "one dataset; tune each workload in its own run")
        if self.tune.no_confirm and self.sustain_s:
            raise ValueError("sustain_s is the length of the confirmation tune.no_confirm skips: drop one of "
                             "--sustain-s and --no-confirm")
        if not self.tune.no_confirm and self.sustain_s == 0:
            raise ValueError("sustain_s 0 asks no sustain cell, and a tune confirms its answer with one: give "
                             "--no-confirm to skip the confirmation")
        return self
