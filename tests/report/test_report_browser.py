"""The HTML report of a stored run opens in headless Chromium: no console errors, no external requests,
and a screenshot that shows the plots (slow tier; Chromium comes from scripts/test-deps.sh)."""

from __future__ import annotations

import importlib.util
import re
import subprocess
from pathlib import Path

import pytest

from tokenbench.judge.plausibility import check_run
from tokenbench.judge.views import load_run
from tokenbench.report import render
from tokenbench.report.build import build_report

from .report_fixtures import build_accel_run, build_failed_run, build_mixed_run, build_tune_run


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


PAGE_CHECK = _load("page_check", Path(__file__).parents[2] / "scripts" / "page_check.py")
CHROMIUM, FLAGS = PAGE_CHECK.CHROMIUM, PAGE_CHECK.FLAGS
pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(CHROMIUM is None, reason="no chromium/chromium-browser binary: run "
                                 "scripts/test-deps.sh (apt-get install chromium) to enable this test")]


def _html(store, run_id, out, lang):
    run = load_run(store, run_id)
    return render.write(build_report(run, lang, check_run(run), "TEST"), out, ["html"])[0]


def _chromium(*args: str, cwd) -> subprocess.CompletedProcess:
    return subprocess.run([CHROMIUM, *FLAGS, *args], capture_output=True, text=True, timeout=120, cwd=cwd)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_html_report_in_headless_chromium(store, stored_run, tmp_path, lang):
    page = _html(store, stored_run, tmp_path, lang)
    url = page.resolve().as_uri()
    dom = _chromium("--enable-logging=stderr", "--v=0", "--dump-dom", url, cwd=tmp_path)
    assert dom.returncode == 0, dom.stderr[-2000:]
    console = [line for line in dom.stderr.splitlines() if "CONSOLE" in line]
    assert console == [], console
    assert "ERR_NAME_NOT_RESOLVED" not in dom.stderr and "Failed to load resource" not in dom.stderr
    assert dom.stdout.count("<svg") == 8 and 'id="tip"' in dom.stdout
    shot = tmp_path / f"report-{lang}.png"
    res = _chromium(f"--screenshot={shot}", "--window-size=1200,3000", url, cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-2000:]
    assert shot.is_file() and shot.stat().st_size > 100_000      # a blank page is a few KB





@pytest.mark.parametrize("lang", ["en", "zh"])
def test_report_at_1280_px_has_no_missing_glyph_and_no_cut_table(store, stored_run, tmp_path, lang):
    import os
    page = _html(store, stored_run, tmp_path, lang)
    found = PAGE_CHECK.probe(page, 1280)
    assert found["tables"] > 10 and found["checked"] > (200 if lang == "zh" else 5)
    assert found["missing"] == [], f"no glyph for {''.join(found['missing'])}: install fonts-noto-cjk"
    assert found["cut"] == [], f"tables wider than the page at 1,280 px: {found['cut']}"
    shot = Path(os.environ.get("TOKENBENCH_SHOT_DIR", tmp_path)) / f"report-1280.{lang}.png"
    PAGE_CHECK.shoot(page, shot, 1280)
    assert shot.stat().st_size > 100_000


def test_load_panels_and_the_frontier_with_intervals_at_1280_px(store, tmp_path):
    """A two-config run with closed-loop and rate cells: a concurrency panel and a rate panel, side by side
    with the page, and a frontier whose interval whiskers Chromium really draws; screenshots of both sections
    (kept in TOKENBENCH_SHOT_DIR when set)."""
    import os
    page = _html(store, build_mixed_run(store), tmp_path, "en")
    figs = PAGE_CHECK.figures(page, 1280)
    for name in ("throughput", "throughput-rate", "ttft-rate", "tpot-rate", "frontier-128-32"):
        box = figs[f"fig-{name}"]
        assert box["w"] > 600 and box["h"] > 300 and box["x"] + box["w"] <= 1280, (name, box)
    assert "concurrency (requests in flight)" in figs["fig-throughput"]["text"]
    assert "request rate (requests/s)" in figs["fig-throughput-rate"]["text"]
    assert figs["fig-throughput"]["points"] == 6 and figs["fig-throughput-rate"]["points"] == 4
    frontier = figs["fig-frontier-128-32"]
    assert frontier["iv"] >= 10 and "dominated" in frontier["text"]          # 10 points, whiskers on both axes
    out = Path(os.environ.get("TOKENBENCH_SHOT_DIR", tmp_path))
    for section, png in (("Concurrency scaling", "load-axes-1280.png"), ("Frontier", "frontier-1280.png")):
        PAGE_CHECK.shoot(page, out / png, 1280, 2400, section=section)
        assert (out / png).stat().st_size > 60_000


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("kind", ["bench", "study"])
def test_the_headline_table_is_in_the_first_viewport_at_1280_px(store, tmp_path, lang, kind):
    """Issue 39: the figures a reader came for are above the fold: in a 1,280 x 720 window, the headline
    table's header and first row are drawn whole, inside the page's width, before the contents and the first
    section; a screenshot of that window is kept (TOKENBENCH_SHOT_DIR when set)."""
    import os

    from .report_fixtures import build_bench_run, build_run
    run_id = build_bench_run(store) if kind == "bench" else build_run(store)
    page = _html(store, run_id, tmp_path, lang)
    seen = PAGE_CHECK.fold(page, 1280, 720)
    view, head, first = seen["viewport"], seen["header"], seen["first_row"]
    assert view["width"] == 1280 and 600 <= view["height"] <= 720, view
    assert head is not None and first is not None, seen
    assert 0 <= head["top"] < first["top"] < first["bottom"] <= view["height"], seen
    assert seen["table"]["right"] <= view["width"], seen                 # no part of it off to the right
    assert seen["table"]["bottom"] <= seen["contents"]["top"] < seen["first_section"]["top"], seen
    shot = Path(os.environ.get("TOKENBENCH_SHOT_DIR", tmp_path)) / f"headline-{kind}-1280.{lang}.png"
    PAGE_CHECK.shoot(page, shot, 1280, 720)
    assert shot.stat().st_size > 20_000


