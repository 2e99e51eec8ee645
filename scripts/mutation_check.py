"""Mutation check: do the tests catch a single-point change in the modules that compute a published figure or
a decision?

For each module given, about 10 reproducible single-point mutants (seeded): a comparison flipped (a boundary
off by one), an integer constant off by one (one of 1000 or more off by a tenth), a float constant off by a
tenth either way (0.0 becomes 1.0 or -1.0), two arguments swapped, min/max or any/all exchanged, a negation
dropped, an arithmetic operator exchanged (+ -, * /, // /, % //, ** *), a boolean operator exchanged, an
if's branches exchanged. Each mutant is written into a copy of the checkout and the test tier is run against
it (`-x`, the tests that name the module first); a test failure, an error or a timeout detects it. Mutants
argued equivalent by hand (no input tells them apart) are listed with their reason in
scripts/mutation_equivalent.yaml and counted apart.

    .venv/bin/python scripts/mutation_check.py          # every module of MODULES, fast tier, seed 0
    .venv/bin/python scripts/mutation_check.py --area intervals --area ledger --seed 7
    .venv/bin/python scripts/mutation_check.py tokenbench.metrics.request src/tokenbench/load/arrivals.py
    .venv/bin/python scripts/mutation_check.py --slow src/tokenbench/metrics/*.py   # survivors: the slow tier too
    .venv/bin/python scripts/mutation_check.py --list tokenbench.metrics.request   # the mutants, not run
    .venv/bin/python scripts/mutation_check.py --only 'percentile:cmp:0 <= q' tokenbench.metrics.request
    .venv/bin/python scripts/mutation_check.py --at 6e2c08c tokenbench.metrics.request   # an earlier commit

Prints one line per mutant (detected / survived / equivalent) and a table per module; exits 1 when fewer
than --require (default 90 %) of the non-equivalent mutants of any module are detected."""

from __future__ import annotations

import argparse
import ast
import io
import math
import os
import random
import re
import resource
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
EQUIVALENT = Path(__file__).with_name("mutation_equivalent.yaml")

# Every module that computes a published figure or a decision, by import path under its area (docs/architecture.md,
# "Mutation check", lists them): checked when no module is given. Adding one is adding its line here.
MODULES: tuple[tuple[str, str], ...] = (
    ("figures", "tokenbench.metrics.request"),          # per-request figures, percentiles
    ("figures", "tokenbench.metrics.summary"),          # the cell's figures from the tally
    ("figures", "tokenbench.metrics.tally"),            # the one pass over a cell's records
    ("figures", "tokenbench.metrics.token_log"),        # a request's token log, folded
    ("figures", "tokenbench.metrics.timeslices"),       # the figures per slice of the window
    ("figures", "tokenbench.client.parse"),             # the stream parsed into a record (token counts, stamps)
    ("figures", "tokenbench.load.arrivals"),            # the arrival schedule (the load a figure is at)
    ("bounds", "tokenbench.metrics.health"),            # the client's health: each figure's bound and mark
    ("intervals", "tokenbench.metrics.uncertainty"),    # intervals and the verdict on a difference
    ("intervals", "tokenbench.judge.intervals"),        # a report's cells' intervals and verdicts
    ("intervals", "tokenbench.metrics.noise"),          # the between-run noise model, t quantiles, alpha spending
    ("verdicts", "tokenbench.metrics.verdict"),         # a cell's status
    ("verdicts", "tokenbench.judge.status"),            # a stored cell's and figure's state
    ("ledger", "tokenbench.metrics.server"),            # the clock offset, the phase ledger, server counters
    ("ledger", "tokenbench.judge.phases"),              # which phase moved between two cells
    ("windows", "tokenbench.monitor.window"),           # the monitor's samples over the measured window
    ("windows", "tokenbench.monitor.summary"),          # the monitor's figures of a cell
    ("windows", "tokenbench.monitor.counters"),         # the server's counters' increase over a window
    ("capacity", "tokenbench.metrics.capacity"),        # a capacity check's pass / fail
    ("capacity", "tokenbench.study.capacity"),          # the capacity search and its boundary
    ("tune", "tokenbench.judge.tune"),                  # the recommended config
    ("cost", "tokenbench.judge.cost"),                  # cost per token
    ("cost", "tokenbench.judge.frontier"),              # the cost / SLO frontier
    ("gate", "tokenbench.judge.gate"),                  # the regression gate's per-figure decisions
)


