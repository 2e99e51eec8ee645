"""`vllm bench serve` (vLLM 0.32.0) and the older `benchmarks/benchmark_serving.py` in tokenbench's terms.
vLLM's defaults that differ from tokenbench's are written out (random 1024:128, 1000 requests, no warmup,
every request at once); what tokenbench cannot measure refuses the line in one line. Each difference was
checked on that version's own code (vllm/benchmarks/serve.py, datasets/, lib/endpoint_request_func.py)."""

from __future__ import annotations

import ast

from tokenbench.errors import UsageError
from tokenbench.peers import argv, common, serve
from tokenbench.peers.equivalent import Equivalent, no_meaning

TOOL = "vllm bench serve"
SAME = {"--model": "--model", "--num-warmups": "--warmup-requests", "--label": "--label", "--seed": "--seed",
        "--burstiness": "--burstiness", "--random-range-ratio": "--random-range-ratio",
        "--save-result": "--save-result", "--save-detailed": "--save-detailed", "--result-dir": "--result-dir",
        "--result-filename": "--result-filename", "--percentile-metrics": "--percentile-metrics",
        "--metric-percentiles": "--metric-percentiles", "--disable-tqdm": "--disable-tqdm", "--tokenizer": "--tokenizer",
        **{f: f for f in common.SAMPLING}}
DROPPED = {
    "--trust-remote-code": "", "--tokenizer-mode": "", "--skip-tokenizer-init": "", "--no-stream": "",
    "--skip-chat-template": "", "--disable-shuffle": "", "--no-oversample": "", "--append-result": "",
    "--metadata": "", "--request-id-prefix": "", "--insecure": "", "--ready-check-timeout-sec": "tokenbench "
    "checks the server (models, vocabulary) before the first cell", "--profile": "vLLM's torch profiler is not "
    "started", "--plot-timeline": "tokenbench's report draws each cell's request timeline (tokenbench report RUN)",
    "--timeline-itl-thresholds": "", "--plot-dataset-stats": "", "--header": "tokenbench sends its own headers "
    "(an API key with --api-key-env/--api-key-file)", "--timed-trace-chunk-hash-size": "",
    "--custom-ensure-client-side-data": ""}
DATASETS = ("random", "sharegpt", "custom", "prefix_repetition", "timed_trace", "random-mm", "sonnet")
CHECKED_ON = "vLLM 0.32.0"
OLD_SCRIPT = "vLLM's last benchmarks/benchmark_serving.py"
EXACT = ("random", "random-mm", "timed_trace")     # vllm bench serve sets ignore_eos itself (serve.py, since PR 28227)
MM_DEFAULT = "{(256, 256, 1): 0.5, (720, 1280, 1): 0.5, (720, 1280, 16): 0.0}"


def translate(given: argv.Given, old_script: bool = False) -> Equivalent:
    eq = Equivalent(TOOL, CHECKED_ON) if not old_script else Equivalent("benchmark_serving.py", OLD_SCRIPT)
    _target(eq, given, "vllm" if old_script else "openai")
    kind = given.text("--dataset-name") or ("sharegpt" if old_script else "random")
    _dataset(eq, given, kind)
    _load(eq, given)
    _rest(eq, given)
    _differences(eq, given, kind, old_script)
    return eq


def _target(eq: Equivalent, given: argv.Given, default_backend: str) -> None:
    backend = given.text("--backend") or default_backend
    url = given.text("--base-url") or serve.base_url(given.text("--host"), _int(given, "--port"), backend)
    eq.set("--base-url", url.rstrip("/"))
    if given.has("--served-model-name"):
        eq.set("--model", given.text("--served-model-name"))
        eq.differ("vLLM's --served-model-name is the model the requests name: tokenbench's --model")
    elif given.has("--model"):
        eq.set("--model", given.text("--model"))
    try:
        eq.set("--api", serve.api(backend, given.text("--endpoint")) or "completions")
    except UsageError as exc:
        raise no_meaning(eq.tool, exc.message, exc.hint) from None


