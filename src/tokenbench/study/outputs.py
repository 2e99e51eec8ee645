"""Result files a study writes besides the database and tokenbench's own JSON result (that one is the
runner's journal, store/journal.py): vLLM-compatible result files (`--save-result`), one per cell,
each written atomically (store/outputs.py), and SGLang's JSONL (`--output-file`), a line appended per cell."""

from __future__ import annotations

from pathlib import Path

from tokenbench.load.cell import CellResult
from tokenbench.load.target import Endpoint
from tokenbench.spec.study import StudySpec
from tokenbench.spec.study_name import derived_name
from tokenbench.store import outputs
from tokenbench.store.records import dumps
from tokenbench.store.rows import CellRow
from tokenbench.study.plan import PlannedCell
from tokenbench.study.sglang_result import SglangMeta, sglang_result
from tokenbench.study.vllm_result import CellMeta, VllmOptions, result_path, vllm_result


def file_label(spec: StudySpec) -> str:
    """vLLM's --label, which starts the result file's name: the study's name when the user gave one, else
    "tokenbench" (a name made of the target and loads would repeat, with ':' and spaces, what the file's
    name says after it)."""
    return spec.name if spec.name and spec.name != derived_name(spec) else "tokenbench"


class VllmResults:
    """`--save-result`: each cell as the JSON file `vllm bench serve` would have written for it (it lists
    every request's figures, so the cells keep their records in memory)."""

    needs_records = True

    def __init__(self, spec: StudySpec, opts: VllmOptions, cells: int) -> None:
        self.spec, self.opts, self.cells = spec, opts, cells
        self.meta: CellMeta | None = None
        self.written: list[Path] = []

    def target_ready(self, endpoint: Endpoint, facts: dict) -> None:
        self.meta = CellMeta(label=file_label(self.spec), model=endpoint.model,
                             tokenizer=self.spec.workload.tokenizer_path or endpoint.model, api=self.spec.api)

    def cell_stored(self, cell: PlannedCell, row: CellRow, result: CellResult) -> None:
        assert self.meta is not None, "target_ready comes before the first cell"
        doc = vllm_result(result, self.meta, self.opts)
        path = result_path(doc, self.opts, len(self.written), self.cells)
        outputs.write_text(path, dumps(doc, indent=1), "--save-result")
        self.written.append(path)

    def finish(self, status: str) -> None:
        return None

    def locations(self) -> list[str]:
        return [f"wrote {p} (vllm bench serve format)" for p in self.written]


class SglangResults:
    """`--output-file`: each cell appended as one line of SGLang's bench_serving JSONL, as SGLang appends
    one line per run (it lists per-request figures with --output-details, so cells keep their records)."""

    needs_records = True

    def __init__(self, spec: StudySpec, path: str, details: bool, backend: str | None) -> None:
        self.path, self.lines = Path(path), 0
        api_backend = "sglang-oai-chat" if spec.api == "chat" else "sglang-oai"
        self.meta = SglangMeta(spec.name or "", backend or api_backend, spec.slo, details)

    def target_ready(self, endpoint: Endpoint, facts: dict) -> None:
        return None

    def cell_stored(self, cell: PlannedCell, row: CellRow, result: CellResult) -> None:
        outputs.append_line(self.path, dumps(sglang_result(result, self.meta)), "--output-file")
        self.lines += 1

    def finish(self, status: str) -> None:
        return None

    def locations(self) -> list[str]:
        return [f"appended {self.lines} line(s) to {self.path} (sglang.bench_serving JSONL)"] if self.lines else []
