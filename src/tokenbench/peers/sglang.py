"""`python -m sglang.bench_serving` (SGLang 0.5.23, each difference checked on its code) in tokenbench's terms. SGLang's defaults differ from
vLLM's and are written out: ShareGPT prompts, random 1024:1024 whose lengths are drawn from 1..L unless
--random-range-ratio (SGLang's meaning: from L*r up to L, so 1 is exact), 1000 requests at once, one
warmup request, port 30000 for its own backends, outputs exact (ignore_eos) unless --disable-ignore-eos."""

from __future__ import annotations

from tokenbench.errors import UsageError
from tokenbench.peers import argv, common, serve
from tokenbench.peers.equivalent import Equivalent, no_meaning

TOOL = "sglang.bench_serving"
SHAREGPT = "ShareGPT_V3_unfiltered_cleaned_split.json"
SAME = {"--model": "--model", "--seed": "--seed", "--warmup-requests": "--warmup-requests", "--tag": "--label",
        "--output-file": "--output-file", "--output-details": "--output-details", "--disable-tqdm": "--disable-tqdm",
        "--temperature": "--temperature", "--top-p": "--top-p", "--tokenizer": "--tokenizer"}
DROPPED = {
    "--served-model-name": "", "--ready-check-timeout-sec": "tokenbench checks the server before the first cell",
    "--print-requests": "", "--profile": "SGLang's torch profiler is not started", "--profile-activities": "",
    "--profile-output-dir": "", "--profile-prefix": "", "--plot-throughput": "tokenbench's report plots each "
    "cell (tokenbench report RUN)", "--flush-cache": "tokenbench resets the prefix cache of an engine it knows "
    "before each cell", "--flush-cache-timeout": "", "--tokenize-prompt": "tokenbench's completions prompts are "
    "token ids anyway",
    "--rust-client": "", "--rust-worker-threads": "", "--pd-separated": "", "--cache-report": "tokenbench reports "
    "the prefix-cache hits the server states", "--header": "tokenbench sends its own headers (an API key with "
    "--api-key-env/--api-key-file)", "--gsp-fast-prepare": "", "--gsp-ordered": "", "--gsp-send-routing-key": "",
    "--disable-stream": "tokenbench always streams: its E2EL is SGLang's latency, and TTFT/ITL come too",
    "--disable-ignore-eos": "tokenbench always asks exact output lengths (ignore_eos, min_tokens): SGLang's "
    "outputs would be ceilings"}
DATASETS = ("sharegpt", "random", "random-ids", "generated-shared-prefix")


def translate(given: argv.Given) -> Equivalent:
    eq = Equivalent(TOOL, f"SGLang {serve.SGLANG_VERSION}")
    backend = _target(eq, given)
    kind = given.text("--dataset-name") or "sharegpt"
    _dataset(eq, given, kind)
    count = _count(eq, given, kind)
    common.load(eq, given.text("--request-rate"), _int(given, "--max-concurrency"), count)
    eq.set("--warmup-requests", _int(given, "--warmup-requests") if given.has("--warmup-requests") else 1)
    _rest(eq, given, backend)
    _chat_template(eq, given, kind)
    _differences(eq, given, backend)
    return eq


def _chat_template(eq: Equivalent, given: argv.Given, kind: str) -> None:
    """--apply-chat-template: SGLang templates a ShareGPT prompt on the client (the tokenizer's chat template,
    the BOS token taken out) and sends the text to the backend's API; its random, random-ids and
    generated-shared-prefix prompts are never templated. On completions, tokenbench's equivalent is the chat
    API, where the server applies the model's template to the same prompt."""
    if not given.has("--apply-chat-template"):
        return
    if kind != "sharegpt":
        eq.differ(f"SGLang's --apply-chat-template templates only ShareGPT (and custom) prompts: for --dataset-name "
                  f"{kind} it changes nothing, and is dropped")
    elif eq.options.get("--api") == "chat":
        eq.differ("SGLang's --apply-chat-template with a chat backend templates each ShareGPT prompt on the client, "
                  "then sends it as a chat message the server templates again; tokenbench sends the plain prompt as "
                  "a chat message, templated once by the server")
    else:
        eq.set("--api", "chat")
        eq.differ("SGLang's --apply-chat-template templates each ShareGPT prompt on the client and sends the text to "
                  "the completions API; tokenbench sends it as a chat message (--api chat) and the server applies "
                  "the model's template: the same tokens where the server's template is the tokenizer's")


def _target(eq: Equivalent, given: argv.Given) -> str:
    backend = given.text("--backend") or "sglang"
    host = given.text("--host") or "0.0.0.0"
    eq.set("--base-url", (given.text("--base-url") or serve.base_url(host, _int(given, "--port"), backend)).rstrip("/"))
    if given.has("--model"):
        eq.set("--model", given.text("--model"))
    try:
        eq.set("--api", serve.api_of_backend(backend) or "completions")
    except UsageError as exc:
        raise no_meaning(eq.tool, exc.message, exc.hint) from None
    return backend


