"""Every file output is atomic and refuses what is not a regular file; a cell that one sink refuses is
kept in the others (or a recovery file) and the error says where."""

from __future__ import annotations

import errno
import json
import os
import stat
from pathlib import Path

import pytest

from tokenbench.cli.main import main
from tokenbench.client.records import RequestRecord
from tokenbench.errors import OutputError, UsageError
from tokenbench.metrics.cell_summary import CellSummary
from tokenbench.store import outputs
from tokenbench.store.db import Store
from tokenbench.store.journal import Journal
from tokenbench.store.rows import CellRow


def test_a_regular_file_is_replaced_atomically(tmp_path):
    target = tmp_path / "sub" / "out.json"
    outputs.write_text(target, "one")
    outputs.write_text(target, "two")
    assert target.read_text() == "two"
    assert sorted(p.name for p in target.parent.iterdir()) == ["out.json"]       # no temporary left


def special(tmp_path: Path, kind: str) -> Path:
    if kind == "symlink":
        (tmp_path / "real.json").write_text("keep me")
        (tmp_path / "link.json").symlink_to(tmp_path / "real.json")
        return tmp_path / "link.json"
    if kind == "dangling_symlink":
        (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
        return tmp_path / "dangling"
    if kind == "fifo":
        os.mkfifo(tmp_path / "pipe")
        return tmp_path / "pipe"
    if kind == "directory":
        (tmp_path / "dir").mkdir()
        return tmp_path / "dir"
    if kind == "parent_is_file":
        (tmp_path / "file").write_text("x")
        return tmp_path / "file" / "out.json"
    return Path("/dev/full")


@pytest.mark.parametrize("kind", ["symlink", "dangling_symlink", "fifo", "directory", "dev_full", "parent_is_file"])
def test_special_paths_are_refused_and_left_alone(tmp_path, kind):
    path = special(tmp_path, kind)
    before = os.lstat(path) if os.path.lexists(path) else None
    with pytest.raises(UsageError) as exc:
        outputs.write_text(path, "{}")
    assert str(path) in exc.value.message and "regular file" in exc.value.hint
    if before is not None:
        after = os.lstat(path)
        assert (after.st_mode, after.st_ino) == (before.st_mode, before.st_ino)
    if kind == "dev_full":
        assert stat.S_ISCHR(os.stat("/dev/full").st_mode)
    if kind == "symlink":
        assert (tmp_path / "real.json").read_text() == "keep me"


def test_dash_is_standard_output(capsys, tmp_path):
    assert outputs.write_text("-", "hello") is None
    assert capsys.readouterr().out == "hello"


def enospc(*args, **kwargs):
    """Stands in for a full disk at the rename (a real full tmpfs is in tests/reliability/test_disk_full.py)."""
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def test_a_failed_write_keeps_the_previous_file(tmp_path, monkeypatch):
    target = tmp_path / "out.json"
    target.write_text("previous")
    monkeypatch.setattr(outputs.os, "replace", enospc)
    with pytest.raises(OutputError) as exc:
        outputs.write_text(target, "new")
    assert "ENOSPC" in exc.value.message and target.read_text() == "previous"
    assert [p.name for p in tmp_path.iterdir()] == ["out.json"]


def record(i: int) -> RequestRecord:
    return RequestRecord(index=i, phase="measure", input_len=4, output_len=2, intended_ns=0, sent_ns=10, end_ns=20,
                         status=200, token_times_ns=[15, 18], token_counts=[1, 1], prompt_tokens=4,
                         completion_tokens=2, usage_source="server", finish_reason="length")


def row(key: str) -> CellRow:
    return CellRow(key=key, input_len=4, output_len=2, status="ok", summary=CellSummary(num_prompts=2, failed=0),
                   concurrency=1)


class RefusingStore(Store):
    """A real store whose save_cell meets a full disk from the `fail_from`-th cell on."""

    fail_from = 2

    def save_cell(self, *args, **kwargs):
        self.fail_from -= 1
        if self.fail_from <= 0:
            with self._guard("store cell"):
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return super().save_cell(*args, **kwargs)


def journal(tmp_path, json_path) -> tuple[Journal, Store, int]:
    store = RefusingStore(tmp_path / "db" / "r.db")
    run_id = store.create_run("sweep", "http://x", {}, [], {})
    config_id = store.upsert_config(run_id, "default")
    return Journal(store, run_id, {"run_id": run_id}, json_path, "; then resume"), store, config_id


def test_disk_full_database_keeps_the_cell_in_the_json_result(tmp_path):
    j, store, config_id = journal(tmp_path, tmp_path / "out" / "result.json")
    j.add(config_id, row("a"), [record(0), record(1)])
    with pytest.raises(OutputError) as exc:
        j.add(config_id, row("b"), [record(0), record(1)])
    msg = exc.value.one_line()
    assert "ENOSPC" in msg and f"cell b and earlier in {tmp_path / 'out' / 'result.json'}" in msg
    assert f"1 earlier cell(s) in {store.path}" in msg and "resume" in msg
    doc = json.loads((tmp_path / "out" / "result.json").read_text())
    assert [c["key"] for c in doc["cells"]] == ["a", "b"] and len(doc["cells"][1]["requests"]) == 2
    assert [c.key for c in store.cells(j.run_id)] == ["a"]
    assert store.run(j.run_id).status == "interrupted"


def test_without_a_json_result_a_recovery_file_takes_the_cell(tmp_path):
    j, store, config_id = journal(tmp_path, None)
    j.add(config_id, row("a"), [record(0)])
    with pytest.raises(OutputError) as exc:
        j.add(config_id, row("b"), [record(0)])
    recovery = tmp_path / "db" / f"tokenbench-recovery-{j.run_id}.json"
    assert f"recovery file {recovery}" in exc.value.message
    assert [c["key"] for c in json.loads(recovery.read_text())["cells"]] == ["a", "b"]


def test_a_json_result_that_cannot_be_written_leaves_the_cell_in_the_database(tmp_path, monkeypatch):
    store = Store(tmp_path / "r.db")
    run_id = store.create_run("bench", "http://x", {}, [], {})
    config_id = store.upsert_config(run_id, "target")
    j = Journal(store, run_id, {"run_id": run_id}, tmp_path / "result.json")
    monkeypatch.setattr(outputs.os, "replace", enospc)
    with pytest.raises(OutputError) as exc:
        j.add(config_id, row("a"), [record(0)])
    assert "ENOSPC" in exc.value.message and f"cell a and earlier in {store.path}" in exc.value.message
    assert [c.key for c in store.cells(run_id)] == ["a"] and store.run(run_id).status == "interrupted"


@pytest.mark.parametrize("argv", [["parse", "npu-smi", "/dev/zero"], ["import", "/dev/zero"]])
def test_a_device_given_as_input_is_refused_before_it_is_read(argv, capsys):
    """/dev/zero would be read forever (the CLI property test found `parse npu-smi /dev/full` eating all
    memory): refused in one line, exit 2."""
    assert main(argv) == 2
    assert "is a character device, not a file to read" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [["runs"], ["report", "x"], ["export", "x"], ["compare", "a", "b"],
                                  ["import", __file__], ["bench", "--base-url", "http://127.0.0.1:1"],
                                  ["sweep", "--base-url", "http://127.0.0.1:1"], ["demo"]])
def test_db_dash_is_refused_not_written(argv, capsys, tmp_path, monkeypatch):
    """A database is not a stream: `--db -` on every command that takes one is refused in one line (exit 2)
    before anything runs, and no file named `-` appears in the current directory."""
    monkeypatch.chdir(tmp_path)
    assert main([*argv, "--db", "-"]) == 2
    [line] = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("error: --db -:") and "not a stream" in line and "give --db a file path" in line
    assert list(tmp_path.iterdir()) == []
