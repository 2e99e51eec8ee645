"""Sweep specs fail before anything is deployed, naming the line and the fix."""

import pytest

from tokenbench.cli.main import main
from tokenbench.spec.loader import load_file
from tokenbench.spec.study import StudySpec
from tokenbench.study.plan import kv_demand, max_fitting_concurrency, over_capacity, plan

from .helpers import engines

GOOD = """\
name: t
target:
  profile: cpu-smollm2-llamacpp
pairs: [[16, 4], [32, 4]]
concurrency: [1, 2, 4]
vary:
  slots: [2, 4]
"""


def write(tmp_path, text):
    p = tmp_path / "spec.yaml"
    p.write_text(text)
    return str(p)


def test_plan_has_configs_times_cells(tmp_path):
    p = plan(load_file(StudySpec, write(tmp_path, GOOD)))
    assert [c.name for c in p.configs] == ["slots=2", "slots=4"]
    assert len(p.cells) == 12
    assert p.configs[0].overrides == ("parallelism.slots=2",)


@pytest.mark.parametrize("text,needle,line", [
    (GOOD.replace("concurrency:", "concurency:"), "unknown key 'concurency'", 5),
    (GOOD.replace("slots: [2, 4]", "slots: []"), "'vary.slots': this axis is empty", 7),
    (GOOD.replace("concurrency: [1, 2, 4]", "concurrency: []"), "concurrency axis is empty", 1),
    (GOOD.replace("[32, 4]", "[32, 0]"), "positive", 4),
])
def test_spec_errors_name_the_line(tmp_path, capsys, text, needle, line):
    before = engines()
    code = main(["sweep", write(tmp_path, text), "--db", str(tmp_path / "db.sqlite")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1
    assert needle in err[0] and f"spec.yaml:{line}" in err[0]
    assert engines() <= before


def test_pair_beyond_context_fails_before_deploy(tmp_path, capsys):
    text = GOOD.replace("[32, 4]", "[1000, 100]")     # 4 slots x 1024 tokens: 1100 does not fit
    code = main(["sweep", write(tmp_path, text), "--db", str(tmp_path / "db.sqlite")])
    err = capsys.readouterr().err
    assert code == 2 and "pair [1000, 100] needs 1100 tokens" in err and "slots=4" in err
    assert not (tmp_path / "db.sqlite").exists() or "runs" not in err


def test_kv_demand_and_star_marks():
    p = plan(StudySpec.model_validate({"target": {"base_url": "http://x"}, "pairs": [[16, 4]],
                                       "concurrency": [1, 2, 4, 8], "kv_capacity": 100}))
    assert [kv_demand(c) for c in p.cells] == [20, 40, 80, 160]
    assert [over_capacity(c, 100) for c in p.cells] == [False, False, False, True]
    assert max_fitting_concurrency(16, 4, 100) == 5


def test_dry_run_prints_plan_and_stars(tmp_path, capsys):
    text = "target: {base_url: 'http://127.0.0.1:1'}\npairs: [[16, 4]]\nconcurrency: [1, 8]\nkv_capacity: 100\n"
    assert main(["sweep", write(tmp_path, text), "--dry-run", "--db", str(tmp_path / "d.sqlite")]) == 0
    out = capsys.readouterr().out
    assert "2 cells" in out and "largest concurrency that fits KV 100: 5" in out
    assert out.count("*") == 1


def test_repeats_draw_fresh_prompts_from_the_next_seeds(tmp_path):
    from types import SimpleNamespace

    from tokenbench.workload.build import build_cell
    from tokenbench.workload.vocab import Vocab

    p = plan(load_file(StudySpec, write(tmp_path, GOOD + "repeats: 3\nseed: 7\n")))
    first = [c for c in p.cells if c.config.name == "slots=2" and c.key == "16:4/c=1"]
    assert [(c.repeat, c.workload.seed) for c in first] == [(0, 7), (1, 8), (2, 9)]
    target = SimpleNamespace(base_url="http://127.0.0.1:9", model="m", api_key=None, max_model_len=None, token_ids=True,
                             vocab=Vocab.with_margins(32000, "test"))
    prompts = [build_cell(target, c.workload, c.key, 0, 4).measure for c in first]
    ids = [{pr.token_ids for pr in ps} for ps in prompts]
    assert all(len(pr.token_ids) == 16 for ps in prompts for pr in ps)
    assert not (ids[0] & ids[1]) and not (ids[1] & ids[2])      # no repeat reuses a prompt


def test_a_vary_axis_named_twice_is_one_axis_and_a_value_given_twice_is_refused(tmp_path):
    """A spec file's axes: a key and its short name are one axis (their values merged, in order), so the plan
    has one config per value; a value given twice would plan one config twice, and is refused at its line."""
    merged = load_file(StudySpec, write(tmp_path, GOOD.replace("  slots: [2, 4]", "  slots: [2, 4]\n"
                                                                   "  parallelism.slots: [8]")))
    assert merged.vary == {"parallelism.slots": [2, 4, 8]}
    assert [c.name for c in plan(merged).configs] == ["slots=2", "slots=4", "slots=8"]
    with pytest.raises(Exception) as refused:
        load_file(StudySpec, write(tmp_path, GOOD.replace("[2, 4]", "[2, 4, 2]")))
    assert "parallelism.slots=2 is given twice (values 2, 4, 2): give each value once" in str(refused.value)