def _dataset(eq: Equivalent, given: argv.Given, kind: str) -> None:
    if kind not in DATASETS:
        raise no_meaning(eq.tool, f"--dataset-name {kind} has no tokenbench workload",
                         "tokenbench reads sharegpt, random (random-ids) and generated-shared-prefix (prefix) "
                         "workloads: docs/workloads.md")
    if kind == "sharegpt":
        return _sharegpt(eq, given)
    if kind == "generated-shared-prefix":
        return _shared_prefix(eq, given)
    eq.set("--dataset-name", "random")
    source = ("ShareGPT prompts' tokens repeated or cut to the drawn length" if kind == "random" else
              "consecutive token ids from a random offset")
    sent = ("sent as token ids (--tokenize-prompt)" if given.has("--tokenize-prompt") else
            "decoded to text, less the special tokens, and re-tokenized by the server")
    eq.differ(f"SGLang's {kind} prompts are {source}, {sent}; tokenbench's are random token ids of exactly that "
              "length (chat: text of exactly that many tokens)")
    eq.set("--input-len", _int(given, "--random-input-len") or 1024)
    eq.set("--output-len", _int(given, "--random-output-len") or 1024)
    ratio = given.number("--random-range-ratio") or 0.0
    if ratio != 1.0:            # SGLang's 1 is exact lengths; below 1, lengths from L*r up to L (0: 1..L)
        eq.set("--random-range-ratio", ratio)
        eq.set("--range-ratio-style", "sglang")


def _sharegpt(eq: Equivalent, given: argv.Given) -> None:
    if given.has("--sharegpt-context-len"):
        raise no_meaning(eq.tool, "--sharegpt-context-len filters on prompt + output, which tokenbench does not",
                         "filter with --max-input-len / --max-output-len instead")
    eq.set("--dataset-name", "sharegpt")
    eq.set("--dataset-path", given.text("--dataset-path") or SHAREGPT)
    if not given.text("--dataset-path"):
        eq.differ(f"SGLang downloads ShareGPT when --dataset-path is empty; tokenbench reads a local file: "
                  f"download {SHAREGPT} (Hugging Face anon8231489123/ShareGPT_Vicuna_unfiltered) first")
    if given.has("--sharegpt-output-len"):
        eq.set("--output-len", given.text("--sharegpt-output-len"))


def _shared_prefix(eq: Equivalent, given: argv.Given) -> None:
    """generated-shared-prefix: G system prompts of P tokens, each shared by K requests, each with a Q-token
    question: a prefix workload of G groups, input P + Q, G x K requests (SGLang ignores --num-prompts)."""
    if (given.number("--gsp-range-ratio") or 1.0) != 1.0 or (_int(given, "--gsp-num-turns") or 1) != 1:
        raise no_meaning(eq.tool, "generated-shared-prefix with --gsp-range-ratio below 1 or several turns has no "
                         "tokenbench workload", "drop them (exact lengths, one turn)")
    prefix = _int(given, "--gsp-system-prompt-len") or 2048
    eq.set("--dataset-name", "prefix")
    eq.set("--prefix-len", prefix)
    eq.set("--num-groups", _int(given, "--gsp-num-groups") or 64)
    eq.set("--input-len", prefix + (_int(given, "--gsp-question-len") or 128))
    eq.set("--output-len", _int(given, "--gsp-output-len") or 256)
    eq.differ("SGLang shuffles the shared-prefix requests; tokenbench rotates the groups (request i has prefix "
              "i mod G): each prefix is shared by the same number of requests")


def _count(eq: Equivalent, given: argv.Given, kind: str) -> int:
    if kind == "generated-shared-prefix":
        return (_int(given, "--gsp-num-groups") or 64) * (_int(given, "--gsp-prompts-per-group") or 16)
    return _int(given, "--num-prompts") or 1000


def _rest(eq: Equivalent, given: argv.Given, backend: str) -> None:
    handled = {"--backend", "--base-url", "--host", "--port", "--dataset-name", "--dataset-path", "--num-prompts",
               "--apply-chat-template",
               "--random-input-len", "--random-output-len", "--random-range-ratio", "--request-rate",
               "--max-concurrency", "--sharegpt-output-len", "--sharegpt-context-len", "--goodput",
               "--extra-request-body", "--gsp-range-ratio", "--gsp-num-turns", "--gsp-system-prompt-len",
               "--gsp-num-groups", "--gsp-question-len", "--gsp-output-len", "--gsp-prompts-per-group"}
    same = dict(SAME)
    if backend not in serve.NATIVE and given.has("--temperature"):
        del same["--temperature"]        # SGLang's OpenAI backends send temperature 0 whatever --temperature says
        eq.differ(f"SGLang's --backend {backend} sends temperature 0 whatever --temperature says: so does tokenbench")
    common.copy(eq, given, same)
    if given.has("--output-file"):
        eq.set("--backend", backend)          # named in each line of the JSONL, as SGLang writes it
    common.goodput(eq, given.all("--goodput"))
    common.extra_body(eq, given.text("--extra-request-body"), "--extra-request-body")
    common.dropped(eq, given, set(SAME) | handled, DROPPED)


def _differences(eq: Equivalent, given: argv.Given, backend: str) -> None:
    if backend in serve.NATIVE:
        eq.differ(f"SGLang's --backend {backend} posts to its native /generate; tokenbench sends the same requests "
                  "to /v1/completions (token ids, exact lengths)")
    if not given.has("--output-file"):
        eq.differ("SGLang appends every run to an auto-named JSONL file in the current folder; tokenbench stores "
                  "it in its database (--output-file FILE appends SGLang's JSONL too)")
    eq.differ("SGLang's warmup sends the first prompt with at most 32 output tokens; tokenbench's warmup requests "
              "are fresh prompts of the measured shape")


def _int(given: argv.Given, name: str) -> int | None:
    value = given.number(name, int)
    return int(value) if value is not None else None
