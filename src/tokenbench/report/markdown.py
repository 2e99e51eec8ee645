"""Markdown rendering of a report document. Figures are referenced as SVG files written next to it."""

from __future__ import annotations

from tokenbench.report.document import GRAPH_MARK, OVER_MARK, Bullets, Cell, Document, Figure, Heading, Para, Table

_ESCAPES = (("\\", "\\\\"), ("&", "&amp;"), ("<", "&lt;"), (">", "&gt;"), ("`", "\\`"), ("*", "\\*"),
            ("|", "\\|"), ("[", "\\["), ("]", "\\]"))


def esc(text) -> str:
    """Plain text -> markdown that shows exactly that text (no HTML, no emphasis, no table breaks)."""
    s = str(text)
    for a, b in _ESCAPES:
        s = s.replace(a, b)
    return s.replace("\n", " ")


def _cell(c: str | Cell) -> str:
    if isinstance(c, Cell):
        return esc(c.full) + esc(c.mark) + (OVER_MARK if c.over else "") + (GRAPH_MARK if c.eager else "")
    return esc(c)


def _table(tb: Table) -> list[str]:
    out = ["| " + " | ".join(esc(h) for h in tb.headers) + " |",
           "|" + "|".join([":---"] * tb.left + ["---:"] * (len(tb.headers) - tb.left)) + "|"]
    out += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in tb.rows]
    if tb.footnotes:
        out += [""] + [f"- {esc(n)}" for n in tb.footnotes]
    return out


def figure_file(fig: Figure, lang: str) -> str:
    return f"{fig.name}.svg" if lang == "en" else f"{fig.name}.{lang}.svg"


def render(doc: Document) -> str:
    lines = [f"# {esc(doc.title)}", ""]
    for b in doc.blocks:
        if isinstance(b, Heading):
            lines += ["#" * b.level + " " + esc(b.text), ""]
        elif isinstance(b, Para):
            lines += [esc(b.text), ""]
        elif isinstance(b, Bullets):
            lines += [f"- {esc(i)}" for i in b.items] + [""]
        elif isinstance(b, Table):
            lines += _table(b) + [""]
        elif isinstance(b, Figure):
            lines += [f"![{esc(b.title)}]({figure_file(b, doc.lang)})", ""]
    return "\n".join(lines).rstrip() + "\n"
