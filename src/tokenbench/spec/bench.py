"""What one cell measures: its workload, its load and the SLOs its goodput counts. Pure data, no I/O.
The study that runs cells (target, axes, client, verdict policy) is spec/study.py."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, SerializerFunctionWrapHandler, model_serializer, model_validator

from tokenbench.spec.base import StrictModel
from tokenbench.spec.slo import Limit

WorkloadKind = Literal["random", "text", "sharegpt", "jsonl", "prefix", "image", "trace", "sessions", "trajectories"]
FIXED_LENGTH_KINDS = ("random", "text", "prefix", "image")   # input_len / output_len given; sweeps take them from pairs
DATASET_KINDS = ("sharegpt", "jsonl", "trace")          # lengths come from the file (output_len may force)
PAIR_KINDS = (*FIXED_LENGTH_KINDS, "sessions")          # take [input, output] pairs (sessions: per turn)
HISTOGRAM_KINDS = ("random", "text")                    # a length histogram alone gives every request's lengths
SYNTHETIC_KINDS = ("random", "prefix", "image", "trace", "sessions", "trajectories")  # prompts of random ids (or
                                                        # random words): not text
SESSION_KINDS = ("sessions", "trajectories")            # conversations: each turn re-sends the history (users, agents)
TrajectoryFormat = Literal["auto", "mlcommons", "mooncake", "weka"]
TRACE_BLOCK_SIZE = 512                                  # Mooncake's hash_ids block, in tokens
SESSION_HEADER = "X-Session-ID"
CACHE_BLOCK = 16                                        # the prefix-cache block the theoretical hits count (vLLM's)


BOUNDS = (" (random, text, prefix, image: a drawn length is clipped to the bounds; min and max without another "
          "distribution draw uniformly between them, as GuideLLM's prompt_tokens_min/max)")
RATE_CAP = ("how a rate cell's max_concurrency holds arrivals back: queue (vLLM, SGLang: an arrival waits for a slot, "
            "so held ones go back to back as slots free) or gate (AIPerf's --request-rate with --concurrency: the "
            "schedule itself waits for a free slot and goes on at the rate from there, no catch-up)")
RANGE_RATIO = ("draw each request's input and output lengths (independently) as uniform integers around the asked "
               "ones, vLLM's --random-range-ratio r: [floor(L(1-r)), ceil(L(1+r))], r < 1; with range_ratio_style "
               "sglang, SGLang's meaning: [max(floor(L r), 1), L], so 1 is exact and 0 is 1..L; prefix: the "
               "suffix's length is drawn, the prefix stays")
RANGE_RATIO_STYLE = ("which tool's meaning range_ratio has: vllm (a window around L) or sglang (from L r up to L), "
                     "as AIPerf's --random-corpus-style")
LENGTH_HISTOGRAM = ("draw each request's (input, output) lengths from weighted buckets: a CSV file of rows "
                    "input_len,output_len,weight[,input_stddev,output_stddev], or AIPerf's --sequence-distribution "
                    "text ISL[|SD],OSL[|SD]:WEIGHT;... (weights in any unit); replaces the pairs")
TRAJECTORY_FORMAT = ("trajectories: the dataset's format: mlcommons (MLCommons Endpoints' agentic JSONL, one row per "
                     "message), mooncake (AIPerf's multi-turn Mooncake JSONL: session_id, delay), weka (InferenceX "
                     "AgentX's kv-cache-tester JSON traces); auto: told by the first record's fields")
NO_SALT = ("trajectories: send no salt; by default a deterministic salt per pass over the corpus heads every prompt, "
           "and one per trajectory follows its system prompt (MLCommons' enable_salt), so a prefix cache reuses within "
           "a trajectory and never across passes; without it a second pass can hit what the first left")
UNREPLAYABLE = ("trajectories that cannot be replayed (longer than the server's context, a prompt shorter than its "
                "history): refuse the run, naming them (default), or skip them, each stated with its cause")
WINDOW = ("sessions and trajectories: where the measured window ends: all (every session to its last turn; "
          "sessions' default), first-user (MLCommons' performance window: once every trajectory has started, at the "
          "end of the first one that finishes; turns sent after it are stored, not measured; trajectories' default), "
          "first-user-stop (the same, and no turn is sent after it: cut trajectories are counted)")
SessionWindow = Literal["all", "first-user", "first-user-stop"]
MAX_TOKENS = 10_000_000    # a prompt or output length above this fits no model's context
MIN_RATE = 1e-6           # requests (or sessions) per second: one in 11.6 days; below, a schedule overflows
MAX_BURSTINESS = 1e6      # gamma shape of Poisson gaps: their spread is 1/sqrt(shape), 0.1 % here (constant enough)
MAX_WARMUP = 100_000       # warmup requests per cell: they are prepared before the cell starts
MAX_RATE = 1e6            # requests (or sessions) per second: above, every gap is below a microsecond
MAX_MS = 1e9              # a latency bound in ms (11.6 days; a request's timeout is at most 1e6 s)
DAY_S = 86_400.0          # a wait between requests, a ramp, a timeslice: at most a day
WARMUP_REQUESTS = ("warmup requests per cell; default: as many as the cell runs at once (its concurrency or users, "
                   "a rate's --max-concurrency; 1 for a rate without one), never more than the cell's own requests")
WARMUP_FIRST_PROMPT = ("every warmup request sends the cell's first measured prompt, as vllm bench serve "
                       "(--num-warmups) and sglang.bench_serving (--warmup-requests) do: with prefix caching the "
                       "first measured request then finds its prompt cached; default: fresh prompts of the "
                       "measured shape, none of them measured again")
PROMPT_AS_TEXT = ("random completions prompts travel as text the server tokenizes (words of measured token "
                  "counts, input_len tokens by the server's count with the special tokens it adds, e.g. BOS), "
                  "as vllm bench serve and sglang.bench_serving send them; default: input_len token ids")


class WorkloadSource(StrictModel):
    """What prompts are made of, apart from the asked lengths. docs/workloads.md describes each kind."""

    kind: WorkloadKind = Field("random", description="random | text | sharegpt | jsonl | prefix | image | trace | "
                               "sessions (text: natural-text token ids cut to the exact length; sessions: multi-turn, "
                               "docs/workloads.md)")
    output_len: int | None = Field(None, gt=0, le=MAX_TOKENS, description="exact output tokens (max_tokens=min_tokens, ignore_eos); "
                                   "for sharegpt/jsonl/trace: forces every request's output length")
    dataset_path: str | None = Field(None, description="local file: ShareGPT JSON/JSONL, prompt JSONL, mooncake "
                                     "trace JSONL; for image: an image file or a folder of images")
    min_input_len: int | None = Field(None, gt=0, le=MAX_TOKENS, description="datasets: drop prompts shorter than this; drawn "
                                      "lengths: the shortest input drawn" + BOUNDS)
    max_input_len: int | None = Field(None, gt=0, le=MAX_TOKENS, description="datasets: drop prompts longer than this; drawn "
                                      "lengths: the longest input drawn" + BOUNDS)
    min_output_len: int | None = Field(None, gt=0, le=MAX_TOKENS, description="datasets: drop entries asking fewer tokens; drawn "
                                       "lengths: the shortest output drawn" + BOUNDS)
    max_output_len: int | None = Field(None, gt=0, le=MAX_TOKENS, description="datasets: drop entries asking more tokens; drawn "
                                       "lengths: the longest output drawn" + BOUNDS)
    prefix_len: int | None = Field(None, gt=0, le=MAX_TOKENS, description="prefix: tokens shared by every prompt of a group")
    num_groups: int = Field(1, gt=0, le=1_000_000, description="prefix: groups, each with its own shared prefix")
    image_count: int = Field(1, gt=0, le=1000, description="image: images per request")
    image_width: int = Field(512, gt=0, le=8192, description="image: synthetic image width, pixels")
    image_height: int = Field(512, gt=0, le=8192, description="image: synthetic image height, pixels")
    image_format: Literal["png", "bmp"] = Field("png", description="image: synthetic image format")
    time_scale: float = Field(1.0, ge=1e-6, le=1e6, description="trace: multiply the trace's gaps (0.5 replays twice as fast)")
    trace_block_size: int = Field(TRACE_BLOCK_SIZE, gt=0, le=MAX_TOKENS, description="trace: tokens per hash_ids block (Mooncake: "
                                  "512); a row's hash_ids number ceil(input_length / this), equal ids are equal "
                                  "token blocks")
    turns: int | None = Field(None, gt=0, le=1000, description="sessions: turns per session; turn k re-sends the "
                              "history (system prompt, earlier user and assistant turns) + input_len new tokens")
    system_prompt_len: int | None = Field(None, gt=0, le=MAX_TOKENS, description="sessions: tokens of the system prompt that opens "
                                          "every session")
    shared_system_prompt: bool = Field(False, description="sessions: one system prompt for every user (default: "
                                       "each user its own)")
    think_time_s: float = Field(0.0, ge=0, le=DAY_S, description="sessions: mean seconds from the end of an answer to the "
                                "user's next turn")
    think_time_dist: Literal["fixed", "exponential", "uniform"] = Field(
        "fixed", description="sessions: think times fixed, exponential (mean think_time_s) or uniform on "
                             "[0, 2 x think_time_s], seeded per session")
    assistant_turns: Literal["returned", "fixed"] = Field(
        "returned", description="sessions: the history's assistant turns: the tokens the server returned, or "
                                "fixed seeded ones of output_len (every engine then gets the same prompts)")
    session_header: str = Field(SESSION_HEADER, description="sessions: the request header carrying the session id "
                                "(servers and routers that route by it); empty: none")
    trajectory_format: TrajectoryFormat = Field("auto", description=TRAJECTORY_FORMAT)
    num_trajectories: int = Field(16, gt=0, le=100_000, description="trajectories without a dataset: how many the "
                                  "generator makes (the corpus a cell passes over)")
    turns_dist: Literal["fixed", "uniform", "geometric"] = Field(
        "fixed", description="trajectories without a dataset: turns per trajectory fixed (turns), uniform on "
                             "[1, 2 x turns - 1] or geometric with mean turns; seeded per trajectory")
    no_salt: bool = Field(False, description=NO_SALT)
    unreplayable: Literal["refuse", "skip"] = Field("refuse", description=UNREPLAYABLE)
    cache_block_size: int = Field(CACHE_BLOCK, gt=0, le=MAX_TOKENS, description="trajectories: the server's "
                                  "prefix-cache block in tokens (vLLM 16, SGLang 1): the theoretical hit of each "
                                  "turn counts full blocks of this size")
    tokenizer_path: str | None = Field(None, description="local Hugging Face tokenizer dir (tokenizer.json; "
                                       "config.json gives the vocab size): builds chat prompts and counts "
                                       "datasets without the server's /tokenize; default: ask the server")
    vocab_size: int | None = Field(None, ge=2, le=MAX_TOKENS, description="vocabulary size, for a server that does not report it")
    range_ratio: float | None = Field(None, ge=0, le=1, description=RANGE_RATIO)
    range_ratio_style: Literal["vllm", "sglang"] = Field("vllm", description=RANGE_RATIO_STYLE)
    input_len_stddev: float | None = Field(None, ge=0, le=MAX_TOKENS, description="draw each request's input length from a normal "
                                           "distribution of this standard deviation around the asked input length "
                                           "(AIPerf's --synthetic-input-tokens-stddev), rounded, at least 1")
    output_len_stddev: float | None = Field(None, ge=0, le=MAX_TOKENS, description="the same for each request's output length "
                                            "(AIPerf's --output-tokens-stddev)")
    length_histogram: str | None = Field(None, description=LENGTH_HISTOGRAM)
    prompt_as_text: bool = Field(False, description=PROMPT_AS_TEXT)

    @property
    def sessions_like(self) -> bool:
        """Conversations (sessions, trajectories): each turn re-sends the history; the load is in users."""
        return self.kind in SESSION_KINDS

    @property
    def generated(self) -> bool:
        """Trajectories without a dataset: the seeded generator makes them from the asked distributions."""
        return self.kind == "trajectories" and self.dataset_path is None

    @property
    def from_file(self) -> bool:
        """Every prompt's lengths come from a file (a dataset, a trace, a trajectories corpus)."""
        return self.kind in DATASET_KINDS or (self.kind == "trajectories" and self.dataset_path is not None)

    def _trace_only(self) -> None:
        if self.kind != "trace" and self.time_scale != 1.0:
            raise ValueError("time_scale applies to trace workloads only")
        if self.kind not in ("trace", "trajectories") and self.trace_block_size != TRACE_BLOCK_SIZE:
            raise ValueError("trace_block_size applies to trace workloads (and trajectories' hash_ids) only")

    def _check_kind(self, input_len: int | None) -> None:
        self._check_lengths(input_len)
        self._check_knobs()
        self._check_draws()
        self._check_sessions()

    def _check_sessions(self) -> None:
        """Session knobs belong to sessions and trajectories; a sessions workload needs its turns."""
        if self.kind not in SESSION_KINDS:
            for name in (*SESSION_KNOBS, *TRAJECTORY_KNOBS):
                self._default_only(name, "sessions workloads", "--dataset-name sessions or trajectories")
            return
        if self.kind == "sessions":
            for name in TRAJECTORY_KNOBS:
                self._default_only(name, "trajectories workloads", "--dataset-name trajectories")
        if self.kind == "trajectories":
            self._check_trajectories()
        elif self.turns is None:
            raise ValueError("a sessions workload needs turns per session (--turns N)")
        if self.shared_system_prompt and self.system_prompt_len is None:
            raise ValueError("shared_system_prompt needs a system prompt: give system_prompt_len (--system-prompt-len N)")
        if self.think_time_dist != "fixed" and not self.think_time_s:
            raise ValueError(f"think_time_dist {self.think_time_dist} needs a mean think time (--think-time-s S)")

    def _default_only(self, name: str, where: str, hint: str) -> None:
        if getattr(self, name) != WorkloadSource.model_fields[name].default:
            raise ValueError(f"{name} applies to {where} only ({hint})")

    def _check_trajectories(self) -> None:
        """A corpus file gives every turn (the generator's knobs do not apply); without one, the generator needs
        its turns (and the pair, checked with the lengths)."""
        if self.dataset_path is None:
            if self.turns is None:
                raise ValueError("trajectories without a dataset are generated: give turns per trajectory (--turns N)")
            if self.trajectory_format != "auto":
                raise ValueError("trajectory_format names a dataset's format: give the dataset (--dataset-path FILE)")
            return
        for name in GENERATOR_KNOBS:
            if getattr(self, name) != WorkloadSource.model_fields[name].default:
                raise ValueError(f"{name} shapes generated trajectories; a dataset's come from the file: drop it "
                                 "(or drop --dataset-path to generate them)")

    def _check_draws(self) -> None:
        """At most one length distribution, on a kind whose lengths are asked (not read from a file)."""
        given = [name for name in DRAW_FIELDS if getattr(self, name) is not None]
        self._exact_turns(given)
        self._check_bounds(given)
        if not given:
            return
        if self.kind not in FIXED_LENGTH_KINDS and not self.generated:
            raise ValueError(f"{given[0]} draws lengths around asked ones: it applies to random, text, prefix and "
                             f"image workloads and generated trajectories, not {self.kind} (whose lengths come "
                             "from the file)")
        if self.range_ratio is not None and len(given) > 1:
            raise ValueError(f"give one length distribution: range_ratio or {given[-1]}, not both")
        if self.length_histogram is not None and len(given) > 1:
            raise ValueError(f"give one length distribution: length_histogram or {given[0]}, not both")
        if self.range_ratio is not None and self.range_ratio_style == "vllm" and self.range_ratio >= 1:
            raise ValueError(f"range_ratio {self.range_ratio:g} must be below 1 with vLLM's window "
                             "[L(1-r), L(1+r)] (SGLang's [L r, L] takes 1: range_ratio_style sglang)")

    def _exact_turns(self, given: list[str]) -> None:
        """Sessions: every turn's lengths are asked exactly (the history grows by them); nothing draws them."""
        drawn = given + [f for f in LENGTH_FILTERS if getattr(self, f) is not None]
        if self.kind == "sessions" and drawn:
            raise ValueError(f"{drawn[0]} draws or bounds request lengths, but a sessions workload's turns have exact "
                             "lengths (each adds input_len user tokens and output_len answered ones): drop it")

    def _check_lengths(self, input_len: int | None) -> None:
        """What the kind needs: asked lengths (fixed-length kinds), a file (datasets), a prefix shorter than
        the prompt."""
        kind = self.kind
        if self.length_histogram is not None:
            if kind not in HISTOGRAM_KINDS or input_len is not None or self.output_len is not None:
                raise ValueError("length_histogram gives every request's lengths: it applies to random and text "
                                 "workloads, without input/output lengths (drop --input-len/--output-len, pairs)")
            return
        if (kind in PAIR_KINDS or self.generated) and (input_len is None or self.output_len is None):
            what = "generated trajectories need" if self.generated else f"a {kind} workload needs"
            raise ValueError(f"{what} input_len and output_len (--input-len, --output-len; per turn)")
        if kind == "trajectories" and self.dataset_path and (input_len is not None or self.output_len is not None):
            raise ValueError("input_len and output_len do not apply to a trajectories dataset: every turn's new "
                             "input and output lengths come from the file")
        if kind in DATASET_KINDS and input_len is not None:
            raise ValueError(f"input_len does not apply to {kind}: prompt lengths come from the dataset "
                             "(filter them with min_input_len / max_input_len)")
        if kind in DATASET_KINDS and not self.dataset_path:
            raise ValueError(f"a {kind} workload needs dataset_path (--dataset-path FILE)")
        if kind == "prefix" and (self.prefix_len is None or input_len is None or self.prefix_len >= input_len):
            raise ValueError(f"a prefix workload needs 0 < prefix_len < input_len (got prefix_len="
                             f"{self.prefix_len}, input_len={input_len}): input_len counts prefix + unique suffix")

    def _check_knobs(self) -> None:
        """Knobs that belong to another kind, and filters that no entry could pass."""
        kind = self.kind
        if kind != "prefix" and self.prefix_len is not None:
            raise ValueError("prefix_len applies to prefix workloads only")
        for name, only in (("num_groups", "prefix"), *((n, "image") for n in IMAGE_KNOBS)):
            if kind != only and getattr(self, name) != WorkloadSource.model_fields[name].default:
                raise ValueError(f"{name} (--{name.replace('_', '-')}) applies to {only} workloads only "
                                 f"(--dataset-name {only}), not {kind}")
        if self.range_ratio_style != "vllm" and self.range_ratio is None:
            raise ValueError("range_ratio_style (--range-ratio-style) says how a range ratio draws lengths, and none "
                             "is given (--random-range-ratio); drop it")
        self._trace_only()
        if self.dataset_path is not None and kind in ("random", "text", "prefix", "sessions"):
            raise ValueError(f"dataset_path does not apply to {kind} workloads")
        for low, high in (("min_input_len", "max_input_len"), ("min_output_len", "max_output_len")):
            lo, hi = getattr(self, low), getattr(self, high)
            if lo is not None and hi is not None and lo > hi:
                raise ValueError(f"{low} {lo} is above {high} {hi}: no entry could pass")

    def _check_bounds(self, given: list[str]) -> None:
        """Bounds of drawn lengths: clip another distribution, or alone draw uniformly (both ends needed)."""
        bounds = [f for f in LENGTH_FILTERS if getattr(self, f) is not None]
        if self.kind in DATASET_KINDS or not bounds or (self.kind == "trajectories" and not self.generated):
            return
        if self.length_histogram is not None:
            raise ValueError(f"{bounds[0]} does not apply to a length histogram (its buckets give the lengths)")
        spread = {"input": self.range_ratio is not None or self.input_len_stddev is not None,
                  "output": self.range_ratio is not None or self.output_len_stddev is not None}
        for side in ("input", "output"):
            lo, hi = getattr(self, f"min_{side}_len"), getattr(self, f"max_{side}_len")
            if not spread[side] and (lo is None) != (hi is None):
                raise ValueError(f"min_{side}_len and max_{side}_len draw {side} lengths uniformly between them: "
                                 "give both (or a range ratio or standard deviation to clip)")