def _dataset(eq: Equivalent, given: argv.Given, kind: str) -> None:
    if kind not in DATASETS:
        raise no_meaning(eq.tool, f"--dataset-name {kind} has no tokenbench workload",
                         "tokenbench reads random, sharegpt, custom (jsonl), prefix_repetition (prefix) and "
                         "timed_trace (trace) workloads: docs/workloads.md")
    if kind == "prefix_repetition":
        return _prefix_repetition(eq, given)
    if kind == "timed_trace":
        return _timed_trace(eq, given)
    if kind in ("sharegpt", "custom"):
        return _file(eq, given, kind)
    if kind == "sonnet":
        return _sonnet(eq, given)
    eq.set("--dataset-name", "random" if kind == "random" else "image")
    if kind == "random-mm":
        _images(eq, given)
    eq.set("--input-len", _int(given, "--random-input-len") or _int(given, "--input-len") or 1024)
    eq.set("--output-len", _int(given, "--random-output-len") or _int(given, "--output-len") or 128)
    if _int(given, "--random-prefix-len"):
        eq.set("--random-prefix-len", _int(given, "--random-prefix-len"))


def _file(eq: Equivalent, given: argv.Given, kind: str) -> None:
    if not given.has("--dataset-path"):
        raise no_meaning(eq.tool, f"--dataset-name {kind} needs --dataset-path", "give the local file")
    eq.set("--dataset-name", "jsonl" if kind == "custom" else "sharegpt")
    eq.set("--dataset-path", given.text("--dataset-path"))
    forced = given.text("--sharegpt-output-len") or given.text("--output-len")
    if kind == "custom":
        forced = given.text("--custom-output-len") or given.text("--output-len") or "256"
    if forced:
        eq.set("--output-len", forced)


def _images(eq: Equivalent, given: argv.Given) -> None:
    """random-mm with one image size (a bucket of probability 1, one frame) and a fixed number of images per
    request: tokenbench's image workload (synthetic images of that size, sent as image_url parts on chat)."""
    try:
        buckets = ast.literal_eval(given.text("--random-mm-bucket-config") or MM_DEFAULT)
    except (ValueError, SyntaxError):
        buckets = None
    used = [k for k, p in (buckets or {}).items() if p] if isinstance(buckets, dict) else []
    if len(used) != 1 or len(used[0]) != 3 or used[0][2] != 1 or (given.number("--random-mm-num-mm-items-range-ratio")
                                                                    or 0) or _int(given, "--random-prefix-len"):
        raise no_meaning(eq.tool, "random-mm maps to tokenbench's image workload only with one image size "
                         "(--random-mm-bucket-config '{(H, W, 1): 1.0}'), a fixed number of images and no prefix",
                         "tokenbench bench --dataset-name image --image-width W --image-height H --image-count N")
    height, width, _ = used[0]
    eq.set("--image-width", width)
    eq.set("--image-height", height)
    eq.set("--image-count", _int(given, "--random-mm-base-items-per-request") or 1)
    eq.differ("vLLM's random-mm images are random JPEGs; tokenbench's are synthetic PNGs of the same size (the "
              "image tokens the server counts are measured and checked)")


def _sonnet(eq: Equivalent, given: argv.Given) -> None:
    """The older sonnet dataset: a prefix of lines shared by every prompt, then random lines: a prefix
    workload of one group (lengths in tokens; the lines' text becomes random tokens)."""
    prefix = _int(given, "--sonnet-prefix-len") or 200
    eq.set("--dataset-name", "prefix")
    eq.set("--prefix-len", prefix)
    eq.set("--input-len", _int(given, "--sonnet-input-len") or 550)
    eq.set("--output-len", _int(given, "--sonnet-output-len") or 150)
    eq.differ("vLLM's sonnet prompts are lines of a poem (its shared prefix the first lines); tokenbench's are "
              "random tokens of the same lengths, the first prefix-len shared by every prompt")


def _prefix_repetition(eq: Equivalent, given: argv.Given) -> None:
    """P-token prefixes shared by num_prompts / G requests each, plus S unique tokens: a prefix workload."""
    prefix = _int(given, "--prefix-repetition-prefix-len") or 256
    suffix = _int(given, "--prefix-repetition-suffix-len") or 256
    eq.set("--dataset-name", "prefix")
    eq.set("--prefix-len", prefix)
    eq.set("--num-groups", _int(given, "--prefix-repetition-num-prefixes") or 10)
    eq.set("--input-len", prefix + suffix)
    eq.set("--output-len", _int(given, "--prefix-repetition-output-len") or 128)
    eq.differ("vLLM's prefix_repetition shuffles which request gets which prefix; tokenbench rotates the groups "
              "(request i has prefix i mod G): each prefix is shared by the same number of requests")


