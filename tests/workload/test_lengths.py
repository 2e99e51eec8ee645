"""Length distributions (workload/lengths.py): each request's own exact lengths, drawn seeded from vLLM's
or SGLang's range-ratio window, AIPerf's normal draws or a histogram; the cell states the distribution."""

from __future__ import annotations

import random
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokenbench.errors import UsageError
from tokenbench.spec.bench import Workload
from tokenbench.workload.build import build_cell
from tokenbench.workload.lengths import Draws, buckets_of, length_stats, parse_buckets, sglang_window, vllm_window
from tokenbench.workload.vocab import Vocab


def wl(**kw) -> Workload:
    return Workload(**{"input_len": 100, "output_len": 20, **kw})


def test_windows_are_each_tools_own():
    assert vllm_window(100, 0.5) == (50, 150) and vllm_window(300, 0.2) == (240, 360)
    assert vllm_window(3, 0.9) == (1, 6)                        # floor 1
    assert sglang_window(1024, 0.5) == (512, 1024) and sglang_window(256, 0.0) == (1, 256)
    assert sglang_window(128, 1.0) == (128, 128)                # SGLang's 1: exact


@settings(max_examples=60, deadline=None)
@given(length=st.integers(1, 5000), ratio=st.floats(0, 0.99), seed=st.integers(0, 2**32))
def test_vllm_draws_stay_in_the_window_and_repeat_with_the_seed(length, ratio, seed):
    draws = Draws.of(wl(input_len=length, output_len=length, range_ratio=ratio))
    got = list(draws.stream(random.Random(seed), 50))
    lo, hi = vllm_window(length, ratio)
    assert all(lo <= i <= hi and lo <= o <= hi for i, o in got)
    assert got == list(draws.stream(random.Random(seed), 50))


def test_sglang_ratio_zero_draws_from_one_to_l_and_reaches_both_ends():
    draws = Draws.of(wl(input_len=8, output_len=4, range_ratio=0.0, range_ratio_style="sglang"))
    got = list(draws.stream(random.Random(1), 400))
    assert {i for i, _ in got} == set(range(1, 9)) and {o for _, o in got} == set(range(1, 5))


def test_normal_draws_center_on_the_asked_length_and_stay_positive():
    draws = Draws.of(wl(input_len=150, output_len=5, input_len_stddev=30, output_len_stddev=10))
    got = list(draws.stream(random.Random(2), 4000))
    mean = sum(i for i, _ in got) / len(got)
    assert abs(mean - 150) < 3 and min(o for _, o in got) >= 1
    assert len({i for i, _ in got}) > 50


def test_a_prefix_keeps_its_prefix_and_draws_the_suffix():
    draws = Draws.of(Workload(kind="prefix", prefix_len=1080, input_len=1800, output_len=20, range_ratio=0.5))
    got = list(draws.stream(random.Random(3), 300))
    assert all(1080 + 360 <= i <= 1080 + 1080 for i, _ in got)       # 1080 shared + U{360..1080}
    assert "1080 shared + uniform 360..1080" in draws.describe()


def test_aiperf_sequence_distribution_and_a_csv_histogram(tmp_path):
    text = "64|10,32|8:70;256|40,128|20:20;1024|100,512|50:10"
    b = parse_buckets(text)
    assert [(x.input_len, x.input_stddev, x.output_len, x.output_stddev, x.weight) for x in b] == [
        (64, 10, 32, 8, 70), (256, 40, 128, 20, 20), (1024, 100, 512, 50, 10)]
    f = tmp_path / "h.csv"
    f.write_text("input_len,output_len,weight\n# two buckets\n128,64,1\n512,128,3\n")
    assert [(x.input_len, x.output_len, x.weight) for x in buckets_of(str(f))] == [(128, 64, 1), (512, 128, 3)]
    got = list(Draws.of(Workload(length_histogram=str(f))).stream(random.Random(4), 2000))
    assert set(got) == {(128, 64), (512, 128)}
    share = sum(1 for g in got if g == (512, 128)) / len(got)
    assert 0.7 < share < 0.8                                          # weight 3 of 4


@pytest.mark.parametrize("text,needle", [("64,32", "not ISL,OSL:WEIGHT"), ("64,x:1", "not LENGTH"),
                                         ("64,32:-1", "weight"), ("64,32:0", "no bucket"),
                                         ("nothere.csv", "no such file")])
def test_bad_histograms_are_one_line_errors(text, needle):
    with pytest.raises(UsageError, match=needle):
        buckets_of(text)


