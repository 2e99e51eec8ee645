"""`agree --explain`'s arithmetic on hand-made rounds: the difference, what each variant closes with its
95 % interval and share, the remainder against the spread, and the rotation of arms between rounds."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tokenbench.agreement.agree import Bodies, arms_of, round_order
from tokenbench.agreement.capture import Clock
from tokenbench.agreement.explain import PEER, Setting, clock_effect, explain, explain_figure, markdown, table_rows
from tokenbench.agreement.variants import DEFAULT, Variant, combined
from tokenbench.metrics.uncertainty import mean_interval, t975

TEXT = Variant("text", "prompt as text", {"workload.prompt_as_text": True})
USAGE = Variant("final-usage", "final usage only", {"target.final_usage_only": True})
BOTH = combined([TEXT, USAGE])
TPOT = ("mean TPOT ms", "mean_tpot_ms")


def rounds(**arms: list[float]) -> dict[str, list[dict]]:
    return {name.replace("_", "-"): [{"mean_tpot_ms": v} for v in vs] for name, vs in arms.items()}


def test_each_variant_closes_its_part_of_the_difference():
    """Peer 100 ms; tokenbench's default 94: 6 % short. Final usage closes 4 points of it, text 1, both 5;
    1 point is left, inside the 2 % tolerance."""
    data = rounds(peer=[100, 100, 100], default=[94, 93, 95], text=[95, 94, 96], final_usage=[98, 97, 99],
                  peer_workload=[99, 98, 100])
    e = explain_figure(data, [TEXT, USAGE, BOTH], TPOT, Setting(2, 0.02))
    assert e.peer == 100 and e.default == pytest.approx(94)
    assert e.difference.value == pytest.approx(-0.06) and e.difference.lo < -0.06 < e.difference.hi
    text, usage, both = e.closed
    assert text.closes.value == pytest.approx(-0.01) and text.share == pytest.approx(1 / 6)
    assert usage.closes.value == pytest.approx(-0.04) and usage.share == pytest.approx(4 / 6)
    assert both.closes.value == pytest.approx(-0.05) and both.value == pytest.approx(99)
    assert e.remainder.value == pytest.approx(-0.01) and e.accounted and e.verdict == "accounted (within 2%)"
    assert e.spread == pytest.approx(2 / 99)             # the peer-like arm's (100 - 98) / 99; the peer's is 0


def test_a_remainder_beyond_the_tolerance_is_accounted_only_within_the_spread():
    steady = rounds(peer=[100, 100, 100], default=[90, 90, 90])
    e = explain_figure(steady, [], TPOT, Setting(1, 0.02))
    assert e.remainder.value == pytest.approx(-0.10) and e.spread == 0 and not e.accounted
    assert e.verdict == "NOT accounted" and e.closed == ()
    noisy = rounds(peer=[80, 100, 120], default=[90, 90, 90])
    e = explain_figure(noisy, [], TPOT, Setting(1, 0.02))
    assert e.spread == pytest.approx(0.4) and e.accounted
    assert e.verdict == "within a spread of 40%: too noisy to attribute"
    e = explain_figure(rounds(peer=[96, 100, 104], default=[93, 93, 93]), [], TPOT, Setting(1, 0.02))
    assert e.spread == pytest.approx(0.08) and e.verdict == "accounted (within spread)"


def test_intervals_are_t_intervals_over_the_paired_rounds():
    data = rounds(peer=[100, 110, 90], default=[95, 106, 87])
    e = explain_figure(data, [], TPOT, Setting(1, 0.02))
    diffs = [(95 - 100) / 100, (106 - 110) / 100, (87 - 90) / 100]   # per round, over the peer's mean 100
    sd = math.sqrt(sum((d - sum(diffs) / 3) ** 2 for d in diffs) / 2)
    assert e.difference.value == pytest.approx(-0.04)
    assert e.difference.hi - e.difference.value == pytest.approx(t975(2) * sd / math.sqrt(3))
    one = mean_interval([-0.04])
    assert (one.lo, one.hi, one.df) == (-0.04, -0.04, 0)          # one round: no width claimed


def test_shares_are_left_out_for_a_difference_below_the_tolerance():
    data = rounds(peer=[100, 100], default=[99.5, 99.5], text=[100, 100])
    e = explain_figure(data, [TEXT], TPOT, Setting(1, 0.02))
    assert e.closed[0].closes.value == pytest.approx(-0.005) and e.closed[0].share is None


def test_a_figure_missing_in_any_round_is_no_figure():
    data = {PEER: [{"mean_tpot_ms": 100}, {}], DEFAULT.name: [{"mean_tpot_ms": 90}, {"mean_tpot_ms": 91}]}
    e = explain_figure(data, [], TPOT, Setting(1, 0.02))
    assert e.peer is None and e.remainder is None and e.verdict == "no figure" and not e.accounted


@given(st.lists(st.tuples(*[st.floats(50, 150)] * 3), min_size=1, max_size=6))
def test_what_all_changes_close_and_the_remainder_add_up_to_the_difference(values):
    peer, default, both = ([v[i] for v in values] for i in range(3))
    data = rounds(peer=peer, default=default, peer_workload=both)
    e = explain_figure(data, [BOTH], TPOT, Setting(1, 0.02))
    assert e.closed[0].closes.value + e.remainder.value == pytest.approx(e.difference.value, abs=1e-9)


def test_rounds_rotate_so_every_arm_runs_once_in_every_position():
    names = [PEER, "default", "text", "peer-workload"]
    orders = [round_order(names, r) for r in range(4)]
    assert orders[0] == names and orders[1] == ["default", "text", "peer-workload", PEER]
    for position in range(4):
        assert sorted(o[position] for o in orders) == sorted(names)


def test_the_arms_follow_the_capture():
    from tokenbench.agreement.agree import AgreeSpec
    bodies = Bodies([], [], [TEXT, USAGE], BOTH)
    plain = AgreeSpec(base_url="http://x", explain=False)
    assert arms_of(plain, bodies) == ([BOTH], [])                      # agree: the peer's workload only
    assert arms_of(AgreeSpec(base_url="http://x", explain=True), bodies) == ([DEFAULT, TEXT, USAGE, BOTH],
                                                                              [TEXT, USAGE, BOTH])
    assert arms_of(AgreeSpec(base_url="http://x", explain=True, variants=("text",)), bodies) == (
        [DEFAULT, TEXT, BOTH], [TEXT, BOTH])
    single = Bodies([], [], [TEXT], TEXT)
    assert arms_of(AgreeSpec(base_url="http://x", explain=True), single) == ([DEFAULT, TEXT], [TEXT])
    assert arms_of(AgreeSpec(base_url="http://x", explain=True), Bodies([], [], [], DEFAULT)) == ([DEFAULT], [])
    from tokenbench.errors import UsageError
    with pytest.raises(UsageError, match="--variants: warmup not among the differences found"):
        arms_of(AgreeSpec(base_url="http://x", explain=True, variants=("warmup",)), bodies)


def test_the_tables_show_every_arm_and_the_verdict():
    data = rounds(peer=[100, 100, 100], default=[94, 93, 95], text=[95, 94, 96], final_usage=[98, 97, 99],
                  peer_workload=[99, 98, 100])
    part = explain(data, [TEXT, USAGE, BOTH], Setting(2, 0.02))
    rows = table_rows(part, "vllm bench serve")
    labels = [r[0] for r in rows]
    assert labels == ["vllm bench serve", "tokenbench default", "difference (default - peer) / peer",
                      "closed by: prompt as text", "closed by: final usage only", "closed by: all peer-like changes",
                      "remainder (peer-like - peer) / peer", "of it, the clients' clocks (capture)",
                      "run-to-run spread", ""]
    tpot = [r[2] for r in rows]                       # FIGURES: TTFT, TPOT, ...; only TPOT is in these rounds
    assert tpot[3].startswith("-1.0% [") and tpot[3].endswith("(17% of it)") and tpot[-1] == "accounted (within 2%)"
    assert rows[0][1] == "-" and rows[-1][1] == "no figure"
    md = markdown(part, "vllm bench serve", 3)
    assert "#### concurrency 2" in md and "| mean TTFT ms | mean TPOT ms | mean ITL ms | output tok/s |" in md


def test_variants_are_checked_before_anything_runs():
    from tokenbench.agreement.agree import AgreeSpec, check_variants
    from tokenbench.errors import UsageError
    check_variants(AgreeSpec(base_url="http://x", explain=True, variants=("text", "connection")))
    with pytest.raises(UsageError, match="unknown change txt"):
        check_variants(AgreeSpec(base_url="http://x", explain=True, variants=("txt",)))
    with pytest.raises(UsageError, match="chooses the single changes of --explain"):
        check_variants(AgreeSpec(base_url="http://x", variants=("text",)))


def test_the_clients_clocks_give_their_own_remainder():
    """The peer's clock adds 4 ms to TTFT and 10 ms to E2EL, tokenbench's 1 and 1: over 64 tokens the peer's
    TPOT reads (6 - 0) / 63 ms longer, so tokenbench's remainder from the clocks alone is negative."""
    c = Clock(2, ours_ttft=1.0, theirs_ttft=4.0, ours_e2el=1.0, theirs_e2el=10.0)
    assert clock_effect(c, "mean_ttft_ms", 64, 300.0) == pytest.approx(-3 / 300)
    assert clock_effect(c, "mean_e2el_ms", 64, 5000.0) == pytest.approx(-9 / 5000)
    assert clock_effect(c, "mean_tpot_ms", 64, 75.0) == pytest.approx(-6 / 63 / 75)
    assert clock_effect(c, "mean_itl_ms", 64, 75.0) == clock_effect(c, "mean_tpot_ms", 64, 75.0)
    assert clock_effect(c, "output_throughput", 64, 12.0) is None
    assert clock_effect(Clock(2, None, 4.0, 1.0, 10.0), "mean_ttft_ms", 64, 300.0) is None
    data = rounds(peer=[75, 75], default=[74, 74])
    e = explain_figure(data, [], TPOT, Setting(2, 0.02, 64, c))
    assert e.clock == pytest.approx(-6 / 63 / 75)


