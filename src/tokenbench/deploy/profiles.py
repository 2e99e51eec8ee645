"""Deployment profiles by name (built-ins in deploy/profiles/*.yaml) or by path, with --set overrides."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import yaml

from tokenbench.errors import SpecError
from tokenbench.spec.deploy_profile import Profile
from tokenbench.spec.fields import Key
from tokenbench.spec.fields import fields as spec_fields
from tokenbench.spec.loader import apply_overrides, load_model, parse_yaml

SUFFIXES = (".yaml", ".yml")


def _builtin_dir():
    return resources.files("tokenbench.deploy") / "profiles"


def builtin_names() -> list[str]:
    return sorted(f.name.rsplit(".", 1)[0] for f in _builtin_dir().iterdir() if f.name.endswith(SUFFIXES))


def _source(ref: str) -> tuple[str, str]:
    """(YAML text, name used in error messages) of a built-in name or a file path."""
    path = Path(ref).expanduser()
    if path.is_file():
        return path.read_text(), str(path)
    if ref in builtin_names():
        entry = _builtin_dir() / f"{ref}.yaml"
        return entry.read_text(), f"{ref} (built-in {entry})"
    if path.suffix in SUFFIXES or "/" in ref:
        raise SpecError(f"profile file '{ref}' not found", "check the path")
    raise SpecError(f"no profile named '{ref}'",
                    f"use a profile file path or a built-in: {', '.join(builtin_names())} (`tokenbench profiles`)")


def load_profile(ref: str, overrides: list[str] | tuple[str, ...] = (), label: str = "--set") -> Profile:
    """A built-in profile name or a YAML path, with `key.sub=value` overrides applied before validation
    (an error in one names it as `label item`)."""
    text, source = _source(ref)
    data, lines = parse_yaml(text, source)
    if not isinstance(data, dict):
        raise SpecError(f"{source}: expected a mapping of keys at the top level", "see docs/deploy.md")
    return load_model(Profile, apply_overrides(data, list(overrides), lines, label), source, lines)


def listing() -> list[tuple[str, str]]:
    """(name, one-line description) of every built-in profile; a broken one says so instead."""
    out = []
    for name in builtin_names():
        try:
            out.append((name, load_profile(name).description))
        except SpecError as exc:
            out.append((name, f"INVALID: {exc.message}"))
    return out


def to_yaml(profile: Profile) -> str:
    return yaml.safe_dump(profile.model_dump(mode="json", exclude_none=True), sort_keys=False, width=100)


def fields() -> list[Key]:
    """Every profile key with its type, default and description, for `tokenbench profiles --fields`."""
    return spec_fields(Profile)
