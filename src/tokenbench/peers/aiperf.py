"""`aiperf profile` (AIPerf 0.13.0, each difference checked on its code) in tokenbench's terms. AIPerf's defaults differ from vLLM's and are
written out: the chat API, 550-token prompts, one request in flight, 10 requests, no warmup. Its
`--request-rate R --concurrency C` is ONE cell, rate R with at most C in flight, whose schedule waits for a
free slot and goes on at the rate (no catch-up): tokenbench's --max-concurrency C --rate-cap gate."""

from __future__ import annotations

import re

from tokenbench.errors import UsageError
from tokenbench.peers import argv, common, serve
from tokenbench.peers.equivalent import Equivalent, no_meaning

TOOL = "aiperf profile"
CHECKED_ON = "AIPerf 0.13.0"
DEFAULT_OUTPUT = 128        # AIPerf without --osl lets the model decide; tokenbench asks exact lengths
ENDPOINT_TYPES = {"chat": "chat", "completions": "completions"}
ARRIVALS = {"poisson": "poisson", "constant": "constant", "gamma": "poisson"}
GOODPUT_TAGS = {"time_to_first_token": "ttft", "inter_token_latency": "tpot", "request_latency": "e2el"}
DROPPED = {
    "--tokenizer-revision": "", "--tokenizer-trust-remote-code": "", "--ui-type": "", "--output-artifact-dir": "",
    "--profile-export-prefix": "", "--export-level": "", "--log-level": "", "--verbose": "", "--extra-verbose": "",
    "--gpu-telemetry": "", "--no-gpu-telemetry": "", "--server-metrics": "tokenbench samples the server's "
    "Prometheus /metrics during each cell", "--no-server-metrics": "", "--server-metrics-formats": "",
    "--request-timeout-seconds": "tokenbench's timeout is --timeout (600 s)", "--wait-for-model-timeout": "",
    "--wait-for-model-mode": "", "--wait-for-model-interval": "", "--api-key": "pass the key with --api-key-env VAR "
    "or --api-key-file FILE", "--header": "", "--slice-duration": "", "--auto-plot": "", "--export-outputs-json": "",
    "--benchmark-grace-period": "",
    "--num-dataset-entries": "AIPerf's --num-prompts/--num-dataset-entries is a pool of prompts reused across "
    "requests, not the request count; tokenbench sends a fresh prompt per request (no prefix-cache hits "
    "between them)", "--conversation-num": "AIPerf's --conversation-num is a pool of conversations reused across "
    "requests; tokenbench sends a fresh prompt per request", "--prompt-corpus": "",
    "--apply-chat-template": "", "--use-legacy-max-tokens": "", "--use-server-token-count": "tokenbench verifies "
    "every request's token counts against what the server reports"}


def translate(given: argv.Given) -> Equivalent:
    eq = Equivalent(TOOL, CHECKED_ON)
    _target(eq, given)
    _lengths(eq, given)
    _load(eq, given)
    _rest(eq, given)
    if not given.has("--streaming"):
        eq.differ("AIPerf without --streaming waits for whole responses (no TTFT or ITL); tokenbench always "
                  "streams: its E2EL is AIPerf's request latency, and TTFT/ITL are measured too")
    return eq


def _target(eq: Equivalent, given: argv.Given) -> None:
    url = given.text("--url") or "http://localhost:8000"
    eq.set("--base-url", (url if "://" in url else "http://" + url).rstrip("/"))
    if given.has("--model-names"):
        eq.set("--model", given.text("--model-names"))
    kind = given.text("--endpoint-type") or "chat"
    if kind not in ENDPOINT_TYPES:
        raise no_meaning(eq.tool, f"--endpoint-type {kind}: tokenbench measures chat and completions streams",
                         "use --endpoint-type chat or completions")
    api = ENDPOINT_TYPES[kind]
    if given.has("--custom-endpoint"):
        try:
            api = serve.api_of_endpoint(given.text("--custom-endpoint") or "")
        except UsageError as exc:
            raise no_meaning(eq.tool, exc.message, exc.hint) from None
    eq.set("--api", api)