def module_file(name: str) -> str:
    """A module's file relative to the checkout: `tokenbench.a.b` -> src/tokenbench/a/b.py; a path as given."""
    return name if name.endswith(".py") else str(Path("src", *name.split("."))) + ".py"


@dataclass(frozen=True)
class Tier:
    name: str
    marks: str
    test_timeout_s: int          # a test running longer (a mutant that loops) fails: the mutant is detected


MEMORY_LIMIT = 8 << 30       # bytes of address space for one test run
FAST = Tier("fast", "not engine and not browser and not slow", 60)
SLOW = Tier("slow", "(slow or browser) and not engine", 600)
CMP_FLIP = {ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt, ast.Eq: ast.NotEq,
            ast.NotEq: ast.Eq, ast.Is: ast.IsNot, ast.IsNot: ast.Is, ast.In: ast.NotIn, ast.NotIn: ast.In}
ARITH = {ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.Div, ast.Div: ast.Mult, ast.FloorDiv: ast.Div,
         ast.Mod: ast.FloorDiv, ast.Pow: ast.Mult}
CALLS = {"min": "max", "max": "min", "any": "all", "all": "any"}
PLUGIN = '''"""Loaded by scripts/mutation_check.py: hypothesis draws the same examples on every run, no database, no deadline (a busy machine detects nothing)."""
from hypothesis import settings
settings.register_profile("mutation", database=None, derandomize=True, deadline=None)
settings.load_profile("mutation")
'''


@dataclass(frozen=True)
class Mutant:
    """One single-point change: `node` (line, col, end line, end col; cols in characters) of `module`
    replaced by `text`. `ident` names it by function, operator and code, not by line (stable while the
    code it changes stays)."""

    module: str
    ident: str
    span: tuple[int, int, int, int]
    text: str

    def apply(self, source: str) -> str:
        lines = source.splitlines(keepends=True)
        l0, c0, l1, c1 = self.span
        head = "".join(lines[:l0 - 1]) + lines[l0 - 1][:c0]
        tail = lines[l1 - 1][c1:] + "".join(lines[l1:])
        return head + self.text + tail


