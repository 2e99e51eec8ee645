"""Every text of the reports and of the console's verdicts, in English and Chinese, from gettext catalogs.

One catalog per language, `catalogs/<lang>/LC_MESSAGES/tokenbench.po` beside this module: each msgid is a
symbolic key (`h.baseline`, `mark.failed`), each msgstr that language's text with its `{placeholders}`.
`t(lang, key, **fields)` formats one entry. A catalog is read the first time one of its texts is asked for,
so a command that prints none (`--help`) never reads one. Both catalogs have exactly the same keys and
placeholders, and every key is one the code asks for (tests/report/test_catalogs.py). Chinese wording follows
the studies in shared/seeds (首 token 延迟, 输出吞吐, 带 * 的配置 ...). docs/reports.md says how to add a
text or a language.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

from tokenbench.errors import UsageError
from tokenbench.report import po

LANGS = ("en", "zh")
DOMAIN = "tokenbench"
# gettext's locale directory; not named `locale`: no folder of the package bears a standard-library name
CATALOGS = Path(__file__).parent / "catalogs"


def catalog_path(lang: str) -> Path:
    return CATALOGS / lang / "LC_MESSAGES" / f"{DOMAIN}.po"


@cache
def catalog(lang: str) -> dict[str, str]:
    """{key: text} of one language, read once."""
    return po.read(catalog_path(check_lang(lang)))


def check_lang(lang: str) -> str:
    if lang not in LANGS:
        raise UsageError(f"unknown report language '{lang}'", f"use one of: {', '.join(LANGS)}")
    return lang


def t(lang: str, key: str, **fields) -> str:
    text = catalog(lang)[key]
    return text.format(**fields) if fields else text


def has(lang: str, key: str) -> bool:
    """Whether the catalog has a text for `key` (for keys made from data, e.g. an accelerator's error code)."""
    return key in catalog(lang)
