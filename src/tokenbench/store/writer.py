"""Write a bench run as it happens: the database (one transaction per cell) and a JSON result file
rewritten after every cell, so an interruption keeps everything already measured."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path

from tokenbench import __version__
from tokenbench.load.cell import CellResult
from tokenbench.load.target import ResolvedTarget
from tokenbench.spec.bench import BenchSpec
from tokenbench.store import environment
from tokenbench.store.db import Store, default_db_path
from tokenbench.store.records import json_safe, to_dict


def cell_row(r: CellResult) -> dict:
    return {"key": r.key, "input_len": r.input_len, "output_len": r.output_len,
            "concurrency": r.load.concurrency, "request_rate": r.load.request_rate, "status": r.status,
            "message": r.message, "summary": r.summary}


class ResultWriter:
    def __init__(self, spec: BenchSpec, target: ResolvedTarget, argv: Sequence[str], json_path: str | None,
                 db_path: str | None | bool, facts: dict | None = None, store: bool = True) -> None:
        self.env = environment.capture()
        self.json_path = Path(json_path) if json_path else None
        self.doc = {
            "tool": {"name": "tokenbench", "version": __version__},
            "command": list(argv),
            "spec": spec.model_dump(mode="json"),
            "target": {"base_url": target.base_url, "model": target.model, "max_model_len": target.max_model_len,
                       "vocab": {"size": target.vocab.size, "low": target.vocab.low, "high": target.vocab.high,
                                 "source": target.vocab.source}},
            "server_facts": facts or {},
            "environment": self.env,
            "cells": [],
        }
        self.store = Store(db_path or default_db_path()) if store else None
        self.run_id = None
        if self.store:
            self.run_id = self.store.create_run("bench", target.base_url,
                                               {**self.doc["spec"], "planned_cells": len(spec.cells)}, argv, self.env)
            self.config_id = self.store.upsert_config(self.run_id, "target", facts=facts or {}, status="running")
            self.doc["run_id"] = self.run_id

    def add_cell(self, r: CellResult) -> None:
        row = cell_row(r)
        if self.store:
            self.store.save_cell(self.run_id, self.config_id, row, [*r.warmup, *r.records])
        self.doc["cells"].append({**row, "requests": [to_dict(x) for x in r.records]})
        self._write_json()

    def _write_json(self) -> None:
        if not self.json_path:
            return
        self.json_path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.json_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(json_safe(self.doc), indent=1))
        os.replace(tmp, self.json_path)

    def finish(self, status: str) -> None:
        if self.store:
            self.store.upsert_config(self.run_id, "target", facts=self.doc["server_facts"], status=status)
            self.store.set_run_status(self.run_id, status)
        self._write_json()

    def locations(self) -> list[str]:
        out = []
        if self.store:
            out.append(f"stored run {self.run_id} in {self.store.path}")
        if self.json_path:
            out.append(f"wrote {self.json_path}")
        return out