@dataclass
class _Finder(ast.NodeVisitor):
    """Every candidate mutation of one module, in source order."""

    source: str
    found: list[tuple[str, str, ast.AST, ast.AST]] = field(default_factory=list)  # (where, kind, old, new)
    scope: list[str] = field(default_factory=list)

    def where(self) -> str:
        return ".".join(self.scope) or "<module>"

    def add(self, kind: str, old: ast.AST, new: ast.AST) -> None:
        self.found.append((self.where(), kind, old, new))

    def _scoped(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> None:
        self.scope.append(node.name)
        body = node.body[1:] if _docstring(node) else node.body
        defaults = [*node.args.defaults, *node.args.kw_defaults] if not isinstance(node, ast.ClassDef) else []
        for child in [*body, *(d for d in defaults if d is not None)]:
            self.visit(child)
        self.scope.pop()

    visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = _scoped

    def visit_Module(self, node: ast.Module) -> None:
        for child in node.body[1:] if _docstring(node) else node.body:
            if not isinstance(child, ast.ImportFrom | ast.Import):
                self.visit(child)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is not None:
            self.visit(node.value)

    def visit_JoinedStr(self, node: ast.JoinedStr) -> None:
        return None                              # message text: not a figure

    def visit_Compare(self, node: ast.Compare) -> None:
        for i, op in enumerate(node.ops):
            if type(op) in CMP_FLIP:
                ops = [*node.ops[:i], CMP_FLIP[type(op)](), *node.ops[i + 1:]]
                self.add("cmp", node, ast.Compare(node.left, ops, node.comparators))
        self.generic_visit(node)

    def visit_BinOp(self, node: ast.BinOp) -> None:
        if type(node.op) in ARITH:
            self.add("arith", node, ast.BinOp(node.left, ARITH[type(node.op)](), node.right))
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        if type(node.op) in ARITH:
            self.add("arith", node, ast.AugAssign(node.target, ARITH[type(node.op)](), node.value))
        self.generic_visit(node)

    def visit_BoolOp(self, node: ast.BoolOp) -> None:
        self.add("bool", node, ast.BoolOp(ast.Or() if isinstance(node.op, ast.And) else ast.And(), node.values))
        self.generic_visit(node)

    def visit_UnaryOp(self, node: ast.UnaryOp) -> None:
        if isinstance(node.op, ast.Not | ast.USub) and not isinstance(node.operand, ast.Constant):
            self.add("negation", node, node.operand)
        self.generic_visit(node)

    def visit_Constant(self, node: ast.Constant) -> None:
        for other in _off(node.value):
            self.add("const", node, ast.Constant(other))

    def visit_Call(self, node: ast.Call) -> None:
        name = node.func.id if isinstance(node.func, ast.Name) else None
        if name in CALLS:
            self.add("call", node, ast.Call(ast.Name(CALLS[name], ast.Load()), node.args, node.keywords))
        positional = [a for a in node.args if not isinstance(a, ast.Starred)]
        if len(positional) == len(node.args) >= 2 and ast.dump(node.args[0]) != ast.dump(node.args[1]):
            self.add("args", node, ast.Call(node.func, [node.args[1], node.args[0], *node.args[2:]], node.keywords))
        self.generic_visit(node)

    def visit_IfExp(self, node: ast.IfExp) -> None:
        self.add("branch", node, ast.IfExp(node.test, node.orelse, node.body))
        self.generic_visit(node)

    def visit_If(self, node: ast.If) -> None:
        self.add("branch", node.test, ast.UnaryOp(ast.Not(), node.test))
        self.generic_visit(node)


def _off(value: object) -> tuple[int | float, ...]:
    """A number's single-point mutants: an integer below 1000 off by one (a boundary), a larger one off by a tenth
    (a unit: 1_000_000 ns in a ms), a float off by a tenth either way (a quantile, a tolerance, a unit: 1e6),
    0.0 made 1.0 and -1.0 (a floor); nothing for bools and other constants."""
    if type(value) is int:
        step = 1 if abs(value) < 1000 else abs(value) // 10
        return value + step, value - step
    if type(value) is float and math.isfinite(value):
        return (1.0, -1.0) if value == 0 else (float(f"{value * 1.1:.6g}"), float(f"{value * 0.9:.6g}"))
    return ()


def _docstring(node: ast.AST) -> bool:
    body = getattr(node, "body", [])
    return bool(body) and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
        and isinstance(body[0].value.value, str)


def _span(source_lines: list[str], node: ast.AST) -> tuple[int, int, int, int]:
    """The node's place with columns in characters (ast gives UTF-8 byte offsets)."""
    def col(line: int, byte: int) -> int:
        return len(source_lines[line - 1].encode()[:byte].decode())
    l0, l1 = node.lineno, node.end_lineno or node.lineno       # type: ignore[attr-defined]
    return l0, col(l0, node.col_offset), l1, col(l1, node.end_col_offset or 0)   # type: ignore[attr-defined]


def _flat(code: str) -> str:
    return " ".join(code.split())


def _code(source: str, node: ast.AST, parents: dict[ast.AST, ast.AST]) -> str:
    """The changed code; a constant with the expression it is part of (`1 in len(t) - 1`)."""
    code = _flat(ast.get_source_segment(source, node) or "")
    parent = parents.get(node)
    if isinstance(node, ast.Constant) and isinstance(parent, ast.expr):
        whole = _flat(ast.get_source_segment(source, parent) or "")
        return f"{code} in {whole[:60]}{'...' if len(whole) > 60 else ''}"
    return code


def candidates(module: str, source: str) -> list[Mutant]:
    """Every mutant of the module that compiles, in source order, each with a distinct ident."""
    finder, tree = _Finder(source), ast.parse(source)
    finder.visit(tree)
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    lines, seen, out = source.splitlines(keepends=True), dict[str, int](), []
    for where, kind, old, new in finder.found:
        text = ast.unparse(new) if isinstance(new, ast.stmt) else f"({ast.unparse(new)})"
        ident = f"{where}:{kind}:{_code(source, old, parents)} -> {_flat(text)}"
        seen[ident] = seen.get(ident, 0) + 1
        mutant = Mutant(module, ident + (f" #{seen[ident]}" if seen[ident] > 1 else ""), _span(lines, old), text)
        if _compiles(mutant.apply(source)):
            out.append(mutant)
    return out


def _compiles(source: str) -> bool:
    try:
        compile(source, "<mutant>", "exec")
    except SyntaxError:
        return False
    return True


def pick(mutants: list[Mutant], seed: int, per_module: int) -> list[Mutant]:
    """`per_module` mutants drawn without replacement by a generator seeded with the seed and the module's
    path: the same mutants on every run while the module's code stays."""
    rng = random.Random(f"{seed}/{mutants[0].module}" if mutants else seed)
    chosen = rng.sample(range(len(mutants)), min(per_module, len(mutants)))
    return [mutants[i] for i in sorted(chosen)]


# ---- running the tests against a mutant ----

@dataclass(frozen=True)
class Sandbox:
    """A copy of the checkout's files (tracked and not ignored) where one module at a time is mutated."""

    root: Path
    timeout_s: float

    @classmethod
    def copy(cls, into: Path, timeout_s: float, at: str | None = None) -> Sandbox:
        """The working tree's files, or with `at` the files of that commit (a check of an earlier state)."""
        if at:
            archive = subprocess.run(["git", "archive", "--format=tar", at], cwd=ROOT, check=True,
                                     capture_output=True).stdout
            with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
                tar.extractall(into, filter="data")
        else:
            files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, check=True,
                                   capture_output=True).stdout.decode().split("\0")
            for rel in filter(None, files):
                src, dst = ROOT / rel, into / rel
                if src.is_file():
                    dst.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(src, dst)
        (into / ".mutation").mkdir()
        (into / ".mutation" / "mutation_plugin.py").write_text(PLUGIN)
        return cls(into, timeout_s)

    def env(self) -> dict[str, str]:
        return {**os.environ, "PYTHONPATH": f"{self.root / 'src'}{os.pathsep}{self.root / '.mutation'}",
                "PYTHONDONTWRITEBYTECODE": "1"}

    def run(self, tier: Tier, tests: list[str], show: bool = False) -> str | None:
        """None when the tests pass (the mutant, if any, survived), else the first test that failed (or
        "timeout"); `show`: print the end of a failing run."""
        argv = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "-p", "mutation_plugin",
                "--timeout", str(tier.test_timeout_s), "-m", tier.marks, *tests]
        try:
            done = subprocess.run(argv, cwd=self.root, env=self.env(), capture_output=True, text=True,
                                  timeout=self.timeout_s, preexec_fn=_limit_memory)
        except subprocess.TimeoutExpired:
            return "timeout"
        if done.returncode == 0 or done.returncode == 5 and tests:             # 5: none of these tests selected
            return None
        if show:
            print("\n".join((done.stdout + done.stderr).splitlines()[-25:]), file=sys.stderr)
        failed = re.search(r"^(?:FAILED|ERROR) (\S+)", done.stdout, re.M)
        return failed.group(1) if failed else f"exit {done.returncode}"

    def test_files(self, module: str) -> tuple[list[str], list[str], list[str]]:
        """(the module's own test files: tests/<its package>/test_<its name>*.py; the test files that import it
        or are named after it; every test file, those first, then the ones naming it, then the rest), so most
        mutants are detected by a short first run."""
        stem, package = Path(module).stem, Path(module).parent.name
        dotted = ".".join(Path(module).with_suffix("").parts[1:])          # src/tokenbench/a/b.py -> tokenbench.a.b
        def rank(f: str) -> int:
            text = (self.root / f).read_text(errors="replace")
            return (0 if Path(f).stem == f"test_{stem}" else 1 if dotted in text or f"import {stem}" in text
                    else 2 if stem in text else 3)
        def own(f: str) -> bool:
            name = Path(f).stem
            return Path(f).parent.name == package and (name == f"test_{stem}" or name.startswith(f"test_{stem}_"))
        files = sorted(str(p.relative_to(self.root)) for p in (self.root / "tests").rglob("test_*.py"))
        return [f for f in files if own(f)], [f for f in files if rank(f) < 2], sorted(files, key=rank)


