"""Repairs a schema migration makes in Python, where SQL cannot: store/schema.py lists them among its
migrations, and store/migrate.py runs each in the transaction of its version bump."""

from __future__ import annotations

import json
import sqlite3

from tokenbench.store.records import dumps

# the JSON columns a release before schema 8 wrote with json.dumps's NaN and Infinity (requests' token lists
# were always msgspec's integers, and a monitor sample's labels strings)
NAN_COLUMNS = {"runs": ("spec_json", "command_json", "environment_json", "clock_json"),
               "server_configs": ("overrides_json", "profile_json", "facts_json"),
               "cells": ("summary_json",), "searches": ("record_json",)}
_SUSPECT = "({c} LIKE '%NaN%' OR {c} LIKE '%Infinity%')"


def non_finite_json_to_null(db: sqlite3.Connection) -> None:
    """NaN, Infinity and -Infinity in stored JSON (not JSON: SQLite before 3.42 refuses the whole text, so
    every query that reads into it failed) rewritten as null, "not defined", what tokenbench now writes."""
    for table, columns in NAN_COLUMNS.items():
        for column in columns:
            rows = db.execute(f"SELECT rowid, {column} FROM {table} WHERE {_SUSPECT.format(c=column)}").fetchall()
            for rowid, text in rows:
                fixed = _standard(text)
                if fixed != text:
                    db.execute(f"UPDATE {table} SET {column} = ? WHERE rowid = ?", (fixed, rowid))


def _standard(text: str) -> str:
    """The same document in standard JSON; text that is not JSON at all is left as it is (it was damaged
    some other way, and the reader says so)."""
    try:
        return dumps(json.loads(text))
    except ValueError:
        return text