def test_length_stats_in_one_pass():
    assert length_stats(iter([(1, 10), (3, 30)])) == {"input_len_mean": 2, "input_len_min": 1, "input_len_max": 3,
                                                      "output_len_mean": 20, "output_len_min": 10, "output_len_max": 30}
    assert length_stats(iter([])) == {}


class _Target(SimpleNamespace):
    base_url, model, api_key, max_model_len, token_ids = "http://127.0.0.1:1", "m", None, None, True
    vocab = Vocab.with_margins(32000, "test")


def test_each_prompt_carries_its_own_drawn_lengths_and_the_cell_states_the_distribution():
    """Completions token ids: exact by construction, so no server is needed to build the cell."""
    w = wl(input_len=64, output_len=16, range_ratio=0.5)
    cell = build_cell(_Target(), w, "k", 2, 40)
    prompts = list(cell.measure)
    assert all(len(p.token_ids) == p.input_len == p.expected_prompt_tokens for p in prompts)
    assert len({p.input_len for p in prompts}) > 5 and all(8 <= p.output_len <= 24 for p in prompts)
    assert cell.facts.length_distribution == "vLLM range ratio 0.5: input uniform 32..96, output uniform 8..24"
    assert cell.facts.input_len_mean == sum(p.input_len for p in prompts) / 40
    assert cell.nominal_lengths(w) == (64, 16)                       # the asked pair, the distribution's centre
    again = [p.input_len for p in build_cell(_Target(), w, "k", 2, 40).measure]
    assert again == [p.input_len for p in prompts]                   # seeded


def test_a_histogram_workload_states_the_mean_lengths_it_drew():
    w = Workload(length_histogram="10,5:1;30,15:1")
    cell = build_cell(_Target(), w, "k", 0, 100)
    prompts = list(cell.measure)
    assert {(p.input_len, p.output_len) for p in prompts} == {(10, 5), (30, 15)}
    mean = sum(p.input_len for p in prompts) / 100
    assert cell.nominal_lengths(w) == (round(mean), round(sum(p.output_len for p in prompts) / 100))


def test_text_is_a_fixed_length_kind_that_draws_like_random():
    """A length distribution applies to text as to random (workload/lengths.py): its key says so."""
    assert wl(kind="text", range_ratio=0.5).label == "text:100:20(r0.5)"
    assert not wl(kind="text", input_len_stddev=4).fixed_lengths
    assert Workload(kind="text", length_histogram="10,5:1").label == "text:hist=10,5:1"
    assert Workload(length_histogram="10,5:1").label == "hist=10,5:1"
    with pytest.raises(ValueError, match="applies to random and text workloads"):
        Workload(kind="prefix", prefix_len=4, length_histogram="10,5:1")


@pytest.mark.parametrize("kw,needle", [
    ({"range_ratio": 1.0}, "must be below 1 with vLLM's window"),
    ({"range_ratio": 0.5, "input_len_stddev": 3}, "one length distribution"),
    ({"kind": "sharegpt", "dataset_path": "x", "input_len": None, "input_len_stddev": 3}, "not sharegpt"),
])
def test_distribution_misuse_is_refused(kw, needle):
    with pytest.raises(ValueError, match=needle):
        wl(**kw)


def test_bounds_clip_a_normal_draw_or_alone_draw_uniformly():
    """GuideLLM's prompt_tokens_stdev with _min/_max (clipped normal), and _min/_max alone (uniform)."""
    clipped = Draws.of(wl(input_len=512, output_len=256, input_len_stddev=128, output_len_stddev=64,
                          min_input_len=256, max_input_len=1024, min_output_len=128, max_output_len=512))
    got = list(clipped.stream(random.Random(5), 3000))
    assert min(i for i, _ in got) == 256 and max(i for i, _ in got) <= 1024 and min(o for _, o in got) == 128
    uniform = Draws.of(wl(input_len=100, output_len=20, min_input_len=90, max_input_len=110, min_output_len=5,
                          max_output_len=6))
    got = list(uniform.stream(random.Random(6), 2000))
    assert {i for i, _ in got} == set(range(90, 111)) and {o for _, o in got} == {5, 6}
    assert uniform.describe() == "input uniform 90..110, output uniform 5..6"
    assert wl(min_input_len=90, max_input_len=110).draws == "in90..110"
    with pytest.raises(ValueError, match="give both"):
        wl(min_input_len=90)
    with pytest.raises(ValueError, match="does not apply to a length histogram"):
        Workload(length_histogram="1,1:1", min_input_len=1)
