"""How many of tokenbench's modules one stored `bench` run executes (issue 34): `tokenbench bench` at 8
streams, 32 requests, against the shipped reference server (in its own process), stored in a temporary
results database, with `sys.setprofile` (and `threading.setprofile`) installed before the first tokenbench
import; a module counts when any of its code runs (its import included). Prints the count, then the
modules by package (`--list`: every module's name).

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

# Run in the child: profile every call, keep the package files whose code ran, then run the command.
CHILD = r"""
import json, os, sys, threading
root = os.path.dirname(os.path.abspath(sys.argv[1]))
seen = set()
def hook(frame, event, arg):
    if event == "call":
        name = frame.f_code.co_filename
        if name.startswith(root):
            seen.add(name)
sys.setprofile(hook)
threading.setprofile(hook)
from tokenbench.cli.main import main
try:
    code = main(sys.argv[3:])
finally:
    sys.setprofile(None)
    with open(sys.argv[2], "w") as f:
        json.dump(sorted(os.path.relpath(p, root) for p in seen), f)
sys.exit(code)
"""


def module_name(rel: str) -> str:
    parts = Path(rel).with_suffix("").parts
    return ".".join(["tokenbench", *(parts[:-1] if parts[-1] == "__init__" else parts)]).rstrip(".")


def run(streams: int, requests: int) -> list[str]:
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
    return [module_name(p) for p in json.loads(out.read_text())]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--streams", type=int, default=8)
    ap.add_argument("--requests", type=int, default=32)
    ap.add_argument("--list", action="store_true", help="print every module executed")
    a = ap.parse_args()
    mods = run(a.streams, a.requests)
    print(f"{len(mods)} modules of tokenbench executed by one stored bench run "
          f"({a.streams} streams, {a.requests} requests, reference server)")
    by_pkg = Counter(m.split(".")[1] if m.count(".") > 1 or m.endswith("__init__") else m.split(".")[-1]
                     for m in mods)
    print(", ".join(f"{k} {v}" for k, v in sorted(by_pkg.items())))
    if a.list:
        print("\n".join(mods))
    return 0


if __name__ == "__main__":
    sys.exit(main())
