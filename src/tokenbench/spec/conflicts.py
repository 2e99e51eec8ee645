"""Options of a study that contradict each other, or that say nothing beside the others: refused, never
resolved in silence (one would be measured, the other ignored). Each rule names both options by their key
and flag; `StudySpec` checks them after its fields (a YAML spec, the flags and a stored spec alike).

The pairs were found by going over every option of the spec against the others (docs/cli.md, "Options that
contradict"): two ways of ending a cell, two API keys, two addresses, a receiver for spans never asked, a
price basis without a price, capacity settings without a search, loads a search would not use, a cap on no
rate, a shape of arrivals that never come, knobs of another workload kind."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tokenbench.spec.ports import PortRange, split_listen

if TYPE_CHECKING:
    from tokenbench.spec.study import StudySpec

# capacity-search keys -> their default: any other value says something only to a search
CAPACITY_KEYS = {"capacity_max": ("--capacity-max", 256), "capacity_start": ("--capacity-start", None),
                 "capacity_precision": ("--capacity-precision", 0.1), "capacity_budget": ("--capacity-budget", 24),
                 "sustain_s": ("--sustain-s", None), "slo_attainment": ("--slo-attainment", 0.9)}


def check(s: StudySpec) -> None:
    """ValueError naming the first pair of options that contradict each other or say nothing together."""
    for rule in (_target, _count, _price, _capacity, _search_loads, _closed_loop, _arrivals, _warmup, _text):
        problem = rule(s)
        if problem:
            raise ValueError(problem)


def _target(s: StudySpec) -> str | None:
    t = s.target
    if t.server_traces == "off" and t.otlp_listen:
        return ("target.otlp_listen (--otlp-listen) with target.server_traces off (--server-traces off): a receiver "
                "for spans that are never asked; drop one of them")
    if t.ports and t.otlp_listen:
        inside = PortRange.parse(t.ports)
        asked = split_listen(t.otlp_listen)[1]
        if not asked.any and not (inside.lo <= asked.lo and asked.hi <= inside.hi):
            return (f"target.otlp_listen (--otlp-listen) {t.otlp_listen} is outside target.ports (--ports) {t.ports}: "
                    "the receiver would open a port the range excludes; give a port of the range, or HOST:0")
    if t.ports and not t.profile and t.server_traces == "off":
        return ("target.ports (--ports) with a running server (--base-url) and target.server_traces off: tokenbench "
                "opens no port then (no engine, no span receiver); drop it")
    if t.api_key_env and t.api_key_file:
        return ("target.api_key_env (--api-key-env) with target.api_key_file (--api-key-file): two API keys, one "
                "would be sent; give one")
    return None


def _count(s: StudySpec) -> str | None:
    r = s.requests
    if r.duration_s is not None and r.num_prompts is not None and s.workload.kind != "trace":
        return ("requests.duration_s (--duration) with requests.num_prompts (--num-prompts): a cell ends after a "
                "duration or after a count of requests, not both (a trace alone takes both: its rows due in the "
                "duration, at most the count); give one")
    if (r.duration_s is not None or r.num_prompts is not None) and (r.per_concurrency != 4 or r.min != 16):
        return ("requests.per_concurrency / requests.min size a cell only without num_prompts (--num-prompts) or "
                "duration_s (--duration); drop them")
    return None


def _price(s: StudySpec) -> str | None:
    if s.price_basis != "device" and s.price_per_hour is None:
        return (f"price_basis {s.price_basis} (--price-basis) without price_per_hour (--price-per-hour): a basis "
                "of no price says nothing; give the price too, or drop the basis")
    return None


def _capacity(s: StudySpec) -> str | None:
    if not s.find_capacity:
        given = [(k, flag) for k, (flag, default) in CAPACITY_KEYS.items() if getattr(s, k) != default]
        if s.slo_tiers:
            given.append(("slo_tiers", "--slo-tier"))
        if given:
            key, flag = given[0]
            return (f"{key} ({flag}) sets the capacity search, and no search is asked: add find_capacity "
                    "(--find-capacity), or drop it")
        return None
    if s.capacity_start is not None and s.capacity_start > s.capacity_max:
        return (f"capacity_start {s.capacity_start:g} (--capacity-start) is above capacity_max {s.capacity_max:g} "
                "(--capacity-max): the search would start beyond its own limit; lower the start or raise the limit")
    return None


def _search_loads(s: StudySpec) -> str | None:
    """A capacity search chooses its loads: load axes beside it would be ignored."""
    if not s.find_capacity:
        return None
    axes = [(name, flag) for name, flag in (("concurrency", "--concurrency"), ("rates", "--request-rate"),
                                            ("users", "--users"), ("session_rates", "--session-rate"))
            if getattr(s, name)]
    if axes:
        name, flag = axes[0]
        return (f"{name} ({flag}) with find_capacity (--find-capacity): the search chooses the loads it measures, "
                f"so the {name} given would not be; drop it (capacity_start / capacity_max bound the search)")
    if s.max_concurrency and s.find_capacity != "rate":
        return (f"max_concurrency (--max-concurrency) caps request-rate cells, and a {s.find_capacity} search runs "
                "none; drop it")
    if s.stop_on_saturation:
        return ("stop_on_saturation (--stop-on-saturation) with find_capacity (--find-capacity): the search decides "
                "where to stop; drop one")
    return None


def _closed_loop(s: StudySpec) -> str | None:
    if s.max_concurrency and s.concurrency and not s.rates:
        return ("max_concurrency (--max-concurrency) with concurrency (--concurrency) and no rates: it caps "
                "request-rate cells (alone, it is one closed-loop cell), so here it says nothing; drop one")
    if s.stop_on_saturation and not s.concurrency and not s.find_capacity:
        return ("stop_on_saturation (--stop-on-saturation) stops rising concurrencies, and there is no concurrency "
                "axis (--concurrency); drop it")
    return None


def _arrivals(s: StudySpec) -> str | None:
    if s.arrival != "poisson" and not s.rates and not s.session_rates and s.find_capacity != "rate":
        return (f"arrival {s.arrival} (--arrival) shapes open-loop arrivals, and no rate is asked (--request-rate, "
                "--session-rate); drop it")
    return None


def _warmup(s: StudySpec) -> str | None:
    if s.warmup_first_prompt and s.warmup_requests == 0:
        return ("warmup_first_prompt (--warmup-first-prompt) with warmup_requests 0 (--num-warmups 0): no warmup "
                "request to send it; drop one")
    return None


def _text(s: StudySpec) -> str | None:
    if s.workload.prompt_as_text and s.api == "chat":
        return ("workload.prompt_as_text (--prompt-as-text) with api chat (--api chat): chat prompts always travel "
                "as text; drop it")
    return None