@pytest.mark.parametrize("lang,head", [("en", "Accelerator and host over each cell"), ("zh", "各测试点的加速卡与主机")])
def test_the_accelerator_table_in_headless_chromium(store, tmp_path, lang, head):
    """A run with accelerator samples: Chromium finds the accelerator section and its table (per cell, per
    device, the power mark where samples are missing), fitting the page at 1,280 px with every glyph."""
    page = _html(store, build_accel_run(store), tmp_path, lang)
    dom = _chromium("--dump-dom", page.resolve().as_uri(), cwd=tmp_path)
    assert dom.returncode == 0, dom.stderr[-2000:]
    found = re.search(r'<table class="accelerator">(.*?)</table>', dom.stdout, re.S)
    assert head in dom.stdout and found is not None
    rows = re.findall(r"<tr>", found.group(1))
    assert len(rows) == 1 + 3 * 3 and "◌" in found.group(1)      # header, and per cell its sum and two GPUs
    probe = PAGE_CHECK.probe(page, 1280)
    assert probe["missing"] == [] and probe["cut"] == [], probe


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize(("kind", "answer"), [
    ("tune", {"en": "Recommended: slots=4", "zh": "推荐：slots=4"}),
    ("failed", {"en": "Nothing was measured", "zh": "没有测得任何数据"}),
])
def test_a_tune_and_an_all_failed_run_open_with_their_answer_in_the_first_viewport(store, tmp_path, lang, kind, answer):
    """Issue 43: a tune's report opens with its recommendation (its confirmation, and the config whose engine
    died under load, with the cause), an all-failed run's with why nothing was measured: in a 1,280 x 720
    window the answer is drawn whole above the headline table and the first section, and an all-failed run
    shows no section of figures (every table of them would hold only dashes)."""
    import os
    run_id = build_tune_run(store) if kind == "tune" else build_failed_run(store)
    page = _html(store, run_id, tmp_path, lang)
    died = {"en": "slots=8 died under load", "zh": "slots=8 在负载下崩溃"}[lang]
    confirmed = {"en": "Confirmed on a fresh launch: slots=4", "zh": "已在重新启动的服务器上确认：slots=4"}[lang]
    needles = [answer[lang], *([died, confirmed] if kind == "tune" else [])]
    seen = PAGE_CHECK.texts(page, needles, 1280, 720)
    view = seen["viewport"]
    assert view["width"] == 1280 and 600 <= view["height"] <= 720, seen
    for needle in needles:
        box = seen["found"][needle]
        assert box is not None and 0 <= box["top"] < box["bottom"] <= view["height"], (needle, seen)
        assert box["bottom"] <= seen["table"]["top"] and box["bottom"] <= seen["first_section"]["top"], (needle, seen)
    text = page.read_text(encoding="utf-8")
    if kind == "failed":
        for heading in ("Single-request baseline", "95 % intervals", "Frontier", "单请求基线"):
            assert heading not in text
    shot = Path(os.environ.get("TOKENBENCH_SHOT_DIR", tmp_path)) / f"answer-{kind}-1280.{lang}.png"
    PAGE_CHECK.shoot(page, shot, 1280, 720)
    assert shot.stat().st_size > 20_000
