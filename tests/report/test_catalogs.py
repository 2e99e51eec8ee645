"""The text catalogs (report/catalogs/<lang>/LC_MESSAGES/tokenbench.po): the same keys and placeholders in every
language, every key the code asks for present, every key present asked for by the code, and the catalogs read
as translators' tools read them."""

from __future__ import annotations

import ast
import re
import string
from functools import cache
from pathlib import Path
from typing import get_args, get_type_hints

import pytest
from babel.messages.catalog import Catalog
from babel.messages.pofile import read_po

from tokenbench.errors import InternalError, UsageError
from tokenbench.report import i18n, po
from tokenbench.report.i18n import LANGS, catalog, check_lang, t

SRC = Path(i18n.__file__).parents[1]          # src/tokenbench
KEY = re.compile(r"^[a-z][a-z0-9_]*(\.[a-z0-9_]+)+$")


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


# ---------------------------------------------------------------- the code's keys against the catalogs

def _families() -> dict[str, tuple[str, ...] | None]:
    """Each key family the code builds from a value (`t(lang, f"mark.{kind}")`), as the f-string reads with
    `*` for the value, and the values it can take: the catalogs must hold every member, and a member counts as
    used. None: an open family whose values come from outside (an accelerator's error codes): the code asks
    `i18n.has` first and shows nothing for a code without a text."""
    from tokenbench.judge import bottleneck, cost, fairness, frontier, gate, intervals, plausibility, status
    from tokenbench.judge import tune as judged_tune
    from tokenbench.judge.load_axes import SESSION_AXES
    from tokenbench.logs import launch
    from tokenbench.metrics import capacity, cell_summary, noise, summary_groups, tally, timeslices
    from tokenbench.report import build, compare_tables, jobs, load_plots, phases, plots, sections

    def args(*kinds) -> tuple[str, ...]:
        return tuple(v for k in kinds for v in get_args(k))

    axes = tuple(load_plots.AXES)
    return {
        "accel.src.*": ("counter", "power"),              # DeviceFigures.energy_source, split at '+'
        "acl.*": None,                                    # report/tune.meaning: the codes a launch log printed
        "axis.dim.*": axes, "dim.*": axes,
        "axis.agents.*": SESSION_AXES, "dim.agents.*": SESSION_AXES,     # a session axis whose cells are agents
        "bn.*": args(bottleneck.Kind), "ev.*": args(bottleneck.Evidence),
        "cap.dim.*": args(capacity.Dimension), "unit.*": args(capacity.Dimension),
        "cap.dim.agents.*": SESSION_AXES, "unit.agents.*": SESSION_AXES,
        "cap.per_usd.*": args(cost.Basis),
        "cap.reason.*": args(capacity.Reason), "role.*": args(capacity.Role),
        "cache.*": args(summary_groups.CacheStateName),   # report/explain.py: a side's prefix-cache states
        "cause.*": args(tally.Cause, launch.Cause),       # the client's delays (marks) and a failed launch (tune)
        "col.*": tuple(intervals.STATS) + tuple(k for k, _ in sections.SERVER_COLUMNS),
        "cost.by.*": args(cost.SplitBy), "cost.intro.*": args(cost.Basis),
        "def.*": tuple(build.DEFINITIONS) + tuple(k for k, _ in sections.SERVER_COLUMNS),
        "def.*.f": tuple(build.DEFINITIONS) + tuple(k for k, _ in sections.SERVER_COLUMNS),
        "delivery.*": args(summary_groups.BurstSource),
        "fair.*": args(fairness.Check), "fair.load.*": args(fairness.LoadDiff),
        "fig.*": args(timeslices.DriftFigure),
        "fr.missing.*": args(frontier.Missing),
        "gate.o.*": args(gate.Outcome),                   # report/gate.py: the gate's outcome
        "gate.noise.*": args(noise.NoiseSource),          # report/gate.py: where a figure's noise came from
        "mark.*": tuple(status.MARKS), "mark.name.*": tuple(status.MARKS),
        "noise.used.*": args(noise.NoiseSource),          # report/verdicts.verdict_text: a verdict's noise
        "ph.*": tuple(summary_groups.PHASES), "ph.mean.*": tuple(phases.MEANS), "ph.plot.*": ("ttft", "last"),
        "plaus.*": args(get_type_hints(plausibility.Unknown)["reason"]),
        "plaus.check.*": args(get_type_hints(plausibility.Finding)["check"]),
        "plaus.why.*": args(get_type_hints(plausibility.Finding)["check"]),
        "plaus.how.*": args(plausibility.How),
        "plot.dim.*": tuple({p.title for p in plots.LOAD_PLOTS + compare_tables.CMP_PLOTS + jobs.JOB_PLOTS}),
        "send.off.*": args(summary_groups.OffReason),
        "series.*": ("running", "waiting", "kv_usage",    # report/plots.monitor_figure
                     "ttft_mean", "ttft_p99", "tpot_mean"),    # report/slices.py
        "tune.gain_why.*": ("base_failed", "base_died", "base_not_run", "base_zero"),     # report/tune.gain_text
        "tune.confirm.*": args(judged_tune.Outcome),                          # report/tune.confirmation_text
        "tune.verdict.*": args(judged_tune.TuneVerdict),
        "vm.*": tuple(cell_summary.LATENCIES) + tuple(cell_summary.RATES) + tuple(cell_summary.JOBS),
    }


