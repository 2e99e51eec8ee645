"""The generated sgl_kernel stand-in, imported for real in a fresh interpreter: imports of the package and
of any submodule succeed, every attribute asked for is logged, every call is logged and raises, and the
real module beside it (scalar_type) is used as it is."""

from __future__ import annotations

import subprocess
import sys

from tokenbench.local_engines import sglang_cpu

PROBE = """
import sgl_kernel
from sgl_kernel import rmsnorm
from sgl_kernel.flash_attn import flash_attn_with_kvcache
import sgl_kernel.kvcacheio
from sgl_kernel.scalar_type import REAL
assert REAL == 1 and sgl_kernel.STANDIN
assert not hasattr(sgl_kernel, "__wrapped__")          # dunder names are not stubbed
try:
    rmsnorm(1, eps=2)
except NotImplementedError as exc:
    print("raised:", exc)
"""


def test_every_attribute_is_logged_and_every_call_raises(tmp_path):
    package = tmp_path / "site" / "sgl_kernel"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(sglang_cpu.STANDIN.read_text())
    (package / "scalar_type.py").write_text("REAL = 1\n")
    log = tmp_path / "calls.log"
    proc = subprocess.run([sys.executable, "-I", "-c", f"import sys; sys.path.insert(0, {str(package.parent)!r})\n"
                           + PROBE], capture_output=True, text=True, env={sglang_cpu.LOG_VAR: str(log)}, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "raised: sgl_kernel.rmsnorm is a tokenbench stand-in" in proc.stdout
    calls = sglang_cpu.standin_calls(log)
    assert calls["import"] == ["sgl_kernel", "sgl_kernel.flash_attn", "sgl_kernel.kvcacheio"]
    assert list(dict.fromkeys(calls["attr"])) == ["sgl_kernel.rmsnorm", "sgl_kernel.flash_attn.flash_attn_with_kvcache"]
    assert calls["call"] == ["sgl_kernel.rmsnorm"]


def test_no_log_variable_no_file(tmp_path):
    package = tmp_path / "sgl_kernel"
    package.mkdir()
    (package / "__init__.py").write_text(sglang_cpu.STANDIN.read_text())
    code = f"import sys; sys.path.insert(0, {str(tmp_path)!r}); import sgl_kernel; sgl_kernel.anything"
    assert subprocess.run([sys.executable, "-I", "-c", code], env={}, timeout=60).returncode == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sgl_kernel"]
    assert sglang_cpu.standin_calls(tmp_path / "absent.log") == {"import": [], "attr": [], "call": []}
