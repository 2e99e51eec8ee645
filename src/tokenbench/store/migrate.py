"""Bring a results database to SCHEMA_VERSION, or refuse it with a one-line reason.

Version 0 with no tables is a new database: it gets V1_DDL and then every migration, the same steps an
old database takes. Each migration runs in its own transaction together with its `user_version` bump,
so a crash mid-migration leaves the previous version intact.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

from tokenbench.errors import StoreError
from tokenbench.store.schema import MIGRATIONS, REQUIRED_COLUMNS, SCHEMA_VERSION, V1_DDL

NOT_OURS = "use another --db (or move this file away)"


def _tables(db: sqlite3.Connection) -> set[str]:
    return {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}


def _step(db: sqlite3.Connection, step: str | Callable[[sqlite3.Connection], None], version: int) -> None:
    db.execute("BEGIN IMMEDIATE")
    try:
        if callable(step):
            step(db)
        for statement in filter(str.strip, step.split(";") if isinstance(step, str) else ()):
            db.execute(statement)
        db.execute(f"PRAGMA user_version = {version}")
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")


def migrate(db: sqlite3.Connection, path: Path) -> int:
    """Upgrade in place; returns the version found. StoreError for a newer or foreign database. Foreign keys
    are off while it runs (the caller turns them on after)."""
    db.execute("PRAGMA foreign_keys = OFF")    # a rebuilt table (migration 5) must not cascade deletes
    version = db.execute("PRAGMA user_version").fetchone()[0]
    if version > SCHEMA_VERSION:
        raise StoreError(f"{path} has schema version {version}, newer than this tokenbench ({SCHEMA_VERSION})",
                         "upgrade tokenbench or use another --db")
    if version == 0:
        if _tables(db):
            raise StoreError(f"{path} is an SQLite database but not a tokenbench results database", NOT_OURS)
        _step(db, V1_DDL, 1)
    for target, sql in MIGRATIONS:
        if target > max(version, 1):
            _step(db, sql, target)
    check_columns(db, path)
    return version


def check_columns(db: sqlite3.Connection, path: Path) -> None:
    for table, columns in REQUIRED_COLUMNS.items():
        have = {r[1] for r in db.execute(f"PRAGMA table_info({table})")}
        missing = [c for c in columns if c not in have]
        if missing:
            raise StoreError(f"{path} does not have the tokenbench schema: table {table} lacks "
                             f"{', '.join(missing[:4])}", NOT_OURS)
