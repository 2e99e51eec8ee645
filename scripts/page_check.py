"""Check a rendered HTML page the way a reader sees it, in headless Chromium: every character has a glyph
(none drawn as the missing-glyph box) and no table is wider than the page at the given width; then take a
full-page screenshot. Used by the browser tests and for the screenshots of study reports in docs/.

    python scripts/page_check.py report/report.zh.html --width 1280 --shot report-1280.zh.png
    python scripts/page_check.py report/report.html --shot frontier.png --height 1400 --section Frontier

Prints one JSON line {"checked", "missing", "cut", "tables"}; exits 1 when a glyph is missing or a table
is cut. Needs chromium (scripts/test-deps.sh installs it and the CJK fonts)."""

from __future__ import annotations

import argparse
import html
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
# Any request that leaves the file fails loudly: every host name resolves to nothing.
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--host-resolver-rules=MAP * ~NOTFOUND",
         "--disable-background-networking", "--no-first-run"]

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


# Run inside the page: every figure's drawn box, and how many of its interval whiskers and points have a
# drawn (non-empty) box, so a test can tell that a plot and its intervals are really on screen.
FIGURES = """<script>
(function(){
  var out = {};
  document.querySelectorAll('figure').forEach(function(f){
    var r = f.getBoundingClientRect();
    function drawn(sel){ return Array.from(f.querySelectorAll(sel)).filter(function(n){
      var b = n.getBBox(); return b.width > 0 || b.height > 0; }).length; }
    out[f.id] = {x: Math.round(r.left), w: Math.round(r.width), h: Math.round(r.height),
                 iv: drawn('.iv'), points: drawn('circle, path.pt'), text: f.textContent.replace(/\\s+/g, ' ')};
  });
  var pre = document.createElement('pre'); pre.id = 'figures'; pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
})();
</script>"""


# Run inside the page: where the headline table (the report's first table) and the first section are in the
# first viewport, so a test can tell that the figures a reader came for are above the fold.
FOLD = """<script>
(function(){
  function box(n){ if (!n) return null; var r = n.getBoundingClientRect();
    return {top: Math.round(r.top), bottom: Math.round(r.bottom), left: Math.round(r.left), right: Math.round(r.right)}; }
  var t = document.querySelector('table.headline');
  var rows = t ? t.querySelectorAll('tr') : [];
  var pre = document.createElement('pre'); pre.id = 'fold';
  pre.textContent = JSON.stringify({viewport: {width: window.innerWidth, height: window.innerHeight},
    table: box(t), header: box(rows[0]), first_row: box(rows[1]), first_section: box(document.querySelector('h2')),
    contents: box(document.querySelector('nav'))});
  document.body.appendChild(pre);
})();
</script>"""


# Run inside the page: where the first block (paragraph, heading, table cell, list item) whose text contains
# each of NEEDLES is drawn, and where the headline table is, so a test can tell that a report's answer is in the
# first viewport and above its tables.
TEXTS = """<script>
(function(){
  function box(n){ if (!n) return null; var r = n.getBoundingClientRect();
    return {top: Math.round(r.top), bottom: Math.round(r.bottom), left: Math.round(r.left), right: Math.round(r.right)}; }
  var blocks = Array.from(document.body.querySelectorAll('p, h1, h2, h3, h4, li, td, th, figcaption'));
  var found = {};
  %s.forEach(function(needle){
    found[needle] = box(blocks.find(function(n){ return n.textContent.indexOf(needle) >= 0; }));
  });
  var pre = document.createElement('pre'); pre.id = 'texts';
  pre.textContent = JSON.stringify({viewport: {width: window.innerWidth, height: window.innerHeight}, found: found,
    table: box(document.querySelector('table.headline')), first_section: box(document.querySelector('h2'))});
  document.body.appendChild(pre);
})();
</script>"""


