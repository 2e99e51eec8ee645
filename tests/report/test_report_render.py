"""The run report: golden markdown, the `*` marks, Chinese headings, HTML safety, the CLI."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from tokenbench.cli.main import main
from tokenbench.errors import UsageError
from tokenbench.judge.plausibility import check_run
from tokenbench.judge.views import load_run
from tokenbench.report import render
from tokenbench.report.build import build_report

from .report_fixtures import EVIL, build_run

GOLDEN = Path(__file__).parent / "golden"


def _doc(store, run_id, lang="en"):
    run = load_run(store, run_id)
    return build_report(run, lang, check_run(run), "TEST")


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_markdown_matches_golden(store, stored_run, tmp_path, lang):
    paths = render.write(_doc(store, stored_run, lang), tmp_path, ["md"])
    text = paths[0].read_text(encoding="utf-8")
    golden = GOLDEN / f"report.{lang}.md"
    if os.environ.get("TOKENBENCH_UPDATE_GOLDEN") == "1":
        golden.write_text(text, encoding="utf-8")
    assert golden.exists(), "golden missing: run with TOKENBENCH_UPDATE_GOLDEN=1"
    assert text == golden.read_text(encoding="utf-8"), "report changed: TOKENBENCH_UPDATE_GOLDEN=1 to accept"
    svgs = sorted(p.name for p in tmp_path.glob("*.svg"))
    suffix = "" if lang == "en" else ".zh"
    assert f"throughput{suffix}.svg" in svgs and f"timeline{suffix}.svg" in svgs and f"monitor{suffix}.svg" in svgs


def test_markdown_has_the_study_sections(store, stored_run):
    text = render.markdown.render(_doc(store, stored_run))
    headings = re.findall(r"^## \d+\. (.+)$", text, re.M)
    assert headings == ["Single-request baseline (concurrency 1)", "Concurrency scaling", "95 % intervals",
                        "Output throughput matrix (tokens/s)", "Server-config comparison",
                        "Frontier: speed per user vs throughput per device", "Failures by kind",
                        "Per-request timeline", "Monitor timelines",     # no cell ran more than one timeslice
                        "Plausibility: decode roofline", "Environment and provenance", "Metric definitions"]
    for needle in ("b6500", "SmolLM2-135M-Instruct", "profile=cpu-smollm2", "1,024", "tokenbench version",
                   "(t(last token) - t(first token)) / (output tokens - 1)", "slots4/slots2", "timeout"):
        assert needle in text


def _sub(text: str, section: str) -> str:
    """'### N.' of the section with this title (its subsections' headings start with that)."""
    n = re.search(rf"^## (\d+)\. {re.escape(section)}$", text, re.M)
    assert n is not None, section
    return f"### {n[1]}."


def _tables(text: str, after: str) -> list[tuple[list[str], list[list[str]]]]:
    """Markdown tables under headings that start with `after` (e.g. '### 5.')."""
    out, lines, i = [], text.splitlines(), 0
    while i < len(lines):
        if lines[i].startswith(after):
            j = i + 1
            while j < len(lines) and not lines[j].startswith("|"):
                j += 1
            split = lambda row: [c.strip() for c in row.strip("|").split(" | ")]  # noqa: E731
            head, rows = split(lines[j]), []
            j += 2
            while j < len(lines) and lines[j].startswith("|"):
                rows.append(split(lines[j]))
                j += 1
            out.append((head, rows))
            i = j
        i += 1
    return out


def test_star_exactly_on_over_capacity_cells(store, stored_run):
    text = render.markdown.render(_doc(store, stored_run))
    over = {(c.config, f"{c.input_len}/{c.output_len}", f"c={c.concurrency}")
            for c in store.cells(stored_run) if c.over_capacity}
    assert over == {("slots2", "512/64", "c=2"), ("slots2", "512/64", "c=4"), ("slots4", "512/64", "c=4")}
    seen = set()
    for (head, rows), cfg in zip(_tables(text, _sub(text, "Output throughput matrix (tokens/s)")), ("slots2", "slots4"), strict=False):
        for row in rows:
            for label, value in zip(head[1:4], row[1:4], strict=False):
                starred = value.endswith("*") and not value.endswith("\\*")
                assert starred == ((cfg, row[0], label) in over), (cfg, row[0], label, value)
                if starred:
                    seen.add((cfg, row[0], label))
    assert seen == over
    for (_head, rows), (cfg, pair) in zip(_tables(text, _sub(text, "Concurrency scaling")), [(c, p) for c in ("slots2", "slots4")
                                                                    for p in ("128/32", "512/64")], strict=False):
        for row in rows:
            assert row[0].endswith("*") == ((cfg, pair, row[0].rstrip("*")) in over)
    # headline, matrix, scaling and frontier tables mark each over cell once; the config comparison marks its 3
    # metrics of each
    pairs_in_cmp = sum(1 for cfg, pair, load in over)      # every over cell has a counterpart in the other config
    unescaped = len(re.findall(r"(?<!\\)\*", text))
    assert unescaped == 4 * len(over) + 3 * pairs_in_cmp
    assert text.count("\\* KV demand (concurrency × (input + output)) exceeds") == 3     # headline, scaling, matrix


def test_no_star_footnote_without_over_capacity(store, tmp_path):
    run_id = build_run(store)
    store.db.execute("UPDATE cells SET over_capacity = 0 WHERE run_id = ?", (run_id,))
    text = render.markdown.render(_doc(store, run_id))
    assert "exceeds the server's KV capacity" not in text
    assert not re.search(r"(?<!\\)\*", text)


def test_chinese_report(store, stored_run):
    text = render.markdown.render(_doc(store, stored_run, "zh"))
    for heading in ("测试环境与来源", "合理性检查", "单请求基线（并发 1）", "并发扩展能力",
                    "不同输入输出长度下的输出吞吐（tok/s）", "服务配置对比", "失败请求（按类型）", "逐请求时间线",
                    "监控时间线", "指标定义", "首 token 延迟", "每输出 token 平均间隔"):
        assert heading in text, heading
    assert "带 \\* 的配置表示并发 ×（输入+输出）的 KV 需求超过 KV 总容量" in text
    assert "Environment and provenance" not in text


def test_monitor_section_skipped_without_samples(store):
    run_id = build_run(store, "20260102-030405-nosamp", with_samples=False)
    text = render.markdown.render(_doc(store, run_id))
    assert "Monitor timelines" not in text and "Metric definitions" in text


def test_timeline_cell_is_chosen_or_refused(store, stored_run):
    run = load_run(store, stored_run, "slots4:128:32/c=2")
    assert (run.timeline.cell.config, run.timeline.cell.key) == ("slots4", "128:32/c=2")
    assert load_run(store, stored_run, "512:64/c=1").timeline.cell.config == "slots2"
    with pytest.raises(UsageError, match="no cell 'nope'"):
        load_run(store, stored_run, "nope")


def test_html_is_self_contained_and_escapes_model_text(store, stored_run):
    doc = _doc(store, stored_run)
    page = render.html_page.render(doc)
    assert not re.search(r"""(src|href)\s*=\s*["']?\s*(https?:)?//""", page, re.I)
    assert "<link" not in page and "@import" not in page and "url(" not in page
    assert "fetch(" not in page and "XMLHttpRequest" not in page
    assert EVIL not in page and "<script>alert" not in page
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in page
    assert page.count("<script>") == 1 and page.count("<svg ") == len(doc.figures()) == 8
    assert 'xmlns="http' not in page


def test_markdown_escapes_model_text(store, stored_run):
    text = render.markdown.render(_doc(store, stored_run))
    assert "<script>" not in text and "&lt;script&gt;alert('x')&lt;/script&gt; &amp; \\| \\*bold\\*" in text


def test_report_cli_writes_files(stored_run, db_path, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["report", stored_run, "--db", str(db_path), "-o", str(out), "--lang", "zh"]) == 0
    assert (out / "report.zh.md").is_file() and (out / "report.zh.html").is_file()
    assert (out / "throughput.zh.svg").read_text().startswith("<?xml")
    assert main(["report", stored_run, "--db", str(db_path), "--format", "html"]) == 0
    assert (db_path.parent / "reports" / stored_run / "report.html").is_file()


@pytest.mark.parametrize("argv, code, message", [
    (["report", "nope"], 6, "no run 'nope'"),
    (["report", "x", "--format", "pdf"], 2, "unknown format pdf"),
])
def test_report_cli_errors_are_one_line(stored_run, db_path, capsys, argv, code, message):
    assert main([*argv, "--db", str(db_path)]) == code
    err = capsys.readouterr().err.strip()
    assert message in err and "Traceback" not in err and len(err.splitlines()) == 1


def test_report_cli_missing_database(tmp_path, capsys):
    assert main(["report", "r", "--db", str(tmp_path / "none.db")]) == 6
    assert "no results database" in capsys.readouterr().err
    assert not (tmp_path / "none.db").exists()
