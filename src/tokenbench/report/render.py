"""Write a report document to disk: markdown with SVG files next to it, and/or one HTML file."""

from __future__ import annotations

from pathlib import Path

from tokenbench.errors import UsageError
from tokenbench.report import html_page, markdown
from tokenbench.report.document import Document
from tokenbench.report.svg import standalone
from tokenbench.store import outputs

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
    if out.is_symlink() or (out.exists() and not out.is_dir()):
        raise UsageError(f"-o {out} is not a directory", "give -o a directory (it is created when missing)")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot create output directory {out}: {exc.strerror}", "choose another -o DIR") from None
    suffix = "" if doc.lang == "en" else f".{doc.lang}"
    paths = []
    if "md" in formats:
        for fig in doc.figures():
            outputs.write_text(out / markdown.figure_file(fig, doc.lang), standalone(fig.svg), "-o")
        paths.append(out / f"{stem}{suffix}.md")
        outputs.write_text(paths[-1], markdown.render(doc), "-o")
    if "html" in formats:
        paths.append(out / f"{stem}{suffix}.html")
        outputs.write_text(paths[-1], html_page.render(doc), "-o")
    return paths