def _timed_trace(eq: Equivalent, given: argv.Given) -> None:
    """A Mooncake-style trace replayed at its timestamps (vLLM: timestamp x --timed-trace-sec-multiplier
    seconds; tokenbench: timestamp milliseconds x --time-scale)."""
    custom = [n for n in given.names() if n.startswith("--timed-trace-label-")]
    if custom or not given.has("--self-timed") or not given.has("--dataset-path"):
        raise no_meaning(eq.tool, "a timed_trace line maps to tokenbench's trace replay only with --self-timed, "
                         "--dataset-path and the default labels", "replay it with tokenbench bench --dataset-name "
                         "trace --dataset-path FILE (docs/workloads.md)")
    eq.set("--dataset-name", "trace")
    eq.set("--dataset-path", given.text("--dataset-path"))
    eq.set("--time-scale", (given.number("--timed-trace-sec-multiplier") or 1.0) * 1000)
    eq.differ("vLLM replays each trace row's hash ids as prompt blocks; tokenbench sends random tokens of each "
              "row's lengths (no prefix reuse between rows)")


def _load(eq: Equivalent, given: argv.Given) -> None:
    """vLLM: rate inf (every request at once) unless --request-rate, capped by --max-concurrency."""
    count, cap = _int(given, "--num-prompts") or 1000, _int(given, "--max-concurrency")
    if eq.options.get("--dataset-name") == "trace":          # the trace's own times: --request-rate is unused
        eq.set("--num-prompts", count)
        if cap:
            eq.set("--max-concurrency", cap)
    else:
        common.load(eq, given.text("--request-rate"), cap, count)
    eq.set("--warmup-requests", 0)


def _rest(eq: Equivalent, given: argv.Given) -> None:
    handled = {"--backend", "--endpoint", "--base-url", "--host", "--port", "--served-model-name", "--dataset-name",
               "--dataset-path", "--random-input-len", "--random-output-len", "--input-len", "--output-len",
               "--random-prefix-len", "--num-prompts", "--request-rate", "--max-concurrency", "--sharegpt-output-len",
               "--custom-output-len", "--self-timed", "--timed-trace-sec-multiplier", "--ignore-eos", "--goodput",
               "--extra-body", "--probe-request-rate", "--random-batch-size"}
    handled |= {n for n in given.names() if n.startswith(("--prefix-repetition-", "--sonnet-", "--random-mm-"))}
    common.copy(eq, given, SAME)
    common.goodput(eq, given.all("--goodput"))
    common.extra_body(eq, given.text("--extra-body"), "--extra-body")
    for name, fine in (("--probe-request-rate", 0.0), ("--random-batch-size", 1.0)):
        if given.has(name) and given.number(name) != fine:
            raise no_meaning(eq.tool, f"{name} {given.text(name)} has no tokenbench meaning", f"drop {name}")
    common.dropped(eq, given, set(SAME) | handled, DROPPED)


def _differences(eq: Equivalent, given: argv.Given, kind: str, old_script: bool) -> None:
    if not given.has("--ignore-eos") and (old_script or kind not in EXACT):
        eq.differ(f"vLLM sends max_tokens without ignore_eos for --dataset-name {kind} (it sets ignore_eos itself "
                  f"only for {', '.join(EXACT)}{'' if not old_script else ' in vllm bench serve, never here'}; no "
                  "--ignore-eos given): its answers may stop early, so its output lengths are ceilings; tokenbench "
                  "asks exactly that many tokens (ignore_eos, min_tokens) and checks each request")
    if not given.has("--temperature") and not old_script:
        eq.differ("vLLM 0.32 sends no temperature (the server's default sampling); tokenbench sends temperature 0 "
                  "(give --temperature T to send another)")
    if old_script:
        eq.set("--warmup-requests", 1)
        eq.differ("benchmark_serving.py's uncounted first test prompt is tokenbench's 1 warmup request (a fresh "
                  "prompt of the same shape)")
    if kind == "random":
        eq.differ("vLLM's random prompt is text decoded from random token ids and re-tokenized by the server (N "
                  "less the special tokens, near N); tokenbench sends exactly N token ids (chat: text of exactly N "
                  "tokens)")


def _int(given: argv.Given, name: str) -> int | None:
    value = given.number(name, int)
    return int(value) if value is not None else None