def _limit_memory() -> None:
    """A mutant that makes a loop endless may grow a list without end: its test run gets MEMORY_LIMIT of
    address space (a MemoryError fails the test, detecting it) rather than the shared machine's memory."""
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def detected_by(box: Sandbox, mutant: Mutant, tier: Tier, quick: bool = False) -> str | None:
    """Write the mutant into the sandbox, run the tier's tests of the module: its own test files, then the
    others that name it, then (if they pass) the whole tier, the files naming the module first: the test
    that failed, or None (the mutant survived)."""
    path = box.root / mutant.module
    original = path.read_text()
    path.write_text(mutant.apply(original))
    try:
        own, near, every = box.test_files(mutant.module)
        rest = [f for f in near if f not in own]
        return ((box.run(tier, own) if own else None) or (box.run(tier, rest) if rest else None)
                or (None if quick else box.run(tier, every)))
    finally:
        path.write_text(original)


# ---- the report ----

@dataclass
class Tally:
    mutants: int = 0
    equivalent: int = 0
    fast: int = 0
    slow: int = 0
    survivors: list[str] = field(default_factory=list)

    def share(self) -> float:
        live = self.mutants - self.equivalent
        return (self.fast + self.slow) / live if live else 1.0

    def row(self, module: str, slow: bool) -> str:
        live = self.mutants - self.equivalent
        cols = [module, str(self.mutants), str(self.equivalent), f"{self.fast} / {live}"]
        return " | ".join([*cols, f"{self.fast + self.slow} / {live}" if slow else "-"])


