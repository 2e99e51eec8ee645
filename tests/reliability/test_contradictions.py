"""Options that contradict each other, or say nothing beside the others, are refused in one line naming them
as typed, before anything is stored; a number outside what its figure can mean is refused naming its flag.

The catalogue of pairs comes from going over every option against the others (spec/conflicts.py, the
workload's own checks, cli/run_options.said_once, peers/serve.fold); the property draws a pair, spells it in
any of its accepted spellings, puts it anywhere among options that are fine, and runs the CLI in-process
against a closed port (a pair let through would try to measure it and exit 3, not 2)."""

from __future__ import annotations

import math
import sqlite3
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tokenbench.cli import flags
from tokenbench.cli.main import main
from tokenbench.spec.fields import field_at
from tokenbench.spec.study import StudySpec

from .helpers import error_lines

URL = "http://127.0.0.1:1"
PAIR = ["--input-len", "8", "--output-len", "4"]

# (the options, what the refusal names): each list is given to `sweep` (which takes every `bench` option) beside a target, lengths and a load
PAIRS: list[tuple[list[str], tuple[str, ...]]] = [
    (["--host", "h", "--port", "9"], ("--base-url", "--host")),
    (["--server-traces", "off", "--otlp-listen", "127.0.0.1:0"], ("--otlp-listen", "--server-traces")),
    (["--price-basis", "node"], ("--price-basis", "--price-per-hour")),
    (["--duration", "2", "--num-prompts", "3"], ("--duration", "--num-prompts")),
    (["--api-key-env", "HOME", "--api-key-file", "/etc/hostname"], ("--api-key-env", "--api-key-file")),
    (["--capacity-max", "64"], ("--capacity-max", "--find-capacity")),
    (["--sustain-s", "5"], ("--sustain-s", "--find-capacity")),
    (["--slo-attainment", "0.5"], ("--slo-attainment", "--find-capacity")),
    (["--slo-tier", "mlperf-llama2-70b-server"], ("--slo-tier", "--find-capacity")),
    (["--find-capacity", "concurrency", "--slo", "ttft:p99<=100", "--capacity-start", "50", "--capacity-max", "8"],
     ("--capacity-start", "--capacity-max")),
    (["--find-capacity", "rate", "--slo", "ttft:p99<=100", "--request-rate", "2"], ("--request-rate", "--find-capacity")),
    (["--find-capacity", "concurrency", "--slo", "ttft:p99<=100", "--max-concurrency", "4"],
     ("--max-concurrency",)),
    (["--find-capacity", "concurrency", "--slo", "ttft:p99<=100", "--stop-on-saturation"],
     ("--stop-on-saturation", "--find-capacity")),
    (["--max-concurrency", "4"], ("--max-concurrency", "--concurrency")),
    (["--arrival", "constant"], ("--arrival", "--request-rate")),
    (["--num-warmups", "0", "--warmup-first-prompt"], ("--warmup-first-prompt", "--num-warmups")),
    (["--prompt-as-text", "--api", "chat"], ("--prompt-as-text", "--api")),
    (["--image-width", "64"], ("--image-width",)),
    (["--num-groups", "3"], ("--num-groups",)),
    (["--range-ratio-style", "sglang"], ("--range-ratio-style",)),
    (["--time-scale", "2"], ("time_scale",)),
    (["--turns", "3"], ("turns",)),
    (["--backend", ""], ("--backend",)),
    (["--backend", "openai-chat", "--endpoint", "/v1/completions"], ("--backend", "--endpoint")),
    (["--no-store", "--db", "x.db"], ("--no-store", "--db")),
    (["--no-store", "--resume", "20260101-000000-abcdef"], ("--no-store", "--resume")),
    (["--ignore-eos", "--no-ignore-eos"], ("--ignore-eos", "--no-ignore-eos")),
    (["--save-detailed"], ("--save-detailed", "--save-result")),
    (["--result-filename", "r.json"], ("--result-filename", "--save-result")),
    (["--metric-percentiles", "50,90"], ("--metric-percentiles", "--save-result")),
    (["--output-details"], ("--output-details", "--output-file")),
    (["--seed", "1", "--seed", "2"], ("--seed",)),
    (["--num-prompts", "3", "--num-prompts", "4"], ("--num-prompts",)),
    (["--dataset-name", "random", "--kind", "text"], ("--dataset-name", "--kind")),
    (["--tokenizer", "/nonexistent/tok"], ("--tokenizer",)),
    (["--min-input-len", "9", "--max-input-len", "4", "--random-range-ratio", "0.5"], ("min_input_len",)),
    (["--random-range-ratio", "0.5", "--input-len-stddev", "2"], ("range_ratio",)),
    (["--request-rate", "2", "--concurrency", "3"], ("--request-rate", "--concurrency")),
    (["--slo", "ttft=100", "--goodput", "ttft:500"], ("--goodput", "--slo")),
    (["--goodput", "ttft:500", "ttft:600"], ("--goodput",)),
    (["--ports", "20000-20010", "--otlp-listen", "127.0.0.1:4318"], ("--otlp-listen", "--ports")),
    (["--ports", "20000-20010", "--server-traces", "off"], ("--ports",)),
]

