"""torchvision guard, written by `tokenbench setup sglang-cpu` into the SGLang venv (with a .pth line that
imports it at interpreter start-up; it imports nothing heavy itself).

SGLang imports `torchvision.transforms` at start-up (its InternVL image constants), even for a text model.
PyPI has only CUDA builds of torchvision, whose C extension cannot load beside the CPU build of torch, and
torchvision then fails at import because it registers fake kernels for two of its C operators
(`torchvision::nms`, `torchvision::qnms`) unconditionally. Just before torchvision is first imported, this
guard declares those two operator schemas without any kernel, so the import succeeds and any real use
of them raises ("no kernel for CPU"). Nothing else of torchvision is touched.
"""

import importlib.abc
import sys

SCHEMAS = {"nms": "(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
           "qnms": "(Tensor dets, Tensor scores, float iou_threshold) -> Tensor"}


class _Guard(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path, target=None):
        if fullname == "torchvision":
            sys.meta_path.remove(self)
            _declare()
        return None                      # the normal finders import torchvision itself


def _declare():
    import torch

    for name, schema in SCHEMAS.items():
        try:
            torch.library.define(f"torchvision::{name}", schema)
        except RuntimeError:
            pass                         # already declared


def install():
    if not any(isinstance(f, _Guard) for f in sys.meta_path):
        sys.meta_path.insert(0, _Guard())
