"""FlagGems operator log (SGLANG_FLAGGEMS_RECORD=1 -> SGLANG_FLAGGEMS_LOG_PATH): which operators
FlagGems served, how many log lines each, beside the profile's blacklist and per-op routing.

The format, from FlagGems' own code (src/flag_gems/logging_utils.py, `setup_flaggems_logging`): a
`logging.FileHandler` (mode "w") with the formatter

    [%(levelname)s] %(name)s.%(funcName)s: %(message)s

fed by each operator's `logger.debug("GEMS <OP>[, details]")`. So a line reads

    [DEBUG] flag_gems.ops.mm.mm: GEMS MM
    [DEBUG] flag_gems.ops.addmm.addmm_out: GEMS ADDMM_OUT, [shape info]: [-, 8192, 3584, 5120](batch, M, N, K)
    [DEBUG] flag_gems.runtime._ascend.ops.mm.mm: GEMS_ASCEND MM        (vendor backend implementation)
    [DEBUG] flag_gems.ops.fill: GEMS FILL_SCALAR_                       (older releases: no funcName)

logger name = `flag_gems[.<backend path>].<ops|fused|modules>.<module>`, then `.<function>`. The
function name is what `flag_gems.enable(unused=[...])` excludes, i.e. what SGLANG_FL_FLAGOS_BLACKLIST
lists, so ops are keyed by it. The SGLang FlagOS plugin keeps only `flag_gems.ops*` records in this
file (its `_AtenOnlyFilter`: Layer-1 ATen replacements), and logs each call site once unless
SGLANG_FLAGGEMS_LOG_ONCE=0: with the default, a count is the number of distinct logging statements
reached, not of calls. Lines in any other format are counted as unparsed, never guessed at.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import asdict, dataclass, field

_LINE = re.compile(r"^\[(?P<level>[A-Z]+)\]\s+(?P<where>[\w.]+):\s?(?P<msg>.*)$")
_MSG = re.compile(r"^GEMS(?:_(?P<vendor>[A-Za-z0-9]+))?\s+(?P<op>[^,\[]+?)\s*(?:[,\[].*)?$")
LAYERS = ("ops", "fused", "modules")


@dataclass(frozen=True, slots=True)
class Hit:
    op: str             # FlagGems function name (what blacklists name), e.g. fill_scalar_
    layer: str          # ops (ATen replacement) | fused | modules
    module: str         # e.g. fill
    backend: str        # generic | ascend | ... (vendor-specific implementation)
    label: str          # the message's operator text, e.g. FILL_SCALAR_


@dataclass(frozen=True, slots=True, kw_only=True)
class OpCount:
    op: str
    layer: str
    module: str
    backend: str
    label: str
    lines: int
    blacklisted: bool


@dataclass(slots=True, kw_only=True)
class GemsReport:
    ops: list[OpCount]
    total_lines: int
    unparsed_lines: int
    unparsed_samples: list[str]
    blacklist: list[str]
    whitelist: list[str]
    per_op: dict[str, list[str]]
    log_once: bool | None                           # None: unknown (no profile)
    served_blacklisted: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)


def parse_line(line: str) -> Hit | None:
    """One log line -> Hit, or None when it is not a FlagGems operator record."""
    m = _LINE.match(line.strip())
    if not m or not m["where"].startswith("flag_gems."):
        return None
    parts = m["where"].split(".")
    idx = max((i for i, p in enumerate(parts) if p in LAYERS), default=None)
    if idx is None or idx + 1 >= len(parts):
        return None
    after = parts[idx + 1:]
    msg = _MSG.match(m["msg"].strip())
    label = msg["op"].strip() if msg else m["msg"].strip()
    func = after[1] if len(after) >= 2 else re.sub(r"\W+", "_", label.lower())
    backend = next((p.lstrip("_") for p in parts[1:idx] if p.startswith("_")), None)
    backend = backend or (msg["vendor"].lower() if msg and msg["vendor"] else "generic")
    return Hit(op=func, layer=parts[idx], module=after[0], backend=backend, label=label)


def split_list(value: str | None) -> list[str]:
    return [x.strip() for x in (value or "").split(",") if x.strip()]


def parse_per_op(value: str | None) -> dict[str, list[str]]:
    """SGLANG_FL_PER_OP "silu_and_mul=flagos|vendor;rms_norm=vendor" -> {op: [backend order]}."""
    out: dict[str, list[str]] = {}
    for item in (value or "").split(";"):
        op, sep, order = item.partition("=")
        kinds = [k.strip() for k in order.split("|") if k.strip()]
        if sep and op.strip() and kinds:
            out[op.strip()] = kinds
    return out


def report(text: str, env: dict[str, str] | None = None) -> GemsReport:
    """Aggregate a log; `env` is the profile's environment (blacklist, per-op routing, log-once)."""
    env = env or {}
    blacklist = split_list(env.get("SGLANG_FL_FLAGOS_BLACKLIST"))
    counts: Counter[Hit] = Counter()
    unparsed: list[str] = []
    total = 0
    for line in text.splitlines():
        if not line.strip():
            continue
        total += 1
        hit = parse_line(line)
        if hit is None:
            unparsed.append(line.strip())
        else:
            counts[hit] += 1
    banned = set(blacklist)
    ops = [OpCount(op=h.op, layer=h.layer, module=h.module, backend=h.backend, label=h.label, lines=n,
                   blacklisted=h.op in banned)
           for h, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0].op, kv[0].backend))]
    once = env.get("SGLANG_FLAGGEMS_LOG_ONCE")
    return GemsReport(ops=ops, total_lines=total, unparsed_lines=len(unparsed), unparsed_samples=unparsed[:5],
                      blacklist=blacklist, whitelist=split_list(env.get("SGLANG_FL_FLAGOS_WHITELIST")),
                      per_op=parse_per_op(env.get("SGLANG_FL_PER_OP")),
                      log_once=None if not env else (once is None or once.strip().lower() in ("1", "true", "yes")),
                      served_blacklisted=sorted({o.op for o in ops if o.blacklisted}))
