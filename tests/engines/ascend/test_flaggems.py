"""FlagGems operator-log report.

Line format from FlagGems src/flag_gems/logging_utils.py (`[%(levelname)s] %(name)s.%(funcName)s:
%(message)s`) and its operators' `logger.debug("GEMS ...")` calls; the vendor line from
src/flag_gems/runtime/backend/_ascend/ops/mm.py (`GEMS_ASCEND MM`, logger flag_gems.runtime._ascend.ops.mm);
the module-only line is the format shown in FlagGems' own README. No log from a real Ascend run exists
here: the fixture is assembled from those formats (tests/engines/ascend/fixtures/gems_aten.txt).
"""

from __future__ import annotations

import json

from tokenbench.cli.main import main
from tokenbench.logs import flaggems

from .ascend_helpers import FIXTURES, STUDY_A, load

LOG = FIXTURES / "gems_aten.txt"


def test_parse_lines():
    assert flaggems.parse_line("[DEBUG] flag_gems.ops.mm.mm: GEMS MM") == flaggems.Hit("mm", "ops", "mm", "generic",
                                                                                       "MM")
    hit = flaggems.parse_line("[DEBUG] flag_gems.ops.addmm.addmm_out: GEMS ADDMM_OUT, [shape info]: "
                              "[-, 8, 4, 2](batch, M, N, K)")
    assert (hit.op, hit.label) == ("addmm_out", "ADDMM_OUT")
    hit = flaggems.parse_line("[DEBUG] flag_gems.runtime._ascend.ops.mm.mm: GEMS_ASCEND MM")
    assert (hit.op, hit.backend, hit.layer) == ("mm", "ascend", "ops")
    hit = flaggems.parse_line("[DEBUG] flag_gems.ops.fill: GEMS FILL_SCALAR_")      # no funcName (old format)
    assert (hit.op, hit.module) == ("fill_scalar_", "fill")
    hit = flaggems.parse_line("[DEBUG] flag_gems.fused.silu_and_mul.silu_and_mul: GEMS SILU_AND_MUL")
    assert hit.layer == "fused"
    for other in ("[DEBUG] vllm_fl.dispatch.ops.rms_norm: default.flagos", "INFO 05-26 starting server", "",
                  "[DEBUG] flag_gems.ops: GEMS X"):
        assert flaggems.parse_line(other) is None


def test_report_with_study_a_routing():
    rep = flaggems.report(LOG.read_text(), load(STUDY_A).env)
    counts = {(o.op, o.backend): o.lines for o in rep.ops}
    assert counts[("mm", "generic")] == 3 and counts[("mm", "ascend")] == 1
    assert counts[("silu_and_mul", "generic")] == 1
    assert rep.blacklist[:2] == ["argmax", "index_put_"] and len(rep.blacklist) == 9
    assert rep.per_op == {"silu_and_mul": ["flagos"]}
    assert rep.served_blacklisted == ["fill_scalar_"]          # the fixture has one such line on purpose
    assert rep.log_once is True                               # Study A leaves SGLANG_FLAGGEMS_LOG_ONCE unset
    assert rep.unparsed_lines == 2 and rep.total_lines == sum(o.lines for o in rep.ops) + 2
    assert rep.ops[0].op == "mm"                              # most lines first


def test_per_op_parser():
    assert flaggems.parse_per_op("silu_and_mul=flagos|vendor;rms_norm=vendor; bad ;x=") == {
        "silu_and_mul": ["flagos", "vendor"], "rms_norm": ["vendor"]}


def test_cli(capsys):
    assert main(["flaggems", str(LOG), "--profile", STUDY_A]) == 0
    out = capsys.readouterr().out
    assert "served although blacklisted" in out and "silu_and_mul -> flagos" in out
    assert main(["flaggems", str(LOG), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["profile"] is None and data["log_once"] is None and data["ops"][0]["op"] == "mm"


def test_cli_errors(tmp_path, capsys):
    assert main(["flaggems", str(tmp_path / "missing.txt")]) == 2
    assert "docker cp" in capsys.readouterr().err
    empty = tmp_path / "empty.txt"
    empty.write_text("INFO nothing here\n")
    assert main(["flaggems", str(empty)]) == 2
    assert "SGLANG_FLAGGEMS_RECORD=1" in capsys.readouterr().err
