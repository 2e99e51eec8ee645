"""One run path (issue 25): `bench`, `sweep`, `calibrate` and `agree` run every cell as a `CellJob` through
the study's one cell entry, `study/cells.Cells.run`, the only caller of `load.cell.run_cell`; the
executor (this process, worker processes, Ray actors) is chosen once per study from its client options."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import tokenbench
from tests.workload.hf_tokenizer import make_reference_tokenizer
from tokenbench.agreement import agree
from tokenbench.agreement.peers import Cell
from tokenbench.cli.main import main
from tokenbench.load.executors import InProcess, Processes, RayActors, executor_for
from tokenbench.spec import bench as cell_spec
from tokenbench.spec.study import Client, StudySpec
from tokenbench.study.cells import Cells
from tokenbench.testing.reference_server import ReferenceConfig, ReferenceProcess

PKG = Path(tokenbench.__file__).parent


class _Callers(ast.NodeVisitor):
    """(module, innermost enclosing function) of every call of one name."""

    def __init__(self, module: str, name: str) -> None:
        self.module, self.name, self.stack, self.found = module, name, ["<module>"], set()

    def _function(self, node) -> None:
        self.stack.append(node.name)
        self.generic_visit(node)
        self.stack.pop()

    visit_FunctionDef = visit_AsyncFunctionDef = _function

    def visit_Call(self, node: ast.Call) -> None:
        if self.name in (getattr(node.func, "id", None), getattr(node.func, "attr", None)):
            self.found.add((self.module, self.stack[-1]))
        self.generic_visit(node)


def callers(name: str) -> set[tuple[str, str]]:
    out: set[tuple[str, str]] = set()
    for path in PKG.rglob("*.py"):
        visitor = _Callers(path.relative_to(PKG).as_posix(), name)
        visitor.visit(ast.parse(path.read_text(encoding="utf-8")))
        out |= visitor.found
    return out


def test_one_function_runs_cells_and_only_executors_run_phases():
    assert callers("run_cell") == {("study/cells.py", "run")}
    assert {module for module, _ in callers("run_phase")} == {"load/executors.py", "load/workers.py",
                                                              "load/ray_workers.py"}
    assert not (PKG / "load" / "bench.py").exists() and not hasattr(cell_spec, "BenchSpec")   # one spec shape


def test_the_executor_follows_the_client_options():
    assert executor_for(Client()) == InProcess()
    assert executor_for(Client(keep_raw="/r.jsonl")) == InProcess("/r.jsonl")
    assert executor_for(Client(workers=3)) == Processes(3)
    assert executor_for(Client(workers=2, ray_address="ray://h:10001")) == RayActors("ray://h:10001", 2)
    with pytest.raises(ValueError, match="--keep-raw records the raw bytes of one client process"):
        StudySpec(target={"base_url": "http://x"}, pairs=[(8, 4)], concurrency=[2],
                  client={"workers": 2, "keep_raw": "/r.jsonl"})


@pytest.fixture
def cells_run(monkeypatch) -> list[tuple[str, str, str]]:
    """(study name, cell key, status) of every cell the one entry ran: the real runner, watched."""
    seen: list[tuple[str, str, str]] = []
    real = Cells.run

    async def watched(self, launch, cell):
        row, result = await real(self, launch, cell)
        seen.append((self.ctx.plan.spec.name, row.key, row.status))
        return row, result
    monkeypatch.setattr(Cells, "run", watched)
    return seen


@pytest.mark.slow
def test_bench_sweep_calibrate_and_agree_run_their_cells_through_the_one_entry(cells_run, tmp_path):
    with ReferenceProcess(ReferenceConfig(ttft_ms=1, itl_ms=1)) as ref:
        given = ["--base-url", ref.url, "--concurrency", "1", "--num-prompts", "2", "--no-store"]
        assert main(["bench", *given, "--input-len", "8", "--output-len", "4", "--label", "b"]) == 0
        assert main(["sweep", *given, "--pairs", "8:4,16:4", "--label", "s"]) == 0
        tok = make_reference_tokenizer(tmp_path / "tok")
        summary = agree.run_tokenbench(Cell(base_url=ref.url, model="reference-model", tokenizer=str(tok), input_len=8,
                                            output_len=4, concurrency=1, num_prompts=2, seed=0), tmp_path)
    assert main(["calibrate", "--concurrency", "1", "--output-len", "4", "--ttft-ms", "1", "--itl-ms", "1"]) == 0
    assert cells_run == [("b", "8:4/c=1", "ok"), ("s", "8:4/c=1", "ok"), ("s", "16:4/c=1", "ok"),
                         ("agree-default", "8:4/c=1", "ok"), ("calibrate", "32:4/c=1", "ok")]
    assert summary["completed"] == 2 and (tmp_path / "tokenbench-default-c1-r1.json").is_file()
