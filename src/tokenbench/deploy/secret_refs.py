"""Values a profile takes from the host environment by name (`secret_args`, `secret_env`).

Rendered commands, deployment state, stored profiles and reports hold only `${NAME}` placeholders
and names; the values are put in at spawn time and exist only in the engine process (its argv and
environment). An argv value is visible in `ps` on this host, as for any engine flag: prefer
`secret_env` where the engine reads its key from the environment (vLLM: VLLM_API_KEY).
"""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass, field

from tokenbench.errors import DeployError
from tokenbench.spec.deploy_profile import Profile
from tokenbench.spec.profile_args import flag_name, placeholder

API_KEY_FLAG = "api-key"      # llama.cpp, vLLM and SGLang all take the server's key as --api-key


def api_key_var(profile: Profile) -> str | None:
    """The host variable behind the server's `--api-key` (written `api-key` or `--api-key`), if any."""
    return next((var for key, var in profile.secret_args.items() if flag_name(key) == flag_name(API_KEY_FLAG)),
                None)


@dataclass(frozen=True)
class Secrets:
    values: dict[str, str] = field(default_factory=dict)    # host variable -> value
    env: dict[str, str] = field(default_factory=dict)       # engine variable -> value
    api_key: str | None = None                              # the server's --api-key, for readiness and facts

    def argv(self, argv: list[str]) -> list[str]:
        """The argv to spawn: placeholders replaced by their values, also inside a container's
        `bash -lc` script, where the placeholder was shell-quoted as one word."""
        out = []
        for item in argv:
            for var, value in self.values.items():
                ph = placeholder(var)
                if item == ph:
                    item = value
                elif shlex.quote(ph) in item:
                    item = item.replace(shlex.quote(ph), shlex.quote(value))
            out.append(item)
        return out


def resolve(profile: Profile) -> Secrets:
    """Read every named host variable; a missing one stops the deployment before anything starts."""
    wanted = {**{flag_name(k): v for k, v in profile.secret_args.items()}, **profile.secret_env}
    values = {}
    for what, var in wanted.items():
        value = os.environ.get(var)
        if not value:
            raise DeployError(f"profile '{profile.name}' takes {what} from ${var}, which is not set",
                              f"export {var}=<value> before deploying, or remove it from the profile")
        values[var] = value
    key_var = api_key_var(profile)
    return Secrets(values, {k: values[v] for k, v in profile.secret_env.items()},
                   values[key_var] if key_var else None)