IMAGE_KNOBS = ("image_count", "image_width", "image_height", "image_format")
LENGTH_FILTERS = ("min_input_len", "max_input_len", "min_output_len", "max_output_len")
SESSION_KNOBS = ("turns", "system_prompt_len", "shared_system_prompt", "think_time_s", "think_time_dist",
                 "assistant_turns", "session_header")
TRAJECTORY_KNOBS = ("trajectory_format", "num_trajectories", "turns_dist", "no_salt", "unreplayable",
                    "cache_block_size")
GENERATOR_KNOBS = ("turns", "system_prompt_len", "shared_system_prompt", "think_time_s", "think_time_dist",
                   "num_trajectories", "turns_dist", "range_ratio", "input_len_stddev", "output_len_stddev",
                   *LENGTH_FILTERS)
DRAW_FIELDS = ("range_ratio", "input_len_stddev", "output_len_stddev", "length_histogram")


class Workload(WorkloadSource):
    api: Literal["completions", "chat"] = "completions"
    input_len: int | None = Field(None, gt=0, le=MAX_TOKENS, description="exact prompt tokens (random, prefix: prefix + suffix; "
                                  "image: the text part; sessions: the new user tokens of each turn)")
    seed: int = 0
    salt: str | None = None             # the run's salt in the prompts' content (StudySpec.prompt_salt)

    @model_validator(mode="after")
    def _consistent(self) -> "Workload":
        self._check_kind(self.input_len)
        if self.kind == "trajectories" and self.api == "chat":
            raise ValueError("trajectories are replayed over the completions API (--api completions): each turn's "
                             "prompt is the history's token ids plus the new ones, exact by construction")
        if self.kind == "image" and self.api != "chat":
            raise ValueError("image workloads use the chat API (--api chat): images travel as image_url parts")
        if self.prompt_as_text and (self.kind != "random" or self.api != "completions"):
            raise ValueError(f"prompt_as_text applies to random completions prompts (chat prompts are text "
                             f"already), not to {self.kind} on the {self.api} API")
        return self

    @property
    def fixed_lengths(self) -> bool:
        """Every request asks the same input_len and output_len."""
        return self.kind in FIXED_LENGTH_KINDS and self.draws is None

    @property
    def draws(self) -> str | None:
        """The length distribution as a short tag (part of the cell key), None when every length is exact."""
        if self.length_histogram is not None:
            return f"hist={Path(self.length_histogram).name}"
        return ",".join(t for t in (self._ratio_tag(), self._sd_tag(), *self._bound_tags()) if t) or None

    def _ratio_tag(self) -> str:
        exact = 1.0 if self.range_ratio_style == "sglang" else 0.0      # vLLM's 0 and SGLang's 1: exact lengths
        if self.range_ratio is None or self.range_ratio == exact:
            return ""
        return ("sglang-" if self.range_ratio_style == "sglang" else "") + f"r{self.range_ratio:g}"

    def _sd_tag(self) -> str:
        if self.input_len_stddev is None and self.output_len_stddev is None:
            return ""
        return f"sd{self.input_len_stddev or 0:g},{self.output_len_stddev or 0:g}"

    def _bound_tags(self) -> list[str]:
        if self.kind not in FIXED_LENGTH_KINDS and not self.generated:
            return []                       # datasets: the bounds filter entries, they draw nothing
        out = []
        for side, short in (("input", "in"), ("output", "out")):
            lo, hi = getattr(self, f"min_{side}_len"), getattr(self, f"max_{side}_len")
            if lo is not None or hi is not None:
                out.append(f"{short}{lo or 1}..{hi or ''}")
        return out

    @property
    def label(self) -> str:
        """The workload part of a cell key: `512:128` for random, the kind and its knobs otherwise
        (parentheses, not brackets: consoles read `[...]` as markup)."""
        lengths = f"{self.input_len}:{self.output_len}" + (f"({self.draws})" if self.draws else "")
        if self.length_histogram is not None:
            lengths = f"{self.draws}"       # the buckets give the lengths: random `hist=F`, text `text:hist=F`
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
            blocks = f",b{self.trace_block_size}" if self.trace_block_size != TRACE_BLOCK_SIZE else ""
            return f"trace({name},x{self.time_scale:g}{blocks}){out}"
        if self.kind == "text":
            return f"text:{lengths}"
        if self.kind == "sessions":
            return f"sessions({self.session_shape}):{lengths}"
        if self.kind == "trajectories":
            return f"trajectories({self.trajectory_shape})" + (f":{lengths}" if self.generated else "")
        return f"{self.kind}({name}){out}"

    @property
    def session_shape(self) -> str:
        """A sessions workload's shape apart from its lengths: "5t,sys256-shared,think1s-exp,fixed-replies"."""
        parts = [f"{self.turns}t"]
        if self.system_prompt_len:
            parts.append(f"sys{self.system_prompt_len}" + ("-shared" if self.shared_system_prompt else ""))
        if self.think_time_s:
            dist = "" if self.think_time_dist == "fixed" else f"-{self.think_time_dist[:3]}"
            parts.append(f"think{self.think_time_s:g}s{dist}")
        if self.assistant_turns == "fixed":
            parts.append("fixed-replies")
        return ",".join(parts)

    @property
    def trajectory_shape(self) -> str:
        """A trajectories workload apart from its lengths: "agents.jsonl,mlcommons" or, generated,
        "16x6t-geo,sys64,think2s-exp"; then what changes what is sent: no salt, skipped trajectories, fixed replies."""
        if self.dataset_path is not None:
            parts = [Path(self.dataset_path).name] + ([self.trajectory_format] if self.trajectory_format != "auto" else [])
        else:
            dist = "" if self.turns_dist == "fixed" else f"-{self.turns_dist[:3]}"
            parts = [f"{self.num_trajectories}x{self.session_shape.replace(f'{self.turns}t', f'{self.turns}t{dist}', 1)}"]
            parts = [p for p in parts[0].split(",") if p != "fixed-replies"]
        parts += [flag for flag, on in (("nosalt", self.no_salt), ("skip", self.unreplayable == "skip"),
                                        ("fixed-replies", self.assistant_turns == "fixed")) if on]
        return ",".join(parts)

    @property
    def last_turn_len(self) -> int | None:
        """Prompt tokens of a session's last turn: system + turns x input + (turns - 1) x output."""
        if self.kind != "sessions" or self.turns is None or self.input_len is None or self.output_len is None:
            return None
        return (self.system_prompt_len or 0) + self.turns * self.input_len + (self.turns - 1) * self.output_len