def equivalents(path: Path) -> dict[tuple[str, str], str]:
    """(module, mutant ident) -> why no input tells the mutant from the original."""
    entries = yaml.safe_load(path.read_text()) or [] if path.exists() else []
    return {(e["module"], e["mutant"]): e["reason"] for e in entries}


def judge(box: Sandbox, mutant: Mutant, slow: bool, quick: bool = False) -> tuple[str, str]:
    """("detected (fast)" | "detected (slow)" | "survived", the test that detected it); `quick`: only the
    module's own tests (a first look for weak spots, not the check)."""
    by = detected_by(box, mutant, FAST, quick)
    if by:
        return "detected (fast)", by
    by = detected_by(box, mutant, SLOW) if slow else None
    return ("detected (slow)", by) if by else ("survived", "")


def check_module(box: Sandbox, mutants: list[Mutant], known: dict[tuple[str, str], str], slow: bool,
                 quick: bool = False) -> Tally:
    tally = Tally(mutants=len(mutants))
    for m in mutants:
        t0 = time.monotonic()
        reason = known.get((m.module, m.ident))
        outcome, by = judge(box, m, slow, quick)
        tally.fast += outcome == "detected (fast)"
        tally.slow += outcome == "detected (slow)"
        tally.equivalent += reason is not None and outcome == "survived"
        if reason is None and outcome == "survived":
            tally.survivors.append(m.ident)
        shown = (f"equivalent: {reason}" if reason is not None and outcome == "survived" else outcome
                 + (f" by {by}" if by else "") + (" -- listed as equivalent, but a test tells it apart: remove it "
                                                  "from the list" if reason is not None and by else ""))
        print(f"  {m.ident}  [{shown}, {time.monotonic() - t0:.0f} s]", flush=True)
    return tally


def _modules(args: argparse.Namespace, root: Path) -> Iterator[tuple[str, list[Mutant], int]]:
    """(module, its chosen mutants, how many candidates it has), each module read from `root` (the sandbox:
    the working tree's files, or a commit's)."""
    for arg in _names(args):
        rel = os.path.relpath(Path(module_file(arg)).resolve(), ROOT)
        if not (root / rel).is_file():
            raise SystemExit(f"{arg}: no such module{f' at {args.at}' if args.at else ''}")
        every = candidates(rel, (root / rel).read_text())
        chosen = [m for m in every if m.ident in args.only] if args.only else pick(every, args.seed, args.per_module)
        yield rel, chosen, len(every)


