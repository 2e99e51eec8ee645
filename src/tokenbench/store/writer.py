"""Write a bench run as it happens: the database (one transaction per cell) and a JSON result file
rewritten after every cell, so an interruption keeps everything already measured (store/journal.py
keeps a cell in the other sinks when one of them fails)."""

from __future__ import annotations

from collections.abc import Sequence

from tokenbench import __version__
from tokenbench.load.cell import CellResult
from tokenbench.load.target import ResolvedTarget
from tokenbench.spec.bench import BenchSpec
from tokenbench.store import environment, outputs
from tokenbench.store.db import Store, default_db_path
from tokenbench.store.journal import Journal


def cell_row(r: CellResult) -> dict:
    return {"key": r.key, "input_len": r.input_len, "output_len": r.output_len,
            "concurrency": r.load.concurrency, "request_rate": r.load.request_rate, "status": r.status,
            "message": r.message, "summary": r.summary}


class ResultWriter:
    def __init__(self, spec: BenchSpec, target: ResolvedTarget, argv: Sequence[str], json_path: str | None,
                 db_path: str | None | bool, facts: dict | None = None, store: bool = True) -> None:
        if json_path is not None:
            outputs.check(json_path)              # before anything is measured
        self.env = environment.capture()
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
        self.config_id = None
        if self.store:
            self.run_id = self.store.create_run("bench", target.base_url,
                                               {**self.doc["spec"], "planned_cells": len(spec.cells)}, argv, self.env)
            self.config_id = self.store.upsert_config(self.run_id, "target", facts=facts or {}, status="running")
            self.doc["run_id"] = self.run_id
        self.journal = Journal(self.store, self.run_id, self.doc, json_path)

    @property
    def json_path(self):
        return self.journal.json_path

    def add_cell(self, r: CellResult) -> None:
        self.journal.add(self.config_id, cell_row(r), [*r.warmup, *r.records])

    def finish(self, status: str) -> None:
        if self.store:
            self.store.upsert_config(self.run_id, "target", facts=self.doc["server_facts"], status=status)
            self.store.set_run_status(self.run_id, status)
        self.journal.write()

    def locations(self) -> list[str]:
        return self.journal.locations()
