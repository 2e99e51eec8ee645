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