def test_the_command_prints_the_capture_and_the_explanation():
    from pathlib import Path

    from rich.console import Console

    from tokenbench.agreement.agree import Agreement
    from tokenbench.agreement.capture import Difference
    from tokenbench.agreement.peers import PEERS
    from tokenbench.cli import agree as command
    rows = [Difference("min_tokens", "64", "-", Variant("no-min-tokens", "no min_tokens")),
            Difference("max_tokens", "64", "64")]
    bodies = Bodies(rows, [Difference("max_tokens", "64", "64")], [rows[0].variant], rows[0].variant)
    data = rounds(peer=[100, 100, 100], default=[94, 93, 95], text=[95, 94, 96], final_usage=[98, 97, 99],
                  peer_workload=[99, 98, 100])
    result = Agreement(peer=PEERS["vllm"], rows=[], counts={}, tolerance=0.02, out=Path("."), bodies=bodies,
                       explained=explain(data, [TEXT, USAGE, BOTH],
Setting(2, 0.02)),
                       repeat=3)
    console = Console(width=250, record=True)
    console.print(command.body_table(result))
    for t in command.explain_tables(result):
        console.print(t)
    text = console.export_text()
    assert "no min_tokens" in text and "same" in text and "concurrency 2" in text
    assert "(17% of it)" in text and "accounted (within 2%)" in text and "closed by: all peer-like changes" in text
