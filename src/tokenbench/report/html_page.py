"""A self-contained HTML report: inline CSS, inline SVG, a few lines of vanilla JS. No external requests:
nothing is loaded by src/href, so the file opens offline and from a mail attachment alike."""

from __future__ import annotations

from html import escape

from tokenbench.report.document import GRAPH_MARK, OVER_MARK, Bullets, Cell, Document, Figure, Heading, Para, Table

CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI","Noto Sans CJK SC","Noto Sans SC","Microsoft YaHei",
"PingFang SC",sans-serif;margin:2rem auto;max-width:min(1840px,96vw);padding:0 1rem;color:#1a1a1a;line-height:1.45}
h1{font-size:1.6rem;border-bottom:2px solid #333;padding-bottom:.3rem}
h2{font-size:1.3rem;margin-top:2.2rem;border-bottom:1px solid #ccc}
h3{font-size:1.05rem;margin-top:1.4rem}
.tablewrap{max-width:100%;overflow-x:auto}
table{border-collapse:collapse;margin:.6rem 0 1rem;font-size:.84rem;max-width:100%}
th,td{border:1px solid #d0d0d0;padding:.25rem .45rem;text-align:right;vertical-align:top}
td{white-space:nowrap}
th{background:#f2f4f7;white-space:normal;min-width:4.5em;max-width:14em}
th.l,td.l{text-align:left}
td.w{white-space:normal;text-align:left;min-width:12em;max-width:26em}
.iv{display:block;font-size:.74rem;color:#555;white-space:normal}
table.scaling td{white-space:normal}table.scaling th{min-width:3em}table.scaling td.w{min-width:10em}
tr:nth-child(even) td{background:#fafafa}
table.samples td:last-child{white-space:normal;text-align:left;font-family:monospace}
.over{color:#b00020;font-weight:bold}
.bad{color:#b00020;font-weight:bold;margin-left:.1rem}
td.notok{color:#777;background:#fff4f4 !important}
ul.footnotes{font-size:.82rem;color:#444;margin:-.4rem 0 1rem}
figure{margin:1rem 0;display:inline-block;max-width:100%;vertical-align:top}
svg.chart{max-width:100%;height:auto;border:1px solid #e0e0e0}
.legend.off{opacity:.35}
#tip{position:absolute;display:none;background:#222;color:#fff;padding:.25rem .45rem;border-radius:3px;
font-size:.8rem;pointer-events:none;max-width:420px;z-index:9}
nav ul{columns:2;font-size:.9rem}
@media print{body{max-width:none;margin:0;font-size:10pt}.tablewrap{overflow:visible}
table{font-size:7.5pt;page-break-inside:auto}td,th{white-space:normal;padding:.1rem .25rem}
tr{page-break-inside:avoid}figure{page-break-inside:avoid}nav,#tip{display:none}
svg.chart{border:none;max-width:100%}}
"""

JS = """
(function(){
  var tip=document.getElementById('tip');
  document.querySelectorAll('svg.chart title').forEach(function(n){n.parentNode.removeChild(n);});
  document.addEventListener('mousemove',function(e){
    var el=e.target.closest?e.target.closest('[data-tip]'):null;
    if(!el){tip.style.display='none';return;}
    tip.textContent=el.getAttribute('data-tip');
    tip.style.display='block';tip.style.left=(e.pageX+14)+'px';tip.style.top=(e.pageY+14)+'px';
  });
  document.querySelectorAll('svg.chart .legend').forEach(function(g){
    g.addEventListener('click',function(){
      var off=g.classList.toggle('off'),k=g.getAttribute('data-s');
      g.closest('svg').querySelectorAll('[data-s="'+k+'"]:not(.legend)').forEach(function(n){
        n.style.display=off?'none':'';});
    });
  });
})();
"""


def _marks(c: Cell) -> str:
    out = f'<span class="bad" title="{escape(c.why)}">{escape(c.mark)}</span>' if c.mark else ""
    out += f'<span class="over">{OVER_MARK}</span>' if c.over else ""
    return out + (f'<span class="over" title="above the captured graph sizes">{GRAPH_MARK}</span>' if c.eager else "")


WRAP_CHARS = 32      # a cell of longer text (a verdict, a bottleneck's evidence) wraps instead of widening


def _width(text: str) -> int:
    """Display width: CJK characters count twice."""
    return sum(2 if ord(ch) >= 0x2E80 else 1 for ch in text)


def _cell(c: str | Cell, tag: str, left: bool) -> str:
    text = c.text if isinstance(c, Cell) else c
    classes = (["l"] if left else []) + (["notok"] if isinstance(c, Cell) and c.mark else [])
    classes += ["w"] if tag == "td" and _width(text) > WRAP_CHARS else []
    attr = f' class="{" ".join(classes)}"' if classes else ""
    if isinstance(c, Cell):
        iv = f'<span class="iv">{escape(c.interval)}</span>' if c.interval else ""
        return f"<{tag}{attr}>{escape(c.text)}{_marks(c)}{iv}</{tag}>"
    return f"<{tag}{attr}>{escape(c)}</{tag}>"


def _table(tb: Table) -> str:
    head = "".join(_cell(h, "th", i < tb.left) for i, h in enumerate(tb.headers))
    body = "\n".join("<tr>" + "".join(_cell(c, "td", i < tb.left) for i, c in enumerate(row)) + "</tr>"
                     for row in tb.rows)
    cls = f' class="{escape(tb.role)}"' if tb.role else ""
    notes = "".join(f"<li>{escape(n)}</li>" for n in tb.footnotes)
    foot = f'\n<ul class="footnotes">{notes}</ul>' if notes else ""
    return (f'<div class="tablewrap"><table{cls}><thead><tr>{head}</tr></thead>\n<tbody>\n{body}\n</tbody>'
            f"</table></div>{foot}")


def _block(b, anchors: dict[int, str]) -> str:
    if isinstance(b, Heading):
        ident = f' id="{anchors[id(b)]}"' if id(b) in anchors else ""
        return f"<h{b.level}{ident}>{escape(b.text)}</h{b.level}>"
    if isinstance(b, Para):
        return f"<p>{escape(b.text)}</p>"
    if isinstance(b, Bullets):
        return "<ul>" + "".join(f"<li>{escape(i)}</li>" for i in b.items) + "</ul>"
    if isinstance(b, Table):
        return _table(b)
    if isinstance(b, Figure):
        return f'<figure id="fig-{escape(b.name)}">{b.svg}</figure>'
    raise TypeError(f"unknown block {type(b).__name__}")


def render(doc: Document) -> str:
    """The page: the title, the blocks before the first section (the headline), the contents, the sections."""
    sections = [b for b in doc.blocks if isinstance(b, Heading) and b.level == 2]
    anchors = {id(h): f"s{i}" for i, h in enumerate(sections, 1)}
    toc = "".join(f'<li><a href="#{anchors[id(h)]}">{escape(h.text)}</a></li>' for h in sections)
    first = next((i for i, b in enumerate(doc.blocks) if sections and b is sections[0]), len(doc.blocks))
    lead = "\n".join(_block(b, anchors) for b in doc.blocks[:first])
    body = "\n".join(_block(b, anchors) for b in doc.blocks[first:])
    return (f'<!DOCTYPE html>\n<html lang="{escape(doc.lang)}">\n<head>\n<meta charset="utf-8">\n'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">\n'
            f"<title>{escape(doc.title)}</title>\n<style>{CSS}</style>\n</head>\n<body>\n"
            f"<h1>{escape(doc.title)}</h1>\n{lead}\n<nav><ul>{toc}</ul></nav>\n{body}\n"
            f'<div id="tip"></div>\n<script>{JS}</script>\n</body>\n</html>\n')
