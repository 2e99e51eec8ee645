"""What every translation does the same way: options copied under tokenbench's spelling, loads, SLOs,
sampling fields of a request body, and options dropped (with what tokenbench does instead) or refused."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping

from tokenbench.peers import argv
from tokenbench.peers.equivalent import Equivalent, no_meaning
from tokenbench.spec.study import FIXED_BODY_KEYS

SAMPLING = ("--temperature", "--top-p", "--top-k", "--min-p", "--frequency-penalty", "--presence-penalty",
            "--repetition-penalty")
EXACT_KEYS = ("ignore_eos", "min_tokens", "max_tokens", "max_completion_tokens")    # tokenbench always sets these
SLO_KEYS = ("ttft", "tpot", "e2el")


def copy(eq: Equivalent, given: argv.Given, same: Mapping[str, str]) -> None:
    """Options tokenbench takes with the same meaning, under its spelling (flags without a value)."""
    for theirs, ours in same.items():
        if given.has(theirs):
            value = given.text(theirs)
            eq.set(ours, value if value else None)


def dropped(eq: Equivalent, given: argv.Given, handled: set[str], notes: Mapping[str, str]) -> None:
    """Options that do not change the cells are dropped with a difference line (what tokenbench does
    instead, when `notes` says); any other option refuses the line."""
    for name in given.names():
        if name in handled:
            continue
        if name not in notes:
            raise no_meaning(eq.tool, f"{name} has no tokenbench meaning", f"drop {name} to measure the rest")
        eq.differ(f"{eq.tool}'s {name} is dropped" + (f": {notes[name]}" if notes[name] else
                                                     " (it does not change what is measured)"))


def load(eq: Equivalent, rate: str | None, cap: int | None, count: int | None) -> None:
    """vLLM's and SGLang's load: a rate (inf = every request at once) with an optional in-flight cap.
    Every request at once with no cap is a closed loop as wide as the cell."""
    if count is not None:
        eq.set("--num-prompts", count)
    if rate is None or math.isinf(float(rate)):
        if cap:
            eq.set("--max-concurrency", cap)          # a closed loop at the cap, as vLLM's rate inf + cap
        elif count is not None:
            eq.set("--concurrency", count)
        return
    eq.set("--request-rate", rate)
    if cap:
        eq.set("--max-concurrency", cap)


def goodput(eq: Equivalent, pairs: list[str]) -> None:
    """vLLM's and SGLang's `--goodput ttft:500 tpot:50` (KEY:MS) as tokenbench's --slo ttft=500,tpot=50."""
    if not pairs:
        return
    out = []
    for item in pairs:
        key, _, ms = item.partition(":")
        if key.strip().lower() not in SLO_KEYS:
            raise no_meaning(eq.tool, f"--goodput {item}: tokenbench's SLOs are ttft, tpot and e2el (ms)",
                             "write e.g. --goodput ttft:500 tpot:50")
        out.append(f"{key.strip().lower()}={ms.strip()}")
    eq.set("--slo", ",".join(out))


def body_fields(eq: Equivalent, fields: Mapping[str, object], where: str) -> None:
    """Fields a peer merges into every request body: sampling fields become tokenbench's sampling options;
    the exact-length fields tokenbench always sends; what tokenbench writes itself is refused; anything else
    is merged over every body as it is (--extra-body)."""
    for key, value in fields.items():
        flag = "--" + key.replace("_", "-")
        if flag in SAMPLING:
            eq.set(flag, value)
        elif key in EXACT_KEYS:
            eq.differ(f"{where} {key}: tokenbench always asks exact output lengths (max_tokens = min_tokens, "
                      "ignore_eos)")
        elif key in FIXED_BODY_KEYS:
            raise no_meaning(eq.tool, f"{where} sets {key}, which tokenbench sets itself",
                             f"drop {key} (tokenbench writes {', '.join(FIXED_BODY_KEYS)} from the workload)")
        else:                                   # passed on as it is: tokenbench's --extra-body
            merged = json.loads(eq.options.get("--extra-body") or "{}")
            eq.set("--extra-body", json.dumps({**merged, key: value}, sort_keys=True))


def extra_body(eq: Equivalent, text: str | None, where: str) -> None:
    if text is None:
        return
    try:
        fields = json.loads(text)
    except json.JSONDecodeError:
        fields = None
    if not isinstance(fields, dict):
        raise no_meaning(eq.tool, f"{where} {text}: not a JSON object", "give a JSON object, e.g. '{\"top_p\": 1}'")
    body_fields(eq, fields, where)