def _lengths(eq: Equivalent, given: argv.Given) -> None:
    if given.has("--public-dataset") or given.has("--input-file"):
        return _dataset(eq, given)
    if given.has("--seq-dist"):
        eq.set("--length-histogram", given.text("--seq-dist"))
    else:
        eq.set("--input-len", _int(given, "--prompt-input-tokens-mean") or 550)
        eq.set("--output-len", _output(eq, given))
        _spread(eq, given)
    _prefix(eq, given)


def _output(eq: Equivalent, given: argv.Given) -> int:
    out = _int(given, "--prompt-output-tokens-mean")
    if out is None:
        eq.differ(f"AIPerf without --output-tokens-mean lets the model decide each answer's length; tokenbench "
                  f"asks exact lengths: --output-len {DEFAULT_OUTPUT} here (change it to your answers' length)")
        return DEFAULT_OUTPUT
    extras = dict(_pairs(given.all("--extra-inputs")))
    if extras.get("ignore_eos", "").lower() != "true":
        eq.differ("AIPerf's --output-tokens-mean only sets max_completion_tokens (no ignore_eos in --extra-inputs): "
                  "its outputs are ceilings; tokenbench asks exactly that many tokens and checks each request")
    return out


def _spread(eq: Equivalent, given: argv.Given) -> None:
    """AIPerf's stddevs (normal draws) or --random-range-ratio with its --random-corpus-style."""
    for theirs, ours in (("--prompt-input-tokens-stddev", "--input-len-stddev"),
                         ("--prompt-output-tokens-stddev", "--output-len-stddev")):
        if given.number(theirs):
            eq.set(ours, given.number(theirs))
    if given.has("--random-range-ratio"):
        eq.set("--random-range-ratio", given.number("--random-range-ratio"))
        eq.set("--range-ratio-style", given.text("--random-corpus-style") or "vllm")


def _prefix(eq: Equivalent, given: argv.Given) -> None:
    """--prefix-prompt-length P with a pool of K prefixes: tokenbench's prefix workload of K groups."""
    length = _int(given, "--prompt-prefix-length") or 0
    if not length:
        return
    if "--length-histogram" in eq.options:
        raise no_meaning(eq.tool, "prefix prompts with --sequence-distribution have no tokenbench workload",
                         "drop one of them")
    eq.set("--dataset-name", "prefix")
    eq.set("--prefix-len", length)
    eq.set("--num-groups", _int(given, "--prompt-prefix-pool-size") or 1)
    eq.set("--input-len", int(eq.options["--input-len"] or 0) + length)
    eq.differ("AIPerf picks a prefix at random for each request; tokenbench rotates the groups (request i has "
              "prefix i mod G)")


def _dataset(eq: Equivalent, given: argv.Given) -> None:
    name = given.text("--public-dataset")
    if name != "sharegpt":
        raise no_meaning(eq.tool, f"{'--public-dataset ' + str(name) if name else '--input-file'} has no tokenbench "
                         "workload", "tokenbench reads random prompts, ShareGPT, prompt JSONL and Mooncake traces "
                         "(docs/workloads.md)")
    eq.set("--dataset-name", "sharegpt")
    eq.set("--dataset-path", "ShareGPT_V3_unfiltered_cleaned_split.json")
    eq.differ("AIPerf downloads ShareGPT; tokenbench reads a local file: download "
              "ShareGPT_V3_unfiltered_cleaned_split.json first (or give its path)")


def _load(eq: Equivalent, given: argv.Given) -> None:
    """No load flag: one request in flight; no count or duration: 10 requests (AIPerf 0.13's code)."""
    rate, conc = given.text("--request-rate"), given.text("--concurrency")
    count, duration = given.text("--request-count"), given.text("--benchmark-duration")
    if duration and count:                  # tokenbench ends a cell by a count or a duration, not both
        eq.differ(f"the line stops at --request-count {count} or --benchmark-duration {duration}, whichever comes "
                  f"first; a tokenbench cell ends by one bound: it measures the requests (--num-prompts {count}); "
                  "give --duration alone for the time bound")
    elif duration:
        eq.set("--duration", duration)
        eq.differ("AIPerf waits up to --benchmark-grace-period (30 s) for requests in flight when the duration "
                  "ends; tokenbench's duration cell stops sending at the end and counts the requests that finish")
    if count or not duration:
        eq.set("--num-prompts", count or 10)
    if rate:
        eq.set("--request-rate", rate)
        eq.set("--arrival", ARRIVALS.get(given.text("--arrival-pattern") or "poisson", "poisson"))
        _burstiness(eq, given)
        if conc:
            eq.set("--max-concurrency", conc)
            eq.set("--rate-cap", "gate")
    else:
        eq.set("--concurrency", conc or 1)
    _warmup(eq, given)