class SLO(StrictModel):
    """Per-request thresholds (a request meets them or not: goodput) and limits on a cell's statistics
    (`ttft:p99<=2000`: what a capacity search answers against; spec/slo.py)."""

    ttft_ms: float | None = Field(None, gt=0, le=MAX_MS, description="goodput SLO: time to first token, ms")
    tpot_ms: float | None = Field(None, gt=0, le=MAX_MS, description="goodput SLO: time per output token, ms")
    e2el_ms: float | None = Field(None, gt=0, le=MAX_MS, description="goodput SLO: end-to-end latency, ms")
    limits: list[Limit] = Field(default_factory=list, description="limits on a cell's statistics, e.g. "
                                "[ttft:p99<=2000, tpot:p99<=200]: the capacity search's SLOs (tier 'slo')")

    def is_empty(self) -> bool:
        """No per-request threshold (goodput is then not counted; `limits` are another thing)."""
        return self.ttft_ms is None and self.tpot_ms is None and self.e2el_ms is None

    def thresholds(self) -> dict[str, float]:
        """The per-request thresholds given, in ms by metric: {"ttft": 500.0, ...}."""
        given = {"ttft": self.ttft_ms, "tpot": self.tpot_ms, "e2el": self.e2el_ms}
        return {k: v for k, v in given.items() if v is not None}

    @model_serializer(mode="wrap")
    def _without_no_limits(self, handler: SerializerFunctionWrapHandler) -> dict:
        """No `limits` key when there are none: an SLO stored before limits existed reads and writes the same."""
        out = handler(self)
        if not self.limits:
            out.pop("limits", None)
        return out


