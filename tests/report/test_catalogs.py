"""The text catalogs (report/catalogs/<lang>/LC_MESSAGES/tokenbench.po): the same keys and placeholders in every
language, and the catalogs read as translators' tools read them."""

from __future__ import annotations

import re
import string
from functools import cache
from pathlib import Path

import pytest
from babel.messages.catalog import Catalog
from babel.messages.pofile import read_po

from tokenbench.errors import InternalError, UsageError
from tokenbench.report import i18n, po
from tokenbench.report.i18n import LANGS, catalog, check_lang, t

SRC = Path(i18n.__file__).parents[1]          # src/tokenbench


@cache
def _babel(lang: str) -> Catalog:
    with open(i18n.catalog_path(lang), "rb") as f:
        return read_po(f, locale=lang)


def _fields(text: str) -> set[tuple[str, str | None, str | None]]:
    """Each placeholder with its format spec and conversion: '{n:.1f}' and '{n}' are not the same."""
    return {(f, spec, conv) for _, f, spec, conv in string.Formatter().parse(text) if f is not None}


# ---------------------------------------------------------------- the catalogs themselves

@pytest.mark.parametrize("lang", LANGS)
def test_the_reader_gives_what_babel_reads(lang):
    """t() reads the .po with report/po.py; Babel, the translators' tooling, must read the same entries, and
    the catalog holds nothing a translator's tool would leave that t() does not honour (fuzzy, plural,
    context, obsolete entries)."""
    cat = _babel(lang)
    assert catalog(lang) == {m.id: m.string for m in cat if m.id}
    assert [m.id for m in cat if m.id and (m.fuzzy or m.pluralizable or m.context)] == []
    assert list(cat.obsolete) == []
    assert cat.locale is not None and str(cat.locale) == lang


def test_every_language_has_every_key():
    en = catalog("en")
    for lang in LANGS:
        other = catalog(lang)
        assert sorted(en.keys() - other.keys()) == [], f"missing in {lang}"
        assert sorted(other.keys() - en.keys()) == [], f"in {lang} only"


def test_every_language_has_the_english_placeholders():
    en = catalog("en")
    for lang in LANGS:
        other = catalog(lang)
        assert [k for k in en if k in other and _fields(en[k]) != _fields(other[k])] == [], lang


def test_every_english_placeholder_is_explained_to_translators():
    """Each {placeholder} of an English entry is named in the entry's translator comment (`#. {run}: ...`),
    which `pybabel update` carries into the other languages' catalogs."""
    unexplained = [(m.id, f) for m in _babel("en") if m.id for f, _, _ in _fields(m.string)
                   if not any(c.startswith(f"{{{f}}}") for c in m.auto_comments)]
    assert unexplained == []


def _words(text: str) -> int:
    """ASCII letters outside placeholders ('{other}/{base}' and 'p50 / p90' need no translation)."""
    plain = "".join(lit for lit, _, _, _ in string.Formatter().parse(text))
    return sum(ch.isascii() and ch.isalpha() for ch in plain)


def test_chinese_is_chinese():
    en, zh = catalog("en"), catalog("zh")
    assert [k for k in en if k in zh and en[k] == zh[k] and " " in en[k] and _words(en[k]) > 6] == []


def test_lookup_and_unknown_language():
    assert t("zh", "h.baseline") == "单请求基线（并发 1）"
    assert t("en", "h.scaling_pair", config="tp1", input=512, output=512) == "tp1: input 512 / output 512"
    assert i18n.has("en", "h.baseline") and not i18n.has("en", "h.no_such_text")
    with pytest.raises(UsageError, match="unknown report language 'fr'"):
        check_lang("fr")
    with pytest.raises(UsageError, match="unknown report language 'fr'"):
        t("fr", "h.baseline")


# ---------------------------------------------------------------- the reader on what a tool may write

def _po(tmp_path: Path, body: str) -> Path:
    p = tmp_path / "x.po"
    p.write_text('msgid ""\nmsgstr ""\n"Content-Type: text/plain; charset=UTF-8\\n"\n\n' + body, encoding="utf-8")
    return p


def test_reader_joins_wrapped_strings_and_unescapes(tmp_path):
    p = _po(tmp_path, '#. {a}: a thing\n#, fuzzy\nmsgid "k.one"\nmsgstr ""\n"say \\"{a}\\" "\n"then\\n\\\\ and\\t"\n\n'
                      '#~ msgid "k.old"\n#~ msgstr "gone"\n\nmsgid "k.two"\nmsgstr "二"\n')
    assert po.read(p) == {"k.one": 'say "{a}" then\n\\ and\t', "k.two": "二"}
    with open(p, "rb") as f:
        assert {m.id: m.string for m in read_po(f) if m.id} == po.read(p)


@pytest.mark.parametrize(("body", "why"), [
    ('msgid "a"\nmsgstr "1"\n\nmsgid "a"\nmsgstr "2"\n', "'a' is defined twice"),
    ('msgctxt "c"\nmsgid "a"\nmsgstr "1"\n', "'msgctxt' is not read here"),
    ('msgid "a"\nmsgid_plural "as"\nmsgstr[0] "1"\n', "'msgid_plural' is not read here"),
    ('msgid "a"\nmsgstr "1\n', "expected a quoted string"),
    ('msgid "a"\n', "an msgid without its msgstr"),
    ('msgid "a"\nmsgstr "\\q"\n', "unknown escape"),
])
def test_reader_refuses_what_it_does_not_read(tmp_path, body, why):
    with pytest.raises(InternalError, match=re.escape(why)) as e:
        po.read(_po(tmp_path, body))
    assert "x.po:" in e.value.message


def test_every_catalog_ships_as_package_data():
    """A wheel carries the files pyproject.toml's package-data names (an editable install reads the checkout):
    each language's catalog must be one of them."""
    import fnmatch
    import tomllib
    pyproject = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text(encoding="utf-8"))
    globs = pyproject["tool"]["setuptools"]["package-data"]["tokenbench"]
    files = [i18n.catalog_path(lang).relative_to(SRC).as_posix() for lang in LANGS]
    assert [f for f in files if not any(fnmatch.fnmatch(f, g) for g in globs)] == []
    assert sorted(p.name for p in i18n.CATALOGS.iterdir() if p.is_dir()) == sorted(LANGS)


def _named_values():
    """Each key the report builds from a typed value: its prefix and the Literal the value comes from."""
    from tokenbench.judge import bottleneck, fairness, frontier, plausibility
    from tokenbench.metrics import capacity, summary_groups, tally, timeslices
    return [("fig.", timeslices.DriftFigure), ("role.", capacity.Role), ("cap.reason.", capacity.Reason),
            ("cap.dim.", capacity.Dimension), ("cause.", tally.Cause), ("fair.", fairness.Check),
            ("fair.load.", fairness.LoadDiff), ("send.off.", summary_groups.OffReason),
            ("plaus.how.", plausibility.How), ("fr.missing.", frontier.Missing), ("ev.", bottleneck.Evidence)]


def test_every_value_a_report_names_has_a_key_in_both_languages():
    """A drifted sustain cell's `fig.output_tps` was missing (the key said `out_tps`) and ended the report;
    every value of each Literal a key is built from must have its text."""
    from typing import get_args
    missing = [prefix + v for prefix, kind in _named_values() for v in get_args(kind)
               if any(prefix + v not in catalog(lang) for lang in LANGS)]
    assert missing == []
