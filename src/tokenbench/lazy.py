"""numpy, imported where it is first used rather than where it is named (importlib.util.LazyLoader).

The metrics modules that read a stored summary (its groups, the verdict, the figures a report compares)
name numpy for the arithmetic they do on a running cell; `tokenbench runs` reads summaries and does none
of it, and numpy's import was a quarter of its start-up (370M instructions, 80 ms; docs/architecture.md,
"Start-up"). A bench loads it when its cell's tally is made, before any request is sent, never in the
middle of a phase.
"""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType


def lazy_module(name: str) -> ModuleType:
    """The module `name`, executed on the first access to one of its attributes (now, if it already is)."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None:
        raise ModuleNotFoundError(f"No module named {name!r}", name=name)
    loader = importlib.util.LazyLoader(spec.loader)
    spec.loader = loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    loader.exec_module(module)
    return module