def _expand(pattern: str, values: tuple[str, ...]) -> set[str]:
    return {pattern.replace("*", v) for v in values}


def _matches(pattern: str, keys) -> set[str]:
    rx = re.compile("^" + re.escape(pattern).replace(r"\*", "[a-zA-Z0-9_]+") + "$")
    return {k for k in keys if rx.match(k)}


class _Uses:
    """What the package's code says of keys: literal strings that look like one (with where), and the
    f-strings that build one from a value (as patterns, `mark.*`)."""

    def __init__(self) -> None:
        self.literals: dict[str, list[str]] = {}
        self.patterns: dict[str, list[str]] = {}
        self.text_modules: set[str] = set()            # modules that ask for texts (import from report.i18n)

    def read(self, path: Path) -> None:
        where = str(path.relative_to(SRC))
        tree = ast.parse(path.read_text(encoding="utf-8"))
        in_fstrings = {id(v) for n in ast.walk(tree) if isinstance(n, ast.JoinedStr) for v in n.values}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module == "tokenbench.report.i18n":
                self.text_modules.add(where)
            if isinstance(node, ast.JoinedStr) and isinstance(node.values[0], ast.Constant):
                pattern = "".join(v.value if isinstance(v, ast.Constant) else "*" for v in node.values)
                if KEY.match(pattern.replace("*", "x")) and "." in str(node.values[0].value):
                    self.patterns.setdefault(pattern, []).append(f"{where}:{node.lineno}")
            elif (isinstance(node, ast.Constant) and isinstance(node.value, str) and KEY.match(node.value)
                  and id(node) not in in_fstrings):
                self.literals.setdefault(node.value, []).append(f"{where}:{node.lineno}")


@cache
def _uses() -> _Uses:
    uses = _Uses()
    for path in sorted(SRC.rglob("*.py")):
        uses.read(path)
    return uses


def test_every_key_family_the_code_builds_is_declared():
    """An f-string that builds a key (`f"mark.{kind}"`) is a family above, with the values it can take; a new
    one is declared there, so its members are checked against the catalogs rather than silently exempt."""
    keys, families = catalog("en").keys(), _families()
    undeclared = {p: w for p, w in _uses().patterns.items()
                  if p not in families and _matches(p, keys)}
    assert undeclared == {}


def test_every_key_the_code_names_is_in_the_catalogs():
    """A literal key in a module that asks for texts, and every member of every family, has its text."""
    keys, uses = catalog("en").keys(), _uses()
    spaces = {k.split(".")[0] for k in keys}
    named = {k: w for k, w in uses.literals.items() if k.split(".")[0] in spaces and k not in keys
             and any(x.split(":")[0] in uses.text_modules for x in w)}
    assert named == {}
    members = {p: sorted(_expand(p, v) - keys) for p, v in _families().items() if v is not None}
    assert {p: m for p, m in members.items() if m} == {}


def test_every_catalog_key_is_used():
    """A key no code names, literally or as a member of a family, is a text no report shows: remove it (or
    name the family it belongs to above)."""
    keys, uses = catalog("en").keys(), _uses()
    used = set(uses.literals)
    for pattern, values in _families().items():
        used |= _matches(pattern, keys) if values is None else _expand(pattern, values)
    assert sorted(keys - used) == []


def test_each_declared_family_is_built_somewhere():
    assert sorted(set(_families()) - set(_uses().patterns)) == []


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
