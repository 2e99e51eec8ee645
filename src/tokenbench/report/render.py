"""Write a report document to disk: markdown with SVG files next to it, and/or one HTML file."""

from __future__ import annotations

from pathlib import Path

from tokenbench.errors import UsageError
from tokenbench.report import html_page, markdown
from tokenbench.report.document import Document
from tokenbench.report.svg import standalone

FORMATS = ("md", "html")


def parse_formats(text: str) -> list[str]:
    out = [f.strip().lower() for f in text.split(",") if f.strip()]
    bad = [f for f in out if f not in FORMATS]
    if bad or not out:
        raise UsageError(f"--format '{text}': unknown format {', '.join(bad) or '(none)'}",
                         "use md, html or md,html")
    return out


def write(doc: Document, out_dir: str | Path, formats: list[str], stem: str = "report") -> list[Path]:
    out = Path(out_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot create output directory {out}: {exc.strerror}", "choose another -o DIR") from None
    suffix = "" if doc.lang == "en" else f".{doc.lang}"
    paths = []
    if "md" in formats:
        for fig in doc.figures():
            (out / markdown.figure_file(fig, doc.lang)).write_text(standalone(fig.svg), encoding="utf-8")
        paths.append(out / f"{stem}{suffix}.md")
        paths[-1].write_text(markdown.render(doc), encoding="utf-8")
    if "html" in formats:
        paths.append(out / f"{stem}{suffix}.html")
        paths[-1].write_text(html_page.render(doc), encoding="utf-8")
    return paths