def chromium(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    if CHROMIUM is None:
        raise SystemExit("no chromium/chromium-browser binary: run scripts/test-deps.sh")
    return subprocess.run([CHROMIUM, *FLAGS, *args], capture_output=True, text=True, timeout=120, cwd=cwd)


def _run_in_page(page: Path, script: str, pre_id: str, width: int, height: int = 2000) -> dict:
    """Load `page` at `width` x `height` px with `script` added, and read back the JSON it wrote into
    <pre id=pre_id>."""
    with tempfile.TemporaryDirectory() as tmp:
        probed = page.with_name(f".probed.{page.name}")
        probed.write_text(page.read_text(encoding="utf-8").replace("</body>", script + "</body>"), encoding="utf-8")
        try:
            dom = chromium(f"--window-size={width},{height}", "--dump-dom", probed.resolve().as_uri(), cwd=Path(tmp))
        finally:
            probed.unlink()
    found = re.search(rf'<pre id="{pre_id}">(.*?)</pre>', dom.stdout, re.S)
    if found is None:
        raise SystemExit(f"chromium did not run the probe: {dom.stderr[-400:]}")
    return json.loads(html.unescape(found.group(1)))


def figures(page: Path, width: int = 1280) -> dict:
    """Per figure id: its box in the page at `width` px and how many interval whiskers and points it draws."""
    return _run_in_page(page, FIGURES, "figures", width)


def fold(page: Path, width: int = 1280, height: int = 720) -> dict:
    """Boxes (px from the viewport's top-left) of the headline table, its header row and first row, the first
    section heading and the contents, in a `width` x `height` window, and the viewport's size."""
    return _run_in_page(page, FOLD, "fold", width, height)


def texts(page: Path, needles: list[str], width: int = 1280, height: int = 720) -> dict:
    """Boxes (px from the viewport's top-left) of the first block holding each of `needles` (None: not on the
    page), of the headline table and the first section heading, in a `width` x `height` window."""
    return _run_in_page(page, TEXTS % json.dumps(needles), "texts", width, height)


def probe(page: Path, width: int = 1280) -> dict:
    """{"checked": distinct characters tested, "missing": those without a glyph, "cut": tables wider
    than the page, "tables": table count} of `page` at `width` px."""
    return _run_in_page(page, PROBE, "probe", width)


# Keep only the page's title and one section (the h2 whose text contains SECTION, up to the next h2), so a
# screenshot shows that section as the report draws it (same CSS, same width) from the top of the image.
ONLY = """<script>
(function(){
  var want = %s, keep = false, drop = [];
  Array.from(document.body.children).forEach(function(n){
    if (n.tagName === 'H2') keep = n.textContent.indexOf(want) >= 0;
    if (!keep && n.tagName !== 'H1' && n.id !== 'tip' && n.tagName !== 'SCRIPT') drop.push(n);
  });
  drop.forEach(function(n){ n.parentNode.removeChild(n); });
})();
</script>"""


def shoot(page: Path, png: Path, width: int = 1280, height: int = 6000, section: str | None = None) -> None:
    """A screenshot of `page` at `width` px; with `section`, of that section alone (see ONLY)."""
    shown = page
    if section:
        shown = page.with_name(f".section.{page.name}")
        script = ONLY % json.dumps(section)
        shown.write_text(page.read_text(encoding="utf-8").replace("</body>", script + "</body>"), encoding="utf-8")
    try:
        res = chromium(f"--screenshot={png.resolve()}", f"--window-size={width},{height}", "--hide-scrollbars",
                       shown.resolve().as_uri(), cwd=png.resolve().parent)
    finally:
        if section:
            shown.unlink()
    if res.returncode != 0 or not png.is_file():
        raise SystemExit(f"screenshot of {page} failed: {res.stderr[-400:]}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("page", type=Path)
    ap.add_argument("--width", type=int, default=1280)
    ap.add_argument("--height", type=int, default=6000, help="screenshot height in px")
    ap.add_argument("--shot", type=Path, help="write a screenshot here")
    ap.add_argument("--section", help="screenshot only the section whose heading contains this text")
    args = ap.parse_args()
    found = probe(args.page, args.width)
    print(json.dumps(found, ensure_ascii=False))
    if args.shot:
        shoot(args.page, args.shot, args.width, args.height, args.section)
    return 1 if found["missing"] or found["cut"] else 0


if __name__ == "__main__":
    sys.exit(main())
