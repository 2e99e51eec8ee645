"""A results database on a disk that fills up mid-sweep: a real 640 KiB tmpfs (needs root to mount; skipped
otherwise). The first cell is in the database and in the JSON result, the second in the JSON result; the
run reads "interrupted"; the one error line says what was kept where, with exit code 6; after space is
freed `--resume` completes the run. Also: `--output` given /dev/full, a symlink or a FIFO is refused
before anything is measured, and nothing is replaced."""

from __future__ import annotations

import contextlib
import json
import os
import stat
import subprocess
from pathlib import Path

import pytest
import yaml

from tokenbench.cli.main import main
from tokenbench.store.db import Store
from tokenbench.testing.reference_server import ReferenceConfig, ReferenceProcess

from .helpers import db_problems, error_lines


@pytest.fixture
def small_disk(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    where = tmp_path / "small"
    where.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=640k", "tmpfs", str(where)]).returncode != 0:
        pytest.skip("cannot mount a tmpfs here")
    yield where
    subprocess.run(["umount", "-l", str(where)], check=False)


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_database_disk_fills_in_the_second_cell(tmp_path, small_disk, capsys):
    db, result = small_disk / "r.db", tmp_path / "result.json"
    with ReferenceProcess(ReferenceConfig(ttft_ms=2, itl_ms=1)) as ref:
        spec = {"target": {"base_url": ref.url}, "pairs": [[8, 300]], "concurrency": [4, 8], "warmup_requests": 0,
                "requests": {"per_concurrency": 10, "min": 40}}
        (tmp_path / "s.yaml").write_text(yaml.safe_dump(spec))
        code = main(["sweep", str(tmp_path / "s.yaml"), "--db", str(db), "--output", str(result)])
        [line] = error_lines(capsys.readouterr().err)
        store = Store(db)
        [run] = store.runs()
        assert code == 6 and "disk full" in line and f"1 earlier cell(s) in {db}" in line
        assert f"cell 8:300/c=8 and earlier in {result}" in line and f"--resume {run.id}" in line
        assert [c.key for c in store.cells(run.id)] == ["8:300/c=4"]
        assert run.status == "interrupted"
        assert [(c["key"], len(c["requests"])) for c in json.loads(result.read_text())["cells"]] == \
            [("8:300/c=4", 40), ("8:300/c=8", 80)]
        store.close()
        subprocess.run(["mount", "-o", "remount,size=8m", str(small_disk)], check=True)
        code = main(["sweep", "--resume", run.id, "--db", str(db), "--output", str(result)])
    assert code == 0 and db_problems(db) == []
    store = Store(db)
    assert [c.key for c in store.cells(run.id)] == ["8:300/c=4", "8:300/c=8"]
    assert store.run(run.id).status == "done"
    assert [c["key"] for c in json.loads(result.read_text())["cells"]] == ["8:300/c=4", "8:300/c=8"]


@pytest.mark.slow
def test_a_full_disk_at_start_is_one_line(small_disk, capsys):
    with open(small_disk / "filler", "wb") as f, contextlib.suppress(OSError):
        f.write(b"x" * (640 * 1024))                                 # until the disk is full
    code = main(["bench", "--base-url", "http://127.0.0.1:1", "--input-len", "8", "--output-len", "8",
                 "--concurrency", "1", "--db", str(small_disk / "new.db")])
    [line] = error_lines(capsys.readouterr().err)
    assert code == 6 and str(small_disk / "new.db") in line and "disk full" in line, line


def special_outputs(tmp_path: Path) -> list[Path]:
    (tmp_path / "kept.json").write_text("keep")
    (tmp_path / "link.json").symlink_to(tmp_path / "kept.json")
    os.mkfifo(tmp_path / "fifo")
    return [Path("/dev/full"), tmp_path / "link.json", tmp_path / "fifo"]


@pytest.mark.parametrize("command", ["bench", "sweep"])
def test_output_to_a_device_a_symlink_or_a_fifo_is_refused(tmp_path, capsys, command):
    for out in special_outputs(tmp_path / command) if (tmp_path / command).mkdir() is None else []:
        before = os.lstat(out)
        args = ["--base-url", "http://127.0.0.1:1", "--input-len", "8", "--output-len", "8"] if command == "bench" \
            else ["--base-url", "http://127.0.0.1:1", "--pairs", "8:8"]
        code = main([command, *args, "--concurrency", "1", "--db", str(tmp_path / "r.db"), "--output", str(out)])
        [line] = error_lines(capsys.readouterr().err)
        assert code == 2 and str(out) in line and "regular file" in line, line
        after = os.lstat(out)
        assert (after.st_mode, after.st_ino, after.st_rdev) == (before.st_mode, before.st_ino, before.st_rdev)
    assert stat.S_ISCHR(os.stat("/dev/full").st_mode)
    assert (tmp_path / command / "kept.json").read_text() == "keep"