class Load(StrictModel):
    """One cell's load: closed-loop concurrency, an open-loop request rate, or a trace's own arrivals; for a
    sessions workload, users (closed loop) or a session start rate (open loop)."""

    concurrency: int | None = Field(None, gt=0, description="closed loop: requests in flight")
    request_rate: float | None = Field(None, ge=MIN_RATE, description="open loop: requests/s")
    users: int | None = Field(None, gt=0, description="sessions, closed loop: users, each running one session at a "
                              "time (the next when it ends)")
    session_rate: float | None = Field(None, ge=MIN_RATE, description="sessions, open loop: sessions started per second")
    num_sessions: int | None = Field(None, gt=0, description="sessions per cell")
    ramp_up_s: float | None = Field(None, gt=0, description="sessions: users start evenly spread over this many "
                                    "seconds (default: all at once)")
    window: SessionWindow | None = Field(None, description=WINDOW)
    arrival: Literal["poisson", "constant", "trace"] = Field(
        "poisson", description="open-loop arrivals; trace: the trace workload's timestamps (no rate)")
    max_concurrency: int | None = Field(None, gt=0, description="cap on in-flight requests in rate mode")
    rate_cap: Literal["queue", "gate"] = Field("queue", description=RATE_CAP)
    burstiness: float = Field(1.0, gt=0, le=MAX_BURSTINESS, description="Poisson arrivals: shape of the gamma-distributed gaps "
                              "(vLLM's --burstiness): 1 = Poisson, < 1 burstier, > 1 more even; same mean rate")
    num_prompts: int | None = Field(None, gt=0, description="requests per cell (trace: at most this many rows)")
    duration_s: float | None = Field(None, gt=0, description="seconds per cell (trace: the rows due before this)")
    warmup_requests: int | None = Field(None, ge=0, le=MAX_WARMUP, description=WARMUP_REQUESTS)
    warmup_first_prompt: bool = Field(False, description=WARMUP_FIRST_PROMPT)

    @model_validator(mode="after")
    def _one_mode(self) -> "Load":
        if self.arrival == "trace":
            if self.concurrency is not None or self.request_rate is not None or self.sessions:
                raise ValueError("a trace replay takes its arrivals from the trace: drop concurrency and request_rate "
                                 "(speed it up or slow it down with the workload's time_scale)")
            return self
        if self.sessions:
            return self._session_mode()
        if self.num_sessions is not None or self.ramp_up_s is not None or self.window is not None:
            raise ValueError("num_sessions, ramp_up_s and window apply to sessions loads (users or session_rate)")
        if (self.concurrency is None) == (self.request_rate is None):
            raise ValueError("give exactly one of concurrency or request_rate")
        if self.burstiness != 1.0 and (self.request_rate is None or self.arrival != "poisson"):
            raise ValueError("burstiness shapes Poisson arrivals: it needs a request rate and arrival poisson")
        if self.rate_cap == "gate" and (self.request_rate is None or self.max_concurrency is None):
            raise ValueError("rate_cap gate needs a request rate and max_concurrency")
        if self.num_prompts is None and self.duration_s is None:
            raise ValueError("give num_prompts or duration_s")
        return self

    def _session_mode(self) -> "Load":
        if (self.users is None) == (self.session_rate is None) or self.concurrency or self.request_rate:
            raise ValueError("a sessions load is users (closed loop) or session_rate (open loop): give exactly one")
        if self.num_prompts is not None:
            raise ValueError("a sessions load counts sessions: give num_sessions (each runs the workload's turns)")
        if self.ramp_up_s is not None and self.users is None:
            raise ValueError("ramp_up_s spreads the users' starts: it needs users (session_rate sets its own starts)")
        if self.burstiness != 1.0 and (self.session_rate is None or self.arrival != "poisson"):
            raise ValueError("burstiness shapes Poisson arrivals: it needs session_rate and arrival poisson")
        return self

    @property
    def sessions(self) -> bool:
        """A load of sessions (users or a session rate), each a conversation of several turns."""
        return self.users is not None or self.session_rate is not None

    @property
    def label(self) -> str:
        window = f",window={self.window}" if self.window is not None else ""
        if self.users is not None:
            return f"users={self.users}" + (f",ramp={self.ramp_up_s:g}s" if self.ramp_up_s else "") + window
        if self.session_rate is not None:
            return (f"sessions={self.session_rate:g}/s" + (f",b={self.burstiness:g}" if self.burstiness != 1.0 else "")
                    + window)
        if self.concurrency is not None:
            return f"c={self.concurrency}"
        if self.arrival == "trace":
            return "replay" + (f",max={self.max_concurrency}" if self.max_concurrency else "")
        return (f"rate={self.request_rate:g}/s" + (f",b={self.burstiness:g}" if self.burstiness != 1.0 else "")
                + (f",gate={self.max_concurrency}" if self.rate_cap == "gate" else ""))

    @property
    def open_loop(self) -> bool:
        return self.concurrency is None and self.users is None

    @property
    def in_flight_cap(self) -> int | None:
        """Requests in flight at most: the concurrency, the users (each waits for its answer), or the cap."""
        return self.concurrency or self.users or self.max_concurrency

    @property
    def at_once(self) -> int | None:
        """Requests the cell runs at once at most: its concurrency or users, or a rate's cap, never more than
        its own requests (None: an uncapped rate or a trace, as many as arrive before the first ones end)."""
        own = self.num_sessions if self.sessions else self.num_prompts
        cap = self.in_flight_cap
        return cap if cap is None or own is None else min(cap, own)

    def warmup_count(self) -> int:
        """The warmup's requests: as many as given, else as many as the cell runs at once (one where that is
        not bounded), so a warmup never sends more than the cell itself will have in flight."""
        if self.warmup_requests is not None:
            return self.warmup_requests
        return self.at_once or 1

    @property
    def warmup_width(self) -> int:
        """The warmup's requests in flight at once: as many as the cell runs at once, at most its count."""
        count = self.warmup_count()
        return max(1, min(count, self.at_once or count))
