"""Every command line of the four tools' documentation in tests/peers/peer_lines.yaml, translated: it
becomes exactly the cells its own tool would have measured (load, requests or duration, lengths or their
distribution, API, warmup), or it is refused in one line with the reason. The expected cells in the YAML
are derived from each tool's semantics (docs/peers.md), not from tokenbench's output."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from tokenbench.cli import bench
from tokenbench.errors import UsageError
from tokenbench.peers.translate import translate, words_of
from tokenbench.spec.bench import Load, Workload
from tokenbench.spec.study import StudySpec
from tokenbench.study.plan import plan

LINES: dict[str, dict] = yaml.safe_load((Path(__file__).parent / "peer_lines.yaml").read_text())
DEFAULTS = {"kind": "random", "input": None, "output": None, "prefix": None, "groups": 1, "ratio": None,
            "style": "vllm", "sd_in": None, "sd_out": None, "hist": None, "dataset": None, "requests": None,
            "duration": None, "time_scale": 1.0}


def spec_of(args: list[str]) -> StudySpec:
    return bench.build_spec(bench.command.make_context("bench", list(args)).params)


def load_text(load: Load) -> str:
    if load.concurrency is not None:
        return f"c={load.concurrency}"
    if load.arrival == "trace":
        return "replay"
    cap = f",cap={load.max_concurrency}" if load.max_concurrency else ""
    return f"rate={load.request_rate:g}{cap}" + (",gate" if load.rate_cap == "gate" else "")


def cell_of(wl: Workload, load: Load) -> dict:
    out = {"load": load_text(load), "requests": load.num_prompts, "duration": load.duration_s,
           "warmup": load.warmup_requests, "api": wl.api, "kind": wl.kind, "input": wl.input_len,
           "output": wl.output_len, "prefix": wl.prefix_len, "groups": wl.num_groups, "ratio": wl.range_ratio,
           "style": wl.range_ratio_style, "sd_in": wl.input_len_stddev, "sd_out": wl.output_len_stddev,
           "hist": wl.length_histogram, "dataset": wl.dataset_path, "time_scale": wl.time_scale}
    if load.request_rate is not None:
        out["arrival"] = load.arrival
    return out


def expected(entry: dict, got: dict) -> dict:
    want = {**DEFAULTS, **({"arrival": "poisson"} if entry["load"].startswith("rate") else {}), **entry}
    if want["output"] is None and want["kind"] in ("random", "prefix") and not want["hist"]:
        assert isinstance(got["output"], int) and got["output"] > 0     # the tool asks none: an exact one is chosen
        want["output"] = got["output"]
    return want


def translated(name: str) -> tuple[StudySpec, list[dict]]:
    eq = translate([LINES[name]["line"]])
    spec = spec_of(eq.argv()[1:])
    return spec, [cell_of(c.workload, c.load) for c in plan(spec).cells]


@pytest.mark.parametrize("name", [n for n in LINES if "refused" not in LINES[n]])
def test_each_line_becomes_the_cells_its_tool_measures(name):
    entry = LINES[name]
    spec, got = translated(name)
    assert spec.target.base_url == entry["url"]
    assert got == [expected(want, cell) for want, cell in zip(entry["cells"], got, strict=True)]
    assert spec.slo.model_dump(exclude_none=True) == entry.get("slo", {})
    assert spec.sampling.model_dump(exclude_none=True) == {"temperature": 0.0, **entry.get("sampling", {})}


@pytest.mark.parametrize("name", [n for n in LINES if "refused" in LINES[n]])
def test_a_line_without_tokenbench_meaning_is_refused_in_one_line(name):
    with pytest.raises(UsageError, match=re.escape(LINES[name]["refused"])) as caught:
        translate([LINES[name]["line"]])
    assert "\n" not in caught.value.one_line() and caught.value.exit_code == 2


@pytest.mark.parametrize("name", [n for n in LINES if "sweep" in LINES[n]])
def test_guidellm_sweep_interpolates_its_rates_between_the_two_measured_ones(name):
    eq = translate([LINES[name]["line"]])
    assert eq.sweep is not None and (eq.sweep.count, eq.sweep.arrival) == tuple(LINES[name]["sweep"].values())
    second = eq.second(2.0, 10.0)
    spec = spec_of(second[1:])
    rates = [c.load.request_rate for c in plan(spec).cells]
    assert rates == [2.0 + 8.0 * k / eq.sweep.count for k in range(1, eq.sweep.count + 1)]   # linspace(2, 10)[1:]
    assert {c.load.max_concurrency for c in plan(spec).cells} == {512}
    assert {c.load.arrival for c in plan(spec).cells} == {eq.sweep.arrival}


@pytest.mark.parametrize("name", [n for n in LINES if LINES[n].get("direct")])
def test_vllm_and_sglang_lines_run_unchanged_with_the_same_cells(name):
    """The line's own flags given to `tokenbench bench`: the same cells (warmup is tokenbench's default)."""
    words = words_of([LINES[name]["line"]])
    flags = words[words.index(next(w for w in words if w.startswith("--"))):]
    spec = spec_of(flags)
    got = [cell_of(c.workload, c.load) for c in plan(spec).cells]
    want = [{**expected(w, g), "warmup": None} for w, g in zip(LINES[name]["cells"], got, strict=True)]
    assert got == want and spec.target.base_url == LINES[name]["url"]


def test_every_difference_is_one_line_and_the_count_is_stated():
    done = [n for n in LINES if "refused" not in LINES[n]]
    for name in done:
        eq = translate([LINES[name]["line"]])
        assert all(d and "\n" not in d for d in eq.differences), name
    assert len(LINES) == 69 and len(done) == 54