def _names(args: argparse.Namespace) -> list[str]:
    """The modules asked: those given, else those of the areas asked (--area), else every one of MODULES."""
    if args.modules:
        return list(args.modules)
    areas = {a for a, _ in MODULES}
    for area in args.area or []:
        if area not in areas:
            raise SystemExit(f"--area {area}: no such area (one of {', '.join(sorted(areas))})")
    return [name for area, name in MODULES if not args.area or area in args.area]


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("modules", nargs="*", help="modules by import path (tokenbench.metrics.request) or file; "
                   "default: every one of MODULES (" + ", ".join(sorted({a for a, _ in MODULES})) + ")")
    p.add_argument("--area", action="append", help="the modules of MODULES under this area (repeat for several)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--per-module", type=int, default=10)
    p.add_argument("--slow", action="store_true", help="run the slow tier on the fast tier's survivors")
    p.add_argument("--list", action="store_true", help="print the mutants (and how many candidates) only")
    p.add_argument("--only", action="append", help="run only the mutant with this ident (repeat for several: e.g. "
                   "a --quick run's survivors through the whole tier)")
    p.add_argument("--at", help="check the modules and tests of this commit instead of the working tree")
    p.add_argument("--quick", action="store_true", help="only the tests that import the module, not the tier "
                   "(a first look for weak spots: its survivors are an upper bound, not the check's result)")
    p.add_argument("--timeout-s", type=float, default=900, help="a tier run longer than this detects the mutant")
    p.add_argument("--require", type=float, default=0.9,
                   help="share of each module's non-equivalent mutants to detect")
    return p


def _table(tallies: dict[str, Tally], slow: bool) -> dict[str, float]:
    print("\nmodule | mutants | equivalent | detected fast | detected fast+slow")
    for module, t in tallies.items():
        print(t.row(module, slow))
    total = Tally(*(sum(getattr(t, f) for t in tallies.values()) for f in ("mutants", "equivalent", "fast", "slow")))
    print(total.row("all", slow))
    for module, t in tallies.items():
        for ident in t.survivors:
            print(f"survived: {module}: {ident}")
    return {module: t.share() for module, t in tallies.items()}


def main() -> int:
    args = _parser().parse_args()
    # stopped with SIGTERM (a background job ignores SIGINT): the test run is killed and the sandbox removed
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    known = equivalents(EQUIVALENT)
    with tempfile.TemporaryDirectory(prefix="tokenbench-mutants-") as tmp:
        box = Sandbox.copy(Path(tmp), min(args.timeout_s, 180) if args.quick else args.timeout_s, args.at)
        modules = list(_modules(args, box.root))
        if args.list:
            for rel, chosen, count in modules:
                print(f"{rel}: {count} candidates")
                for m in chosen:
                    print(f"  {m.ident}" + (f"  [equivalent: {known[(rel, m.ident)]}]" if (rel, m.ident) in known else ""))
            return 0
        for tier in () if args.quick else (FAST, SLOW) if args.slow else (FAST,):
            if box.run(tier, [], show=True):
                print(f"the {tier.name} tier fails without a mutant: fix that first", file=sys.stderr)
                return 2
        tallies = {}
        for rel, chosen, _ in modules:
            print(f"{rel}: {len(chosen)} mutants (seed {args.seed})", flush=True)
            tallies[rel] = check_module(box, chosen, known, args.slow, args.quick)
    shares = _table(tallies, args.slow)
    short = [f"{module} {share:.0%}" for module, share in shares.items() if share < args.require]
    print(f"every module: at least {args.require:.0%} of its non-equivalent mutants detected" if not short else
          f"below {args.require:.0%} of the non-equivalent mutants detected: {', '.join(short)}")
    return 1 if short else 0


if __name__ == "__main__":
    sys.exit(main())
