"""Walk a spec model's fields by dotted key: the one source of CLI flags, `--fields` listings and docs."""

from __future__ import annotations

import types
import typing
from typing import Any

from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined


def submodel(annotation: Any) -> type[BaseModel] | None:
    """The model class of a `Model` or `Model | None` field (lists of models are shown as a type)."""
    origin = typing.get_origin(annotation)
    candidates = typing.get_args(annotation) if origin in (typing.Union, types.UnionType) else (annotation,)
    for c in candidates:
        if isinstance(c, type) and issubclass(c, BaseModel):
            return c
    return None


def type_name(annotation: Any) -> str:
    text = getattr(annotation, "__name__", None) if isinstance(annotation, type) else None
    return text or str(annotation).replace("typing.", "")


def fields(model: type[BaseModel], prefix: str = "") -> list[tuple[str, str, str]]:
    """(dotted key, type, description) of every leaf field of `model`, nested models flattened."""
    out = []
    for name, info in model.model_fields.items():
        sub = submodel(info.annotation)
        if sub is not None:
            out += fields(sub, f"{prefix}{name}.")
            continue
        out.append((prefix + name, type_name(info.annotation), info.description or ""))
    return out


def field_at(model: type[BaseModel], dotted: str) -> FieldInfo:
    """The FieldInfo of `a.b.c` in `model` (KeyError when a part is not a field)."""
    *parents, leaf = dotted.split(".")
    for part in parents:
        sub = submodel(model.model_fields[part].annotation)
        if sub is None:
            raise KeyError(dotted)
        model = sub
    return model.model_fields[leaf]


def model_at(model: type[BaseModel], loc: tuple) -> type[BaseModel]:
    """The deepest model along an error location (`('target', 'bse_url')` -> the target's model)."""
    for part in loc:
        info = model.model_fields.get(part) if isinstance(part, str) else None
        sub = submodel(info.annotation) if info is not None else None
        if sub is None:
            break
        model = sub
    return model


def default_of(info: FieldInfo) -> Any:
    """The field's default value, or None when it has none (required or made by a factory)."""
    if info.default is PydanticUndefined:
        return None
    return info.default
