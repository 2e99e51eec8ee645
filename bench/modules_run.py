"""How many of tokenbench's modules one stored `bench` run executes (issues 34, 45): `tokenbench bench` at 8
streams, 32 requests, against the shipped reference server (in its own process), stored in a temporary
results database, with `sys.setprofile` (and `threading.setprofile`) installed before the first tokenbench
import. A module counts as *called* when one of its functions (a function, method, lambda, comprehension,
generator or coroutine body: code the compiler marks CO_OPTIMIZED) is called while no module is being
imported (no module's top-level code on the thread's stack): what the run did, wherever its imports sit, so
moving an import into a function changes nothing it counts. Beside it, the count this script gave before
(*executed*: any function or class body ran, import-time work included) and the modules *imported*.
Prints the three counts and the called modules per package (`--list`: every module's name, marked `-` where
only imported, `~` where executed only while importing). `--deferred` lists the imports made inside
functions instead (read from the source, nothing run): what the called count no longer depends on.

    .venv/bin/python bench/modules_run.py [--list | --deferred] [--streams 8] [--requests 32]
"""

from __future__ import annotations

import argparse
import ast
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
OPTIMIZED = 0x1                     # inspect.CO_OPTIMIZED: a function's code, not a module's or a class body's
INLINE = {"<listcomp>", "<dictcomp>", "<setcomp>", "<genexpr>"}
seen = {}                           # file -> {"executed": bool, "called": bool}
importing = {}                      # thread -> module bodies running on its stack
def top_level(frame):
    # a comprehension run by the module's own top-level code is part of its import (Python 3.12 inlines them)
    while frame is not None and frame.f_code.co_name in INLINE:
        frame = frame.f_back
    return frame is not None and frame.f_code.co_name == "<module>"
def hook(frame, event, arg):
    if event not in ("call", "return"):
        return
    code = frame.f_code
    if code.co_name == "<module>":
        t = threading.get_ident()
        importing[t] = importing.get(t, 0) + (1 if event == "call" else -1)
    if event != "call" or not code.co_filename.startswith(root):
        return
    ran = seen.setdefault(code.co_filename, {"executed": False, "called": False})
    ran["executed"] = ran["executed"] or not top_level(frame)
    ran["called"] = ran["called"] or (bool(code.co_flags & OPTIMIZED) and not importing.get(threading.get_ident()))
sys.setprofile(hook)
threading.setprofile(hook)
from tokenbench.cli.main import main
try:
    code = main(sys.argv[3:])
finally:
    sys.setprofile(None)
    with open(sys.argv[2], "w") as f:
        json.dump({os.path.relpath(p, root): ran for p, ran in seen.items()}, f)
sys.exit(code)
"""


def module_name(rel: str) -> str:
    parts = Path(rel).with_suffix("").parts
    return ".".join(["tokenbench", *(parts[:-1] if parts[-1] == "__init__" else parts)])


def run(streams: int = 8, requests: int = 32) -> dict[str, dict[str, bool]]:
    """Every package module whose code ran in one stored bench run -> {"called": a function of it was called
    outside any import, "executed": a function or class body of it ran (import-time work included)}; a module
    with neither was only imported."""
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
    return {module_name(p): ran for p, ran in json.loads(out.read_text()).items()}


def deferred() -> list[tuple[str, str, str]]:
    """Every import statement inside a function of the package: (module file:line, function, what it imports)."""
    import tokenbench

    root = Path(tokenbench.__file__).parent
    out: list[tuple[str, str, str]] = []
    for path in sorted(root.rglob("*.py")):
        if "standalone" not in path.parts:
            out += _deferred(path.relative_to(root).as_posix(), ast.parse(path.read_text(encoding="utf-8")))
    return out


def _deferred(rel: str, node: ast.AST, where: tuple[str, ...] = (), in_function: bool = False) -> list:
    out = []
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.Import, ast.ImportFrom)) and in_function:
            names = child.module if isinstance(child, ast.ImportFrom) else ", ".join(a.name for a in child.names)
            out.append((f"{rel}:{child.lineno}", ".".join(where), "." * getattr(child, "level", 0) + (names or "")))
        function = isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef))
        named = (*where, child.name) if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) \
            else where
        out += _deferred(rel, child, named, in_function or function)
    return out


def called(mods: dict[str, dict[str, bool]]) -> list[str]:
    return sorted(m for m, ran in mods.items() if ran["called"])


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--streams", type=int, default=8)
    ap.add_argument("--requests", type=int, default=32)
    ap.add_argument("--list", action="store_true", help="print every module whose code ran")
    ap.add_argument("--deferred", action="store_true", help="list the imports made inside functions")
    a = ap.parse_args()
    if a.deferred:
        rows = deferred()
        print("\n".join(f"{at} {function} -> {names}" for at, function, names in rows))
        own = sum(names.startswith("tokenbench") for _, _, names in rows)
        print(f"{len(rows)} imports inside functions, in {len({at.split(':')[0] for at, _, _ in rows})} modules: "
              f"{own} of tokenbench's own modules, {len(rows) - own} of other packages")
        return 0
    mods = run(a.streams, a.requests)
    calls, executed = called(mods), [m for m, ran in mods.items() if ran["executed"]]
    print(f"{len(calls)} modules of tokenbench had a function called by one stored bench run ({a.streams} "
          f"streams, {a.requests} requests, reference server); {len(executed)} executed a function or class "
          f"body (import-time work included); {len(mods)} imported")
    by_pkg = Counter(m.split(".")[1] if m.count(".") else m for m in calls)
    print(", ".join(f"{k} {v}" for k, v in sorted(by_pkg.items())))
    if a.list:
        marks = {(True, True): "", (False, True): " ~", (False, False): " -"}
        print("\n".join(f"{m}{marks[ran['called'], ran['executed']]}" for m, ran in sorted(mods.items())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
