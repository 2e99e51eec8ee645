"""How many of tokenbench's modules one stored `bench` run executes (issue 34): `tokenbench bench` at 8
streams, 32 requests, against the shipped reference server (in its own process), stored in a temporary
results database, with `sys.setprofile` (and `threading.setprofile`) installed before the first tokenbench
import. A module is executed when any of its functions or class bodies runs; a module whose only code that
ran is its import (its top-level statements, their comprehensions included: Python 3.12 inlines those) is
imported, not executed. Prints both counts and the modules executed per package (`--list`: every module's
name, `*` where only imported).

    .venv/bin/python bench/modules_run.py [--list] [--streams 8] [--requests 32]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

# Run in the child: profile every call, keep what ran of each package file, then run the command.
CHILD = r"""
import json, os, sys, threading
root = os.path.dirname(os.path.abspath(sys.argv[1]))
seen = {}
INLINE = {"<listcomp>", "<dictcomp>", "<setcomp>", "<genexpr>"}
def top_level(frame):
    # a comprehension run by the module's own top-level code is part of its import (Python 3.12 inlines them)
    while frame is not None and frame.f_code.co_name in INLINE:
        frame = frame.f_back
    return frame is not None and frame.f_code.co_name == "<module>"
def hook(frame, event, arg):
    if event == "call":
        code = frame.f_code
        if code.co_filename.startswith(root):
            seen.setdefault(code.co_filename, set()).add(top_level(frame))
sys.setprofile(hook)
threading.setprofile(hook)
from tokenbench.cli.main import main
try:
    code = main(sys.argv[3:])
finally:
    sys.setprofile(None)
    with open(sys.argv[2], "w") as f:
        json.dump({os.path.relpath(p, root): False in ran for p, ran in seen.items()}, f)
sys.exit(code)
"""


def module_name(rel: str) -> str:
    parts = Path(rel).with_suffix("").parts
    return ".".join(["tokenbench", *(parts[:-1] if parts[-1] == "__init__" else parts)])


def run(streams: int = 8, requests: int = 32) -> dict[str, bool]:
    """Every package module whose code ran in one stored bench run -> whether it was executed (a function
    or class body ran), not only imported."""
    import tokenbench
    from tokenbench.testing.reference_server import ReferenceConfig, ReferenceProcess

    work = Path(tempfile.mkdtemp(prefix="tb-modules-"))
    out = work / "modules.json"
    env = {**os.environ, "TOKENBENCH_RESULTS": str(work), "TOKENBENCH_STATE": str(work / "state")}
    with ReferenceProcess(ReferenceConfig(ttft_ms=5, itl_ms=2)) as ref:
        argv = ["bench", "--base-url", ref.url, "--input-len", "32", "--output-len", "16", "--concurrency",
                str(streams), "--num-prompts", str(requests), "--db", str(work / "run.db")]
        done = subprocess.run([sys.executable, "-c", CHILD, tokenbench.__file__, str(out), *argv], env=env,
                              cwd=work, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"bench failed ({done.returncode}): {done.stderr[-600:]}")
    return {module_name(p): executed for p, executed in json.loads(out.read_text()).items()}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--streams", type=int, default=8)
    ap.add_argument("--requests", type=int, default=32)
    ap.add_argument("--list", action="store_true", help="print every module whose code ran")
    a = ap.parse_args()
    mods = run(a.streams, a.requests)
    executed = sorted(m for m, ran in mods.items() if ran)
    print(f"{len(executed)} modules of tokenbench executed by one stored bench run ({a.streams} streams, "
          f"{a.requests} requests, reference server); {len(mods)} imported")
    by_pkg = Counter(m.split(".")[1] if m.count(".") else m for m in executed)
    print(", ".join(f"{k} {v}" for k, v in sorted(by_pkg.items())))
    if a.list:
        print("\n".join(f"{m}{'' if ran else ' *'}" for m, ran in sorted(mods.items())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