def _burstiness(eq: Equivalent, given: argv.Given) -> None:
    pattern = given.text("--arrival-pattern")
    if pattern == "concurrency-burst":
        raise no_meaning(eq.tool, "--arrival-pattern concurrency-burst has no tokenbench meaning with a rate",
                         "use poisson, constant or gamma")
    if pattern == "gamma":
        eq.set("--burstiness", given.number("--arrival-smoothness") or 1.0)


def _warmup(eq: Equivalent, given: argv.Given) -> None:
    if given.has("--warmup-duration") or given.has("--num-warmup-sessions"):
        raise no_meaning(eq.tool, "a warmup by duration or sessions has no tokenbench meaning",
                         "use --warmup-request-count N (tokenbench: --warmup-requests N)")
    eq.set("--warmup-requests", _int(given, "--warmup-request-count") or 0)
    if given.has("--warmup-request-count"):
        eq.differ("AIPerf's warmup runs at the measured load; tokenbench's warmup requests run closed-loop at the "
                  "cell's concurrency (at most the warmup count)")


def _rest(eq: Equivalent, given: argv.Given) -> None:
    handled = {"--url", "--model-names", "--endpoint-type", "--custom-endpoint", "--public-dataset", "--input-file",
               "--seq-dist", "--prompt-input-tokens-mean", "--prompt-output-tokens-mean",
               "--prompt-input-tokens-stddev", "--prompt-output-tokens-stddev", "--random-range-ratio",
               "--random-corpus-style", "--prompt-prefix-length", "--prompt-prefix-pool-size", "--request-rate",
               "--concurrency", "--request-count", "--benchmark-duration", "--arrival-pattern", "--arrival-smoothness",
               "--warmup-request-count", "--extra-inputs", "--goodput", "--random-seed", "--tokenizer", "--streaming"}
    if given.has("--tokenizer"):
        eq.set("--tokenizer", given.text("--tokenizer"))
    if given.has("--random-seed"):
        eq.set("--seed", _int(given, "--random-seed"))
    _goodput(eq, given.text("--goodput"))
    _extra_inputs(eq, given.all("--extra-inputs"))
    common.dropped(eq, given, handled, DROPPED)


def _goodput(eq: Equivalent, text: str | None) -> None:
    """AIPerf's `--goodput "time_to_first_token:100 inter_token_latency:3.4"` (its ITL per request is vLLM's
    TPOT, (latency - TTFT) / (tokens - 1)) as --slo ttft=100,tpot=3.4."""
    if not text:
        return
    out = []
    for tag, ms in _pairs(text.split()):
        if tag not in GOODPUT_TAGS:
            raise no_meaning(eq.tool, f"--goodput {tag}: tokenbench's SLOs are TTFT, TPOT and E2EL",
                             "use time_to_first_token, inter_token_latency or request_latency")
        out.append(f"{GOODPUT_TAGS[tag]}={ms}")
    eq.set("--slo", ",".join(out))


def _extra_inputs(eq: Equivalent, items: list[str]) -> None:
    fields: dict[str, object] = {}
    for key, value in _pairs(items):
        try:
            fields[key] = float(value) if re.fullmatch(r"-?[\d.]+(e-?\d+)?", value) else value
        except ValueError:
            fields[key] = value
    common.body_fields(eq, fields, "--extra-inputs")


def _pairs(items: list[str]) -> list[tuple[str, str]]:
    out = []
    for item in items:
        key, sep, value = item.partition(":")
        if not sep:
            raise no_meaning(TOOL, f"'{item}' is not KEY:VALUE", "write e.g. --extra-inputs ignore_eos:true")
        out.append((key.strip(), value.strip()))
    return out


def _int(given: argv.Given, name: str) -> int | None:
    value = given.number(name, float)
    return int(value) if value is not None else None
