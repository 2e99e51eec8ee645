"""A profile's engine flags as argv words: the one rendering for the launch, dry runs and reports. Secret
args show as `${VAR}` placeholders; their values are put in at spawn time (deploy/secret_refs.py)."""

from __future__ import annotations

from tokenbench.spec.deploy_profile import ArgValue


def placeholder(var: str) -> str:
    return "${" + var + "}"


def flag_name(key: str) -> str:
    return key if key.startswith("-") else f"--{key}"


def flag_args(args: dict[str, ArgValue]) -> list[str]:
    """Profile `args` -> argv: `{k: v}` -> `--k v`, `true` -> bare `--k`, `null`/`false` -> nothing."""
    out: list[str] = []
    for key, value in args.items():
        flag = flag_name(key)
        if value is None or value is False:
            continue
        out += [flag] if value is True else [flag, str(value)]
    return out


def flag_pairs(words: list[str]) -> dict[str, str | bool]:
    """argv -> `{name: value}`, the inverse of `flag_args` as an engine's launcher reads it: `--k v` -> `{k: v}`,
    a bare `--k` -> `{k: True}`, dashes in names as underscores; ValueError on a word that is neither."""
    out: dict[str, str | bool] = {}
    i = 0
    while i < len(words):
        if not words[i].startswith("--"):
            raise ValueError(f"unexpected argument '{words[i]}'")
        name = words[i][2:].replace("-", "_")
        if i + 1 < len(words) and not words[i + 1].startswith("--"):
            out[name], i = words[i + 1], i + 2
        else:
            out[name], i = True, i + 1
    return out


def secret_flag_list(secret_args: dict[str, str]) -> list[str]:
    """`--flag ${VAR}` for each secret arg: what every rendering shows."""
    return [x for key, var in secret_args.items() for x in (flag_name(key), placeholder(var))]


def render_args(args: dict[str, ArgValue], secret_args: dict[str, str], extra_args: list) -> list[str]:
    """The one rendering of a profile's flags (argv, dry runs, reports): args, secret args as `${VAR}`,
    extra args verbatim."""
    return flag_args(args) + secret_flag_list(secret_args) + [str(a) for a in extra_args]


def is_number(word: str) -> bool:
    """A command-line word that is a number (a negative one is a value, not a flag)."""
    try:
        float(word)
    except ValueError:
        return False
    return True
