"""GuideLLM in tokenbench's terms: the classic `guidellm benchmark [run]` (v0.2 to v0.6.1, the form every
README and blog post used) and 0.8.1's `guidellm run` with registry options (`--profile kind=sweep`).
Both are read into one `Guide`, then written as tokenbench options. GuideLLM's synthetic data asks exact
output lengths (ignore_eos), as tokenbench does; its bounds (--max-seconds, --max-requests) apply to each
benchmark; its sweep is a synchronous and a throughput cell, then constant rates between the two."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from tokenbench.peers import argv, common
from tokenbench.peers.equivalent import GUIDELLM_MAX_CONCURRENCY, Equivalent, Sweep, no_meaning

DEFAULT_OUTPUT = 128
V3_SAMPLES = 1000           # v0.3's synthetic data had 1000 rows: a benchmark without a bound ended there
FORMATS = {"/v1/chat/completions": "chat", "chat_completions": "chat", "/v1/completions": "completions",
           "text_completions": "completions"}
DATA_KEYS = {"prompt_tokens", "output_tokens", "prompt_tokens_stdev", "output_tokens_stdev", "samples",
             "prefix_tokens", "prefix_count", "turns", "source", "prompt_tokens_min", "prompt_tokens_max",
             "output_tokens_min", "output_tokens_max"}
BOUNDS = {"prompt_tokens_min": "--min-input-len", "prompt_tokens_max": "--max-input-len",
          "output_tokens_min": "--min-output-len", "output_tokens_max": "--max-output-len"}
DROPPED = {"--output-path": "tokenbench stores every cell in its database (tokenbench export RUN writes CSV or "
           "JSON)", "--outputs": "", "--output-dir": "", "--sample-requests": "tokenbench keeps every request",
           "--output-extras": "", "--disable-console": "", "--disable-console-interactive": "",
           "--display-scheduler-stats": "", "--output": "tokenbench stores every cell in its database "
           "(tokenbench export RUN writes CSV or JSON)", "--label": "", "--tokenizer": "tokenbench counts tokens "
           "with the server's /tokenize (or a local --tokenizer DIR)", "--data-loader": ""}


@dataclass(kw_only=True)
class Guide:
    """What a GuideLLM line asks, in its own terms."""

    tool: str
    target: str = ""
    model: str | None = None
    api: str = "chat"
    profile: str = "sweep"
    rates: list[float] = field(default_factory=list)
    strategy: str = "constant"
    cap: int | None = None
    seconds: float | None = None
    requests: int | None = None
    warmup: float | None = None
    data: dict = field(default_factory=dict)
    seed: int | None = None
    slo: dict = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    tokenizer: str | None = None
    v3: bool = False            # the v0.3 spelling (--rate-type): text completions, 1000-row synthetic data


# ---- the classic `guidellm benchmark` -------------------------------------------------------------------

def from_benchmark(given: argv.Given) -> Guide:
    g = Guide(tool="guidellm benchmark", v3=given.spellings.get("--profile") == "--rate-type")
    g.target = given.text("--target") or ""
    g.model = given.text("--model")
    g.api = "completions" if g.v3 else "chat"
    if given.has("--request-format"):
        g.api = _format(g.tool, given.text("--request-format") or "")
    g.profile = given.text("--profile") or "sweep"
    g.rates = [float(r) for r in ",".join(given.all("--rate")).split(",") if r.strip()]
    g.seconds, g.requests = given.number("--max-seconds"), _int(given, "--max-requests")
    g.warmup = given.number("--warmup")
    g.seed = _int(given, "--random-seed")
    g.data = _data(g.tool, given.all("--data"))
    _classic_rest(g, given)
    _leftover(g, given, CLASSIC)
    return g


CLASSIC = {"--target", "--model", "--request-format", "--profile", "--rate", "--max-seconds", "--max-requests",
           "--warmup", "--random-seed", "--data", "--backend", "--backend-kwargs", "--processor", "--max-errors",
           "--max-error-rate", "--max-global-error-rate", "--detect-saturation", "--over-saturation", "--cooldown",
           "--rampup"}
RUN = {"--backend", "--profile", "--constraint", "--data", "--seed", "--metrics", "--override"}


def _leftover(g: Guide, given: argv.Given, handled: set[str]) -> None:
    """Options that do not change the cells are dropped with a note; any other refuses the line."""
    for name in given.names():
        if name in handled:
            continue
        if name not in DROPPED:
            raise no_meaning(g.tool, f"{name} has no tokenbench meaning", f"drop {name} to measure the rest")
        g.notes.append(f"{g.tool}'s {name} is dropped" + (f": {DROPPED[name]}" if DROPPED[name] else
                                                          " (it does not change what is measured)"))


def _classic_rest(g: Guide, given: argv.Given) -> None:
    if given.text("--backend") not in (None, "openai_http"):
        raise no_meaning(g.tool, f"--backend {given.text('--backend')} runs vLLM inside GuideLLM; tokenbench "
                         "measures a server over HTTP", "serve the model and give --target")
    if given.has("--backend-kwargs"):
        _backend_kwargs(g, given.text("--backend-kwargs") or "")
    g.tokenizer = given.text("--processor")
    for name in ("--max-errors", "--max-error-rate", "--max-global-error-rate", "--detect-saturation",
                 "--over-saturation"):
        if given.has(name):
            g.notes.append(f"GuideLLM's {name} stops a benchmark early; tokenbench measures every cell to its "
                           "bound (--max-error-rate marks a cell failed above a failed fraction)")
    if given.has("--cooldown"):
        g.notes.append("GuideLLM leaves the last --cooldown part of each benchmark out of its figures; tokenbench "
                       "measures to the end")
    for name in ("--rampup",):
        if given.number(name):
            raise no_meaning(g.tool, f"{name} ramps the rate up; tokenbench's cells start at their rate",
                             f"drop {name}")


def _backend_kwargs(g: Guide, text: str) -> None:
    try:
        kwargs = json.loads(text)
    except json.JSONDecodeError:
        kwargs = None
    if not isinstance(kwargs, dict) or set(kwargs) - {"extras", "api_key"}:
        raise no_meaning(g.tool, f"--backend-kwargs {text}: tokenbench reads only extras.body (sampling fields)",
                         "pass an API key with --api-key-env VAR")
    g.data["_body"] = ((kwargs.get("extras") or {}).get("body") or {})


# ---- 0.8.1's `guidellm run` ------------------------------------------------------------------------------

def from_run(given: argv.Given) -> Guide:
    g = Guide(tool="guidellm run")
    backend = _registry(g.tool, given.text("--backend") or "kind=openai_http")
    if backend.get("kind") != "openai_http":
        raise no_meaning(g.tool, f"--backend kind={backend.get('kind')}: tokenbench measures an OpenAI HTTP server",
                         "use --backend kind=openai_http,target=URL")
    g.target, g.model = str(backend.get("target", "")), backend.get("model")
    g.api = _format(g.tool, str(backend.get("request_format", "/v1/chat/completions")))
    _run_profile(g, _registry(g.tool, given.text("--profile") or "kind=sweep"))
    for text in given.all("--constraint"):
        _constraint(g, _registry(g.tool, text))
    data = [_registry(g.tool, d) for d in given.all("--data")]
    if len(data) != 1 or data[0].pop("kind", None) != "synthetic_text":
        raise no_meaning(g.tool, "only one --data kind=synthetic_text has a tokenbench workload",
                         "use --data kind=synthetic_text,prompt_tokens=N,output_tokens=M")
    g.data = _synthetic(g.tool, data[0])
    if given.has("--seed"):
        g.seed = int(_registry(g.tool, given.text("--seed") or "").get("value", 42))
    _metrics(g, given.text("--metrics"))
    _overrides(g, given.all("--override"))
    _leftover(g, given, RUN)
    return g


def _run_profile(g: Guide, profile: dict) -> None:
    g.profile = str(profile.get("kind", "sweep"))
    for key in ("rate", "streams"):
        if key in profile:
            value = profile[key]
            g.rates = [float(x) for x in (value if isinstance(value, list) else [value])]
    if "sweep_size" in profile:
        g.rates = [float(profile["sweep_size"])]
    g.strategy = str(profile.get("strategy_type", "constant"))
    g.cap = int(profile["max_concurrency"]) if profile.get("max_concurrency") else None
    g.warmup = float(profile["warmup"]) if "warmup" in profile else None
    if "cooldown" in profile:
        g.notes.append("GuideLLM leaves the cooldown part of each benchmark out of its figures; tokenbench measures "
                       "to the end")
    if float(profile.get("rampup_duration", 0) or 0):
        raise no_meaning(g.tool, "rampup_duration ramps the rate up; tokenbench's cells start at their rate",
                         "drop rampup_duration")


def _constraint(g: Guide, c: dict) -> None:
    kind = c.get("kind")
    if kind == "max_duration":
        g.seconds = float(c["seconds"])
    elif kind == "max_requests":
        g.requests = int(float(c["count"]))
    else:
        g.notes.append(f"GuideLLM's --constraint kind={kind} stops a benchmark early; tokenbench measures every "
                       "cell to its bound")


def _metrics(g: Guide, text: str | None) -> None:
    metrics = _registry(g.tool, text) if text else {}
    for key in ("ttft_ms", "tpot_ms", "e2el_ms"):
        if f"slo.{key}" in metrics:
            g.slo[key.removesuffix("_ms")] = metrics[f"slo.{key}"]


def _overrides(g: Guide, words: list[str]) -> None:
    for path, values in zip(words[::2], words[1::2], strict=False):
        if path not in ("profile.rate", "profile.streams"):
            raise no_meaning(g.tool, f"--override {path}: only profile.rate and profile.streams exist",
                             "use --override profile.rate 10,20")
        g.rates = [float(v) for v in values.split(",")]


def _registry(tool: str, text: str) -> dict:
    """`kind=NAME,key=value,...` (dotted keys kept as they are) or the same as JSON."""
    if text.strip().startswith("{"):
        try:
            return dict(json.loads(text))
        except (json.JSONDecodeError, TypeError, ValueError):
            raise no_meaning(tool, f"{text}: not a JSON object", "write kind=NAME,key=value,...") from None
    out = {}
    for part in (p for p in text.split(",") if p.strip()):
        key, sep, value = part.partition("=")
        if not sep:
            raise no_meaning(tool, f"'{part}' in {text} is not key=value", "write kind=NAME,key=value,...")
        out[key.strip()] = value.strip()
    return out


# ---- shared ---------------------------------------------------------------------------------------------

def _format(tool: str, text: str) -> str:
    if text not in FORMATS:
        raise no_meaning(tool, f"request format {text}: tokenbench measures chat and text completions",
                         "use /v1/chat/completions or /v1/completions")
    return FORMATS[text]


def _data(tool: str, items: list[str]) -> dict:
    if len(items) != 1:
        raise no_meaning(tool, "the line has no --data (GuideLLM itself requires it)" if not items else
                         "several --data sources have no tokenbench workload", "give one synthetic --data "
                         "\"prompt_tokens=N,output_tokens=M\"")
    text = items[0].strip()
    fields = _registry(tool, text) if text.startswith("{") or "=" in text else None
    if fields is None:
        raise no_meaning(tool, f"--data {text}: tokenbench makes synthetic prompts, it does not read GuideLLM "
                         "datasets or files", "use --data \"prompt_tokens=N,output_tokens=M\"")
    return _synthetic(tool, fields)


def _synthetic(tool: str, fields: dict) -> dict:
    unknown = set(fields) - DATA_KEYS
    if unknown or "prompt_tokens" not in fields:
        raise no_meaning(tool, f"synthetic data {', '.join(sorted(unknown)) or 'without prompt_tokens'} has no "
                         "tokenbench meaning", "give prompt_tokens, output_tokens and optionally their _stdev")
    if int(fields.get("turns", 1)) != 1:
        raise no_meaning(tool, f"turns={fields['turns']}: multi-turn conversations have no tokenbench workload",
                         "drop turns (one request per conversation)")
    return {k: v for k, v in fields.items() if k != "turns"}


def _int(given: argv.Given, name: str) -> int | None:
    value = given.number(name, float)
    return int(value) if value is not None else None


# ---- Guide -> tokenbench ----------------------------------------------------------------------------------

def equivalent(g: Guide) -> Equivalent:
    eq = Equivalent(g.tool, checked_on(g))
    eq.set("--base-url", _base(eq, g.target))
    if g.model:
        eq.set("--model", g.model)
    eq.set("--api", g.api)
    eq.differ(f"GuideLLM's default API here is {'text completions (v0.3, the --rate-type era)' if g.v3 else 'chat completions (v0.4 and later)'}"
              f": tokenbench sends --api {g.api}")
    _lengths(eq, g)
    _profile(eq, g)
    _bounds(eq, g)
    _warmup(eq, g)
    if g.seed is not None:
        eq.set("--seed", g.seed)
    if g.slo:
        eq.set("--slo", ",".join(f"{k}={v}" for k, v in g.slo.items()))
    if g.tokenizer:
        eq.set("--tokenizer", g.tokenizer)
    for note in g.notes:
        eq.differ(note)
    return eq


def checked_on(g: Guide) -> str:
    """The GuideLLM whose code the differences of this line were checked on: 0.3.1 for the --rate-type
    spelling, 0.6.1 for `guidellm benchmark`, 0.8.1 for `guidellm run`."""
    return "GuideLLM 0.3.1" if g.v3 else "GuideLLM 0.6.1" if g.tool == "guidellm benchmark" else "GuideLLM 0.8.1"


def _base(eq: Equivalent, target: str) -> str:
    if not target:
        raise no_meaning(eq.tool, "the line names no server (--target)", "give --target http://HOST:PORT")
    url = target.rstrip("/")
    if url.endswith("/v1"):
        eq.differ("GuideLLM's --target ends in /v1; tokenbench's --base-url is the server root (it adds /v1/...)")
        url = url.removesuffix("/v1")
    return url


def _lengths(eq: Equivalent, g: Guide) -> None:
    data = g.data
    common.body_fields(eq, data.pop("_body", {}), "--backend-kwargs extras.body")
    prefix = int(data.get("prefix_tokens", 0) or 0)
    eq.set("--dataset-name", "prefix" if prefix else "random")
    if prefix:
        eq.set("--prefix-len", prefix)
        eq.set("--num-groups", int(data.get("prefix_count", 1)))
    eq.set("--input-len", int(data["prompt_tokens"]) + prefix)
    out = data.get("output_tokens")
    if out is None:
        eq.differ(f"GuideLLM without output_tokens lets the server decide each answer's length; tokenbench asks "
                  f"exact lengths: --output-len {DEFAULT_OUTPUT} here (change it to your answers' length)")
    eq.set("--output-len", int(out) if out is not None else DEFAULT_OUTPUT)
    _spread(eq, data)
    if "source" in data:
        eq.differ("GuideLLM's synthetic text comes from its source text; tokenbench's from random tokens")


def _spread(eq: Equivalent, data: dict) -> None:
    """*_stdev: normal draws (GuideLLM clips them at 5 standard deviations unless *_min/*_max say where);
    *_min/*_max: the bounds, and alone a uniform draw between them (tokenbench's min/max lengths)."""
    for theirs, ours in (("prompt_tokens_stdev", "--input-len-stddev"), ("output_tokens_stdev", "--output-len-stddev")):
        if float(data.get(theirs, 0) or 0):
            eq.set(ours, float(data[theirs]))
            side = theirs.removesuffix("_stdev")
            if f"{side}_min" not in data and f"{side}_max" not in data:
                eq.differ(f"GuideLLM clips its {theirs} normal draws at 5 standard deviations; tokenbench's are "
                          "rounded and at least 1, otherwise unclipped")
    for theirs, ours in BOUNDS.items():
        if theirs in data:
            eq.set(ours, int(data[theirs]))


def _profile(eq: Equivalent, g: Guide) -> None:
    kind, cap = g.profile, g.cap or GUIDELLM_MAX_CONCURRENCY
    if kind == "synchronous":
        eq.set("--concurrency", 1)
    elif kind == "concurrent":
        eq.set("--concurrency", ",".join(str(int(r)) for r in _need(eq, g)))
    elif kind == "throughput":
        eq.set("--concurrency", cap)
    elif kind in ("constant", "async", "poisson"):
        eq.set("--request-rate", ",".join(f"{r:g}" for r in _need(eq, g)))
        eq.set("--arrival", "poisson" if kind == "poisson" else "constant")
        eq.set("--max-concurrency", cap)
    elif kind == "sweep":
        size = int(g.rates[0]) if g.rates else 10
        eq.sweep = Sweep(max(size - 2, 1), "poisson" if g.strategy == "poisson" else "constant")
        eq.differ(f"GuideLLM measures its sweep as one run; tokenbench measures it as two benches: the "
                  f"synchronous (1 in flight) and throughput ({cap} in flight) cells, then {eq.sweep.count} "
                  f"{eq.sweep.arrival}-rate cells spaced evenly from the first's request rate to the second's "
                  "(tokenbench translate --run chains them)")
    else:
        raise no_meaning(eq.tool, f"profile {kind} has no tokenbench meaning", "use synchronous, concurrent, "
                         "throughput, constant, poisson or sweep")


def _need(eq: Equivalent, g: Guide) -> list[float]:
    if not g.rates:
        raise no_meaning(eq.tool, f"profile {g.profile} needs --rate (GuideLLM refuses it too)", "give --rate N")
    return g.rates


def _bounds(eq: Equivalent, g: Guide) -> None:
    """GuideLLM's bounds apply to each benchmark; without one v0.3 ended at its 1000 synthetic rows (samples)."""
    if g.seconds and g.requests is not None:     # tokenbench ends a cell by a count or a duration, not both
        eq.differ(f"the line bounds each benchmark by --max-requests {g.requests} and --max-seconds {g.seconds:g}, "
                  "whichever comes first; a tokenbench cell ends by one bound: it measures the requests "
                  f"(--num-prompts {g.requests}); give --duration alone for the time bound")
    elif g.seconds:
        eq.set("--duration", g.seconds)
    count = g.requests
    if count is None and not g.seconds and ("samples" in g.data or g.v3):
        count = int(g.data.get("samples", V3_SAMPLES))
        eq.differ(f"the line has no --max-seconds/--max-requests: GuideLLM v0.3 ended each benchmark after its "
                  f"{count} synthetic rows (samples); later versions never end: tokenbench sends {count} requests")
    if count is None and not g.seconds:
        raise no_meaning(eq.tool, "the line has no end condition (no --max-seconds or --max-requests, GuideLLM "
                         "v0.4+ generates data without end)", "add --max-seconds S or --max-requests N")
    if count is not None:
        eq.set("--num-prompts", count)


def _warmup(eq: Equivalent, g: Guide) -> None:
    """GuideLLM's warmup: a fraction (0, 1) or an absolute part of each benchmark, left out of its figures."""
    w = g.warmup
    if not w:
        eq.set("--warmup-requests", 0)
        return
    if w < 1 and g.requests:
        first = round(w * g.requests)
        eq.set("--warmup-requests", first)
        eq.set("--num-prompts", g.requests - first)
        eq.differ(f"GuideLLM leaves the first {w:g} of each benchmark's {g.requests} requests out of its figures: "
                  f"tokenbench sends {first} warmup requests, then measures {g.requests - first}")
    elif w >= 1 and g.requests and not g.seconds:
        eq.set("--warmup-requests", int(w))
    else:
        eq.differ(f"GuideLLM leaves the first {w:g} of each benchmark's time out of its figures; tokenbench warms "
                  "up with requests before measuring (as many as the cell's concurrency)")
