"""Commands printed as advice, written so they work when pasted: the database is named (`--db PATH`)
unless it is the default one, and paths are absolute and quoted for the shell."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import TYPE_CHECKING

from tokenbench import userdirs

if TYPE_CHECKING:
    from tokenbench.store.db import Store

NOT_KEPT = "rerun it to measure the rest (--no-store keeps no database to resume from)"
RESUMABLE = ("bench", "sweep", "tune")      # the kinds of run `KIND --resume RUN` continues


def tokenbench(db: str | Path | None, *words: str) -> str:
    """`tokenbench WORDS`, with `--db PATH` when `db` is not the default database."""
    return shlex.join(["tokenbench", *words, *db_flag(db)])


def db_flag(db: str | Path | None) -> list[str]:
    if db is None:
        return []
    path = Path(db).absolute()
    default = (userdirs.results_dir() / "tokenbench.db").absolute()
    return [] if path == default else ["--db", str(path)]


def resume(db: str | Path | None, kind: str, run_id: str) -> str:
    return tokenbench(db, kind, "--resume", run_id)


def resume_advice(store: Store, kind: str, run_id: str) -> str:
    """'resume with `tokenbench KIND --resume RUN [--db PATH]`', or, for a --no-store run or a kind that cannot
    be resumed (a demo: its server stops with it), to run it again."""
    if kind not in RESUMABLE:
        return f"run the same `tokenbench {kind}` command again (a {kind} run is not resumed: its server stops with it)"
    return f"resume with `{resume(store.path, kind, run_id)}`" if store.kept else NOT_KEPT