# spellings a user may type for the same option (each refusal must name the one typed)
SPELLINGS = {"--num-prompts": ["--num-prompts", "--num_prompts"], "--seed": ["--seed"],
             "--num-warmups": ["--num-warmups", "--warmup-requests"], "--tokenizer": ["--tokenizer", "--tokenizer-path"],
             "--duration": ["--duration", "--duration-s"], "--max-concurrency": ["--max-concurrency"]}
FINE = [[], ["--seed", "7"], ["--name", "x"], ["--temperature", "0.5"], ["--timeout", "30"], ["--no-probe"]]


def runs(db: Path) -> int:
    if not db.exists():
        return 0
    con = sqlite3.connect(db)
    try:
        return con.execute("SELECT COUNT(*) FROM runs").fetchone()[0]
    finally:
        con.close()


def refused(args: list[str], db: Path, capsys) -> str:
    code = main(["sweep", *args])
    err = capsys.readouterr().err
    assert "Traceback" not in err, err
    lines = error_lines(err)
    assert code == 2 and len(lines) == 1 and " -- " in lines[0], (args, code, err[-600:])
    assert runs(db) == 0, args
    return lines[0]


def respelled(options: list[str], choice: int) -> list[str]:
    return [SPELLINGS[w][choice % len(SPELLINGS[w])] if w in SPELLINGS else w for w in options]


@settings(max_examples=120, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.sampled_from(range(len(PAIRS))), st.sampled_from(FINE), st.integers(0, 3), st.booleans())
def test_a_contradictory_pair_is_refused_in_one_line_naming_it_and_nothing_is_stored(tmp_path_factory, capsys, i,
                                                                                     fine, spelling, first):
    db = tmp_path_factory.mktemp("db") / "r.db"
    options, names = PAIRS[i]
    typed = respelled(options, spelling)
    load = [] if any(w in options for w in ("--find-capacity", "--request-rate")) else ["--concurrency", "1"]
    own = [w for w in ("--no-store",) if w in typed]
    base = ["--base-url", URL, *PAIR, *load, *([] if "--db" in typed or own else ["--db", str(db)])]
    if "--resume" in options:                  # a resume takes no spec option (that is refused on its own)
        base, fine = [], []
    args = [*typed, *fine, *base] if first else [*base, *fine, *typed]
    line = refused(args, db, capsys)
    for name in names:
        said = respelled([name], spelling)[0]
        assert said in line or name.lstrip("-").replace("-", "_") in line, (said, line)


def numeric_flags() -> list[flags.Flag]:
    out = []
    for flag in (*flags.SHARED, *flags.SWEEP_ONLY):
        kind = flags._plain(field_at(StudySpec, flag.key).annotation)
        if kind in (int, float) and flag.parse is None:
            out.append(flag)
    return out


@pytest.mark.parametrize("flag", numeric_flags(), ids=lambda f: f.flag)
@pytest.mark.parametrize("value", ["1e308", "-1e308", "nan", "inf", "100000000000000000000000000000"])
def test_a_number_no_figure_can_mean_is_refused_naming_its_flag(flag, value, tmp_path, capsys):
    kind = flags._plain(field_at(StudySpec, flag.key).annotation)
    if kind is int and not value.lstrip("-").isdigit():
        value = "100000000000000000000000000000"       # an int flag: click refuses a float's text itself
    db = tmp_path / "r.db"
    load = [] if flag.key in ("capacity_max", "capacity_start", "capacity_precision", "capacity_budget", "sustain_s",
                              "slo_attainment") else ["--concurrency", "1"]
    search = ["--find-capacity", "--slo", "ttft:p99<=100"] if not load else []
    args = ["--base-url", URL, *PAIR, *load, *search, flag.flag, value, "--db", str(db)]
    line = refused(args, db, capsys)
    assert flag.flag in line or "Invalid value" in line, line
    assert not any(math.isinf(float(w)) for w in line.replace(",", " ").split() if _number(w)), line


def _number(word: str) -> bool:
    try:
        float(word)
    except ValueError:
        return False
    return True


@pytest.mark.parametrize("args,flag", [
    (["--concurrency", "10000000"], "--concurrency"), (["--request-rate", "1e308"], "--request-rate"),
    (["--request-rate", "2", "--max-concurrency", "100000000"], "--max-concurrency"),
    (["--concurrency", "1", "--price-per-hour", "1e308"], "--price-per-hour"),
    (["--concurrency", "1", "--slo", "ttft=1e300"], "--slo"),
])
def test_a_load_or_price_no_figure_can_mean_is_refused(args, flag, tmp_path, capsys):
    db = tmp_path / "r.db"
    line = refused(["--base-url", URL, *PAIR, *args, "--db", str(db)], db, capsys)
    assert flag in line, line


def test_a_vary_key_the_profile_lacks_names_the_option_not_a_line_of_the_built_in_file(capsys):
    code = main(["tune", "cpu-smollm2-llamacpp", "--vary", "nosuch.key=1,2", "--input-len", "8", "--output-len", "4",
                 "--slo", "ttft:p99<=1000", "--dry-run"])
    [line] = error_lines(capsys.readouterr().err)
    assert code == 2 and "--vary" in line and "nosuch.key=1" in line and ".yaml):" not in line, line
