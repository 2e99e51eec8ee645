"""sgl_kernel STAND-IN, written by `tokenbench setup sglang-cpu`; this is NOT SGLang's kernel library.

PyPI has only CUDA builds of `sgl_kernel` (their import fails without libcuda), and SGLang imports it at
start-up even on the CPU. On a CPU without AMX, SGLang's CPU path runs plain PyTorch and never calls these
kernels, so this package only has to satisfy the imports: every attribute asked for (of this package or
any `sgl_kernel.<sub>` module) is a function that logs its call and raises. Nothing here computes.

The log (one line per event: `<event> <pid> <name>`, event `import`, `attr` or `call`) goes to the file named by
$TOKENBENCH_SGL_KERNEL_LOG (none when unset). tokenbench's tests assert that a benchmark run made zero
`call` lines: a future SGLang that needs a real kernel fails loudly instead of measuring something else.

Features that would call a kernel, and so cannot run here: speculative decoding, MoE kernels, quantized
kernels (FP8/INT4/GGUF), custom all-reduce, FlashAttention/FlashMLA backends. `scalar_type` beside this
file is the real pure-Python module, taken at set-up from the published wheel.
"""

import importlib.abc
import importlib.machinery
import os
import sys
import types

STANDIN = True
__version__ = "0.0.0+tokenbench.standin"
_LOG = os.environ.get("TOKENBENCH_SGL_KERNEL_LOG")


def _log(event, name):
    if _LOG:
        with open(_LOG, "a") as handle:
            handle.write(f"{event} {os.getpid()} {name}\n")


def _stub(qualified):
    def stub(*args, **kwargs):
        _log("call", qualified)
        raise NotImplementedError(f"{qualified} is a tokenbench stand-in (no sgl_kernel kernel on this CPU); "
                                  "this SGLang feature needs the real CUDA/AMX sgl_kernel")
    stub.__name__ = stub.__qualname__ = qualified.rsplit(".", 1)[-1]
    return stub


def _module_getattr(module_name):
    def __getattr__(name):
        if name.startswith("__"):
            raise AttributeError(name)
        qualified = f"{module_name}.{name}"
        _log("attr", qualified)
        return _stub(qualified)
    return __getattr__


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """`sgl_kernel.<sub>` without a file here becomes a stand-in module too."""

    def find_spec(self, fullname, path, target=None):
        if not fullname.startswith(__name__ + ".") or fullname.count(".") != 1:
            return None
        if importlib.machinery.PathFinder.find_spec(fullname, globals()["__path__"]) is not None:
            return None                                      # a real file (scalar_type)
        return importlib.machinery.ModuleSpec(fullname, self, is_package=False)

    def create_module(self, spec):
        module = types.ModuleType(spec.name, f"tokenbench stand-in for {spec.name}; every attribute raises")
        module.__getattr__ = _module_getattr(spec.name)  # type: ignore[method-assign]  # PEP 562: a module's __getattr__
        _log("import", spec.name)
        return module

    def exec_module(self, module):
        pass


sys.meta_path.insert(0, _Finder())
__getattr__ = _module_getattr(__name__)
_log("import", __name__)
