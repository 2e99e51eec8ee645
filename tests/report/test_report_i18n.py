"""Every heading, metric name and footnote exists in both languages, with the same placeholders."""

from __future__ import annotations

import string

import pytest

from tokenbench.errors import UsageError
from tokenbench.report.i18n import EN, ZH, check_lang, t


def _fields(text: str) -> set[str]:
    return {f for _, f, _, _ in string.Formatter().parse(text) if f}


def test_same_keys_and_placeholders():
    assert EN.keys() == ZH.keys()
    for key in EN:
        assert _fields(EN[key]) == _fields(ZH[key]), key


def _words(text: str) -> int:
    """ASCII letters outside placeholders ('{other}/{base}' and 'p50 / p90' need no translation)."""
    plain = "".join(lit for lit, _, _, _ in string.Formatter().parse(text))
    return sum(ch.isascii() and ch.isalpha() for ch in plain)


def test_chinese_is_chinese():
    assert [k for k in EN if EN[k] == ZH[k] and " " in EN[k] and _words(EN[k]) > 6] == []


def test_lookup_and_unknown_language():
    assert t("zh", "h.baseline") == "单请求基线（并发 1）"
    assert t("en", "h.scaling_pair", config="tp1", input=512, output=512) == "tp1: input 512 / output 512"
    with pytest.raises(UsageError, match="unknown report language 'fr'"):
        check_lang("fr")


def test_no_key_of_one_language_table_is_overwritten_by_another():
    """The report's tables are merged into one per language: a key two of them define would silently give
    one section the other's words (capacity's and the frontier's load dimensions once did)."""
    import itertools

    from tokenbench.report import i18n_capacity, i18n_frontier, i18n_marks, i18n_server, i18n_sessions, i18n_verdicts
    tables = [i18n_capacity, i18n_frontier, i18n_marks, i18n_server, i18n_sessions, i18n_verdicts]
    for lang in ("EN", "ZH"):
        for a, b in itertools.combinations(tables, 2):
            shared = set(getattr(a, lang)) & set(getattr(b, lang))
            assert not shared, (a.__name__, b.__name__, lang, sorted(shared))



def _named_values():
    """Each i18n key the report builds from a typed value: its prefix and the Literal the value comes from."""
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
               if prefix + v not in EN or prefix + v not in ZH]
    assert missing == []
