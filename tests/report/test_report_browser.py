"""The HTML report of a stored run opens in headless Chromium: no console errors, no external requests,
and a screenshot that shows the plots (slow tier; Chromium comes from scripts/test-deps.sh)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tokenbench.report import render
from tokenbench.report.build import build_report
from tokenbench.report.model import load_run
from tokenbench.report.plausibility import check_run

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(CHROMIUM is None, reason="no chromium/chromium-browser binary: run "
                                 "scripts/test-deps.sh (apt-get install chromium) to enable this test")]
# Any request that leaves the file fails loudly: every host name resolves to nothing.
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--host-resolver-rules=MAP * ~NOTFOUND",
         "--disable-background-networking", "--no-first-run"]


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
    assert dom.stdout.count("<svg") == 6 and 'id="tip"' in dom.stdout
    shot = tmp_path / f"report-{lang}.png"
    res = _chromium(f"--screenshot={shot}", "--window-size=1200,3000", url, cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-2000:]
    assert shot.is_file() and shot.stat().st_size > 100_000      # a blank page is a few KB


# Run inside the page: every distinct character drawn on a canvas in the page's font must differ from
# the drawing of a code point no font has (the "tofu" box); every table must fit its wrapper (no
# horizontal scrolling at this width). The result is written into the DOM for --dump-dom.
PROBE = """<script>
(function(){
  var font = '32px ' + getComputedStyle(document.body).fontFamily;
  function draw(ch){
    var c = document.createElement('canvas'); c.width = 48; c.height = 48;
    var g = c.getContext('2d'); g.font = font; g.fillStyle = '#000'; g.fillText(ch, 4, 38);
    return Array.prototype.join.call(g.getImageData(0, 0, 48, 48).data);
  }
  var tofu = draw('\\u{10FFFD}'), seen = {}, missing = [];
  Array.from(document.body.innerText).forEach(function(ch){
    if (seen[ch] || /\\s/.test(ch) || ch.charCodeAt(0) < 0x2000) return;
    seen[ch] = 1;
    if (draw(ch) === tofu) missing.push(ch);
  });
  var cut = [];
  document.querySelectorAll('.tablewrap').forEach(function(w, i){
    if (w.scrollWidth > w.clientWidth + 1) cut.push(i + ':' + w.firstChild.className + ':' + w.scrollWidth);
  });
  var out = document.createElement('pre'); out.id = 'probe';
  out.textContent = JSON.stringify({checked: Object.keys(seen).length, missing: missing, cut: cut,
                                    tables: document.querySelectorAll('.tablewrap').length});
  document.body.appendChild(out);
})();
</script>"""


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_report_at_1280_px_has_no_missing_glyph_and_no_cut_table(store, stored_run, tmp_path, lang):
    import json
    import os
    import re
    page = _html(store, stored_run, tmp_path, lang)
    probed = page.with_name(f"probed.{lang}.html")
    probed.write_text(page.read_text(encoding="utf-8").replace("</body>", PROBE + "</body>"), encoding="utf-8")
    dom = _chromium("--window-size=1280,2000", "--dump-dom", probed.resolve().as_uri(), cwd=tmp_path)
    found = json.loads(re.search(r'<pre id="probe">(.*?)</pre>', dom.stdout).group(1).replace("&quot;", '"'))
    assert found["tables"] > 10 and found["checked"] > (200 if lang == "zh" else 5)
    assert found["missing"] == [], f"no glyph for {''.join(found['missing'])}: install fonts-noto-cjk"
    assert found["cut"] == [], f"tables wider than the page at 1,280 px: {found['cut']}"
    shot = Path(os.environ.get("TOKENBENCH_SHOT_DIR", tmp_path)) / f"report-1280.{lang}.png"
    res = _chromium(f"--screenshot={shot}", "--window-size=1280,6000", "--hide-scrollbars", page.resolve().as_uri(),
                    cwd=tmp_path)
    assert res.returncode == 0 and shot.stat().st_size > 100_000
