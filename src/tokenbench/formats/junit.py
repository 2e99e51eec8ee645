"""The regression gate as JUnit XML (what CI systems show as test results): one testsuite, one testcase per
cell and figure; a regressed figure is a failure, an undecided or refused one is skipped with its reason,
every other passes. Each testcase carries the change, its interval and the noise it was judged with."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from tokenbench.judge.gate import FigureResult, GateResult


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:+.1f} %"


def _value(v: float | str | None) -> str:
    """A reason's value: a CPU share in % of one core, or a prefix-cache state."""
    return f"{v:.0f} %" if isinstance(v, int | float) else str(v or "-")


def describe(f: FigureResult) -> str:
    """One line: the verdict, the change with its interval, the smallest change it could have seen."""
    if f.decision == "refused":
        r = next((x for x in f.reasons if x.refuses), None)
        values = "" if r is None else f": baseline {_value(r.a)}; candidate {_value(r.b)}"
        return f"refused ({f.why}){values}"
    noise = f"; noise {f.noise.source} tau {100 * f.noise.tau:.1f} % df {f.noise.df:g}" if f.noise else ""
    return (f"{f.decision}: {_pct(f.change)} [{_pct(f.lo)}, {_pct(f.hi)}], Holm p {f.p_holm:.3g}, "
            f"smallest detectable {_pct(f.detectable)}{noise}; runs {len(f.base)} vs {len(f.cand)} "
            f"(launches {f.units[0]} vs {f.units[1]})")


def _case(f: FigureResult) -> ET.Element:
    name = f"{f.metric.name} {f.metric.stat}" if f.metric.name in ("ttft", "tpot", "itl", "e2el") else f.metric.name
    case = ET.Element("testcase", classname=f"tokenbench.gate.{f.cell}", name=name)
    text = describe(f)
    if f.decision == "regressed":
        ET.SubElement(case, "failure", message=text, type="regressed").text = text
    elif f.decision in ("inconclusive", "refused"):
        ET.SubElement(case, "skipped", message=text)
    else:
        ET.SubElement(case, "system-out").text = text
    return case


def junit_xml(result: GateResult) -> str:
    """The XML document (UTF-8, with its declaration)."""
    suite = ET.Element("testsuite", name="tokenbench gate", tests=str(len(result.figures)),
                       failures=str(result.count("regressed")), errors="0",
                       skipped=str(result.count("inconclusive") + result.count("refused")))
    props = ET.SubElement(suite, "properties")
    for k, v in (("outcome", result.outcome), ("alpha", f"{result.policy.alpha:g}"),
                 ("alpha_this_look", f"{result.alpha_look:.6g}"), ("look", str(result.look.number)),
                 ("min_effect", f"{result.policy.min_effect:g}"), ("baseline", " ".join(result.base_runs)),
                 ("candidate", " ".join(result.cand_runs))):
        ET.SubElement(props, "property", name=k, value=v)
    suite.extend(_case(f) for f in result.figures)
    ET.indent(suite)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suite, encoding="unicode") + "\n"
