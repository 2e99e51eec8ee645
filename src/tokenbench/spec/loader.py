"""Load YAML specs into pydantic models; errors name the file, the line and the fix.

`--set key.sub=value` overrides are applied to the raw mapping before validation, so they
are validated exactly like file contents.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel, ValidationError

from tokenbench.errors import SpecError
from tokenbench.spec.fields import model_at

if TYPE_CHECKING:
    import yaml

# yaml is imported where YAML is read (a spec file, a --set value): a bench given by flags reads none, and
# the import was 123M instructions (30 ms) of every such bench's start-up (docs/architecture.md, "Start-up")

M = TypeVar("M", bound=BaseModel)


def _line_map(node: yaml.Node, path: tuple = (), out: dict | None = None) -> dict[tuple, int | str]:
    """Map every key path in a composed YAML node tree to its 1-based line number."""
    import yaml
    out = {} if out is None else out
    out[path] = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            sub = path + (key.value,)
            out[sub] = key.start_mark.line + 1
            _line_map(value, sub, out)
            out[sub] = key.start_mark.line + 1
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _line_map(item, path + (i,), out)
    return out


def parse_yaml(text: str, source: str) -> tuple[Any, Lines]:
    import yaml
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
        lines = _line_map(node) if node is not None else {}
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{source}:{mark.line + 1}" if mark else source
        problem = " ".join(str(getattr(exc, "problem", None) or exc).split())   # one line
        raise SpecError(f"{where}: not valid YAML ({problem})", "fix the YAML syntax at that line") from exc
    except RecursionError:
        raise SpecError(f"{source}: nested too deeply, or an alias (*name) refers to its own anchor",
                        "write the values out without self-references") from None
    return (data if data is not None else {}), lines


Lines = dict[tuple, "int | str"]      # key path -> its line, or the `--set` item that gave it


def _nearest_line(lines: Lines, loc: tuple) -> int | str | None:
    for n in range(len(loc), -1, -1):
        if loc[:n] in lines:
            return lines[loc[:n]]
    return None


def unknown_key_hint(model: type[BaseModel] | None, loc: tuple) -> str:
    """The fix for an unknown key: the valid keys at that level and the command that lists them all."""
    command = getattr(model, "fields_command", None) if model else None
    if model is None or command is None:
        return "check the spelling; see the docs for the valid keys"
    keys = ", ".join(model_at(model, loc[:-1]).model_fields)
    return f"check the spelling; valid keys here: {keys}; `{command}` lists every key"


def validation_error(exc: ValidationError, source: str, lines: Lines,
                     model: type[BaseModel] | None = None) -> SpecError:
    """Turn the first pydantic error into a one-line SpecError naming line (or the `--set` item) and fix."""
    err = exc.errors()[0]
    loc = tuple(x for x in err["loc"] if not (isinstance(x, str) and x.startswith("function-")))
    key = ".".join(str(x) for x in loc) or "(top level)"
    line = _nearest_line(lines, loc)
    where = line if isinstance(line, str) else f"{source}:{line}" if line else source
    if err["type"] == "extra_forbidden":
        return SpecError(f"{where}: unknown key '{key}'", unknown_key_hint(model, loc))
    if err["type"] == "missing":
        return SpecError(f"{where}: required key '{key}' is missing", f"add '{loc[-1]}:'")
    msg = err["msg"].removeprefix("Value error, ")
    return SpecError(f"{where}: '{key}': {msg}", "correct that value")


def apply_overrides(data: dict, overrides: list[str], lines: Lines | None = None, label: str = "--set") -> dict:
    """Apply `a.b=value` overrides; the value is parsed as YAML (so 2 -> int, [1,2] -> list). `lines`
    then maps each overridden key to `label item`, so an error in it names the override, not a line of
    a file the user may never have written."""
    for item in overrides:
        if "=" not in item:
            raise SpecError(f"--set '{item}' has no '='", "write --set key=value, e.g. --set parallelism.tp=2")
        dotted, raw = item.split("=", 1)
        keys = dotted.strip().split(".")
        target = data
        for k in keys[:-1]:
            target = target.setdefault(k, {}) if isinstance(target, dict) else None
            if not isinstance(target, dict):
                raise SpecError(f"--set '{item}': '{k}' is not a section", "override a leaf key")
        if not isinstance(target, dict):
            raise SpecError(f"--set '{item}': the spec is not a mapping of keys", "see docs/ for an example")
        target[keys[-1]] = _override_value(item, raw)
        if lines is not None:
            path = tuple(keys)
            for known in [k for k in lines if k[:len(path)] == path]:
                del lines[known]
            for n in range(1, len(path)):            # a section the override made names it too (an unknown one)
                lines.setdefault(path[:n], f"{label} {item}")
            lines[path] = f"{label} {item}"
    return data


def _override_value(item: str, raw: str) -> Any:
    import yaml
    try:
        return yaml.safe_load(raw) if raw.strip() else ""
    except (yaml.YAMLError, RecursionError) as exc:
        problem = " ".join(str(getattr(exc, "problem", None) or exc).split())
        raise SpecError(f"--set '{item}': the value is not valid YAML ({problem})",
                        "quote it, e.g. --set name='\"a: b\"'") from None


def load_model(model: type[M], data: Any, source: str, lines: Lines | None = None) -> M:
    if not isinstance(data, dict):
        raise SpecError(f"{source}: expected a mapping of keys at the top level", "see docs/ for an example")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise validation_error(exc, source, lines or {}, model) from exc


def load_file(model: type[M], path: str | Path, overrides: list[str] | None = None) -> M:
    data, lines = parse_yaml(read_spec(path), str(path))
    return load_model(model, apply_overrides(data, overrides or [], lines), str(path), lines)


def read_spec(path: str | Path) -> str:
    """A spec file's text; SpecError when it is missing, unreadable or not UTF-8 text."""
    p = Path(path)
    if not p.is_file():
        raise SpecError(f"spec file '{p}' not found", "check the path")
    try:
        return p.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise SpecError(f"{p} is not a UTF-8 text file (byte {exc.start}): not a YAML spec",
                        "give the path of a YAML spec file") from None
    except OSError as exc:
        raise SpecError(f"cannot read spec file '{p}': {exc.strerror}", "check the path and its permissions") from None
