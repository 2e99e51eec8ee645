"""Walk a spec model's fields by dotted key: the one source of CLI flags, `--fields` listings and docs."""

from __future__ import annotations

import types
import typing
from dataclasses import dataclass
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
    """A field's type as a user writes its values: `int | None`, `list[tuple[int, int]]`, a Literal as its
    values (`poisson | constant`), a model by its name; validators attached with Annotated are no type."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Annotated:
        return type_name(args[0])
    if origin is typing.Literal:
        return " | ".join(str(a) for a in args)
    if origin in (typing.Union, types.UnionType):
        return " | ".join(type_name(a) for a in args)
    if origin is not None:
        return f"{getattr(origin, '__name__', origin)}[{', '.join(type_name(a) for a in args)}]"
    if annotation is type(None):
        return "None"
    return getattr(annotation, "__name__", None) or str(annotation).replace("typing.", "")


@dataclass(frozen=True)
class Key:
    """One leaf key of a spec: its dotted name, type, description and default ("" when it has none to show:
    required, or made by a factory)."""

    key: str
    kind: str
    text: str
    default: str = ""


def fields(model: type[BaseModel], prefix: str = "") -> list[Key]:
    """Every leaf field of `model`, nested models flattened."""
    out = []
    for name, info in model.model_fields.items():
        sub = submodel(info.annotation)
        if sub is not None:
            out += fields(sub, f"{prefix}{name}.")
            continue
        default = default_of(info)
        out.append(Key(prefix + name, type_name(info.annotation), info.description or "",
                       "" if default is None else str(default)))
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
