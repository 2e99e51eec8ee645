"""Where a sweep's server comes from: an existing URL, or a profile deployed per server config."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tokenbench.errors import DeployError
from tokenbench.spec.deploy_profile import Profile
from tokenbench.spec.ports import PortRange
from tokenbench.spec.server_facts import GraphCapture, ServerFacts
from tokenbench.spec.study import Target
from tokenbench.study.plan import ServerConfig

if TYPE_CHECKING:
    from tokenbench.deploy.lifecycle import Deployment
    from tokenbench.host.isolation import Isolation
    from tokenbench.logs.launch import LaunchFailure


@dataclass
class Server:
    base_url: str
    facts: ServerFacts
    profile: Profile | None = None
    deployment: Deployment | None = None     # when tokenbench started it
    traced: bool = False                     # deployed exporting its request spans to tokenbench's receiver

    def death(self) -> str | None:
        """None while the server lives; else what happened (exit code and log tail, or no answer)."""
        if self.deployment is not None:
            code = self.deployment.exit_code()
            if code is None:
                return None
            from tokenbench.deploy.readiness import log_tail
            tail = log_tail(self.deployment.log_path, 5).replace("\n", " | ")
            return f"the engine process exited with code {code}; log tail: {tail}"
        from tokenbench.client import api
        status, _ = api.call(self.base_url, "/v1/models", quiet=True, timeout=5)
        if status in (200, 401, 403):        # an answer that asks for a key comes from a live server
            return None
        return f"{self.base_url} stopped answering (/v1/models: {status or 'no connection'})"


def launch_failure(exc: DeployError) -> LaunchFailure:
    """Why a launch failed: the cause read from the engine's log (when it started one) and the error."""
    from pathlib import Path

    from tokenbench.deploy.readiness import log_text
    from tokenbench.logs.launch import classify
    log = getattr(exc, "log", None)
    failure = classify(log_text(Path(log)) if log else "", exc.message, log)
    return failure.model_copy(update={"message": exc.one_line().split("\\n")[0]})


DEATH_LINES = 100     # the end of a dead engine's log its cause is read from (what it did before is no cause)


def death_cause(seen: str, log: str | None) -> LaunchFailure:
    """Why an engine that had started died: the cause read from the end of its log (the lines it wrote as it
    died) as a failed launch's is, with what was seen of it (its exit code)."""
    from pathlib import Path

    from tokenbench.deploy.readiness import log_tail
    from tokenbench.logs.launch import classify
    return classify(log_tail(Path(log), DEATH_LINES) if log else "", seen, log)


def load_profile(target: Target, config: ServerConfig) -> Profile:
    from tokenbench.deploy.profiles import load_profile as _load
    name = target.profile or ""
    return _load(name, [*target.set, *config.overrides], f"--vary/--profile-set (vary, target.set) of {name}:")


def expected_ctx(profile: Profile) -> int | None:
    """Per-sequence context a profile will give, when it can be known before launch (the engine's adapter)."""
    from tokenbench.deploy.engines import expected_ctx as adapter_ctx
    return adapter_ctx(profile)


def planned_graphs(target: Target, config: ServerConfig) -> GraphCapture | None:
    """The decode graphs a config's profile will capture, as its flags give them (None: no profile, or an
    engine without such a rule); before anything is deployed."""
    if not target.profile:
        return None
    from tokenbench.deploy.engines import graph_capture
    return graph_capture(load_profile(target, config))


Tracing = Callable[[Profile], "Profile | None"]


def _untraced(profile: Profile) -> Profile | None:
    return None


@contextlib.contextmanager
def server_for(target: Target, config: ServerConfig, log=print, isolation: Isolation | None = None,
               tracing: Tracing = _untraced) -> Iterator[Server]:
    """The config's server: the target's URL, or its profile deployed (a local engine placed as `isolation`
    plans it; `tracing`: the profile exporting its request spans, or None to deploy it as it is)."""
    from tokenbench.deploy import facts_for
    if target.base_url:
        yield Server(target.base_url.rstrip("/"), facts_for(target.base_url))
        return
    from tokenbench.deploy.lifecycle import LaunchOptions, deployed
    from tokenbench.deploy.local import Placement
    profile = load_profile(target, config)
    with_traces = tracing(profile)
    log(f"deploying {profile.name} [{config.name}]" + (" (exporting its request spans)" if with_traces else ""))
    placement = isolation.engine if isolation is not None else Placement()
    ports = PortRange.parse(target.ports) if target.ports else None
    with deployed(with_traces or profile, how=LaunchOptions(placement=placement, ports=ports)) as dep:
        yield Server(dep.base_url, dep.facts or ServerFacts(engine=profile.engine), profile, dep,
                     with_traces is not None)
