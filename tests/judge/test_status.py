"""judge/status.py: a stored cell's state from its status, message and summary, in the order the rules are
checked (a failed cell's kind from its message, mismatches counted against what was sent, a tolerated lag, the
speculative server's `§`), a figure's own state within an ok cell (sparse power, a moved figure with its cause),
the mark each state shows, and which states a verdict may use."""

from __future__ import annotations

import pytest

from tokenbench.judge import status as s
from tokenbench.metrics.cell_summary import CellSummary
from tokenbench.metrics.summary_groups import FigureHealth, FigureMark, MonitorFigures, ServerCounters

EMPTY = CellSummary()


@pytest.mark.parametrize(("message", "kind"), [
    ("3/10 requests had the wrong length: the server stopped", "length"),
    ("4/10 requests failed (timeout=4)", "errors"),
    ("server died during the cell: exit 1", "failed"),
    ("", "failed")])
def test_a_failed_cell_is_kinded_by_its_message(message, kind):
    got = s.judge("failed", message, EMPTY)
    assert got.kind == kind and got.reason == message and not got.ok and got.mark == "✗"


@pytest.mark.parametrize("status", ["invalid", "skipped", "interrupted"])
def test_a_cell_not_measured_in_full_keeps_its_status_as_its_kind(status):
    got = s.judge(status, "why\n  not", EMPTY)
    assert got == s.State(status, "why not") and got.mark == s.MARKS[status]


def test_an_unknown_status_says_which():
    got = s.judge("weird", "msg", EMPTY)
    assert got == s.State("unknown", "status 'weird': msg") and got.mark == "?"


def test_a_reason_is_one_line_of_at_most_200_characters():
    assert s.REASON_CHARS == 200
    assert s.judge("failed", "a  b\n\tc", EMPTY).reason == "a b c"
    exact = "x" * 200
    assert s.judge("failed", exact, EMPTY).reason == exact
    long = s.judge("failed", "y" * 201, EMPTY).reason
    assert long == "y" * 199 + "…" and len(long) == 200


def test_an_ok_cell_with_mismatches_counts_them_against_the_prompts_sent_else_the_completed():
    got = s.judge("ok", "", CellSummary(length_mismatches=3, num_prompts=10, completed=9))
    assert got == s.State("mismatch", "3/10") and got.mark == "≠" and not got.ok
    assert s.judge("ok", "", CellSummary(length_mismatches=2, completed=9)).reason == "2/9"
    assert s.judge("ok", "", CellSummary(length_mismatches=1)).reason == "1/?"


def test_an_ok_cell_then_a_tolerated_lag_then_random_prompts_to_a_speculative_server():
    lag = CellSummary(client_lag_tolerated="p99 loop lag 30 ms")
    assert s.judge("ok", "", lag) == s.State("lagged", "p99 loop lag 30 ms")
    spec = CellSummary().with_(ServerCounters(spec_random_prompts="random prompts: acceptance is not text's"))
    assert s.judge("ok", "", spec) == s.State("spec_random", "random prompts: acceptance is not text's")
    both = spec.model_copy(update={"length_mismatches": 1, "num_prompts": 4})
    assert s.judge("ok", "", both).kind == "mismatch"
    assert s.judge("ok", "", spec.model_copy(update={"client_lag_tolerated": "x"})).kind == "lagged"
    assert s.judge("ok", "", CellSummary().with_(ServerCounters())) == s.State("ok")
    assert s.judge("ok", "anything", EMPTY) == s.State(s.OK) and s.judge("ok", "", EMPTY).mark == ""


POWER = "monitor_accel_power_mean_w"


def _figures(sparse: bool, moved: str | None = None) -> CellSummary:
    mon = MonitorFigures(accel_coverage_pct=10.0 if sparse else 100.0, interval_s=1.0, accel_max_gap_s=0.5)
    marks = {moved: FigureMark(cause="host_contention", bound=5.0, tolerance=1.0)} if moved else None
    return CellSummary().with_(mon, FigureHealth(client_marks=marks))


def test_a_figures_state_is_the_cells_when_the_cell_is_not_ok():
    bad = s.State("failed", "died")
    assert s.figure_state(bad, _figures(True, POWER), POWER) is bad


def test_power_figures_are_sparse_where_the_samples_do_not_cover_the_window():
    assert POWER in s.POWER_KEYS
    assert s.figure_state(s.State(s.OK), _figures(True), POWER) == s.State("sparse")
    assert s.figure_state(s.State(s.OK), _figures(False), POWER) == s.State(s.OK)
    assert s.figure_state(s.State(s.OK), _figures(True), "mean_ttft_ms") == s.State(s.OK)
    assert s.figure_state(s.State(s.OK), EMPTY, POWER) == s.State(s.OK)


def test_a_marked_figure_is_moved_with_its_cause_and_the_others_stay_clean():
    summary = _figures(False, "p99_itl_ms")
    assert s.figure_state(s.State(s.OK), summary, "p99_itl_ms") == s.State("moved", "host_contention")
    assert s.figure_state(s.State(s.OK), summary, "mean_itl_ms") == s.State(s.OK)
    assert s.figure_state(s.State(s.OK), EMPTY, "p99_itl_ms") == s.State(s.OK)
    lagged = s.State("lagged", "x")
    assert s.figure_state(lagged, summary, "p99_itl_ms") is lagged


@pytest.mark.parametrize("kind", [*s.MARKS])
def test_only_ok_and_an_allowed_moved_figure_are_usable(kind):
    state = s.State(kind)
    assert not s.usable(state)
    assert s.usable(state, allow_client_lag=True) == (kind == "moved")
    assert state.mark == s.MARKS[kind] and not state.ok
    assert s.usable(s.State(s.OK)) and s.usable(s.State(s.OK), True)


def test_the_marks():
    assert s.MARKS == {"failed": "✗", "errors": "✗", "length": "✗", "invalid": "‡", "mismatch": "≠", "moved": "~",
                       "lagged": "~", "spec_random": "§", "sparse": "◌", "skipped": "–", "interrupted": "‖",
                       "unknown": "?"}
