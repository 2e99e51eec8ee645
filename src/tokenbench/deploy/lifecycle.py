"""Start a server from a profile, wait until it is ready, read its facts, and stop it.

    with deployed(profile) as dep:        # stops the server on return, exception, Ctrl-C and SIGTERM
        run_something(dep.base_url, dep.facts)

`start()` leaves the server running (what `tokenbench deploy up` does); `stop_state()` stops one
recorded by any earlier invocation.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from tokenbench.deploy import local, readiness, state
from tokenbench.deploy.engines import engine_module, served_model
from tokenbench.deploy.state import DeploymentState
from tokenbench.errors import DeployError
from tokenbench.spec.deploy_profile import Profile
from tokenbench.spec.ports import PortRange
from tokenbench.spec.server_facts import ServerFacts

Say = Callable[[str], None]
GRACE_S = 10.0


@dataclass(kw_only=True)
class Deployment:
    profile: Profile
    state: DeploymentState
    directory: Path
    proc: subprocess.Popen | None = None
    facts: ServerFacts | None = None
    ready_s: float | None = None
    api_key: str | None = field(default=None, repr=False)    # the profile's secret --api-key, never stored
    stopped: bool = field(default=False, init=False)

    @property
    def base_url(self) -> str:
        return self.state.base_url

    @property
    def log_path(self) -> Path:
        return Path(self.state.log_path)

    def exit_code(self) -> int | None:
        if self.proc is not None:
            return self.proc.poll()
        return None if state.is_alive(self.state) else -1

    def stop(self, grace_s: float = GRACE_S) -> None:
        """SIGTERM, then SIGKILL after grace_s, to the whole process group; idempotent."""
        if self.stopped:
            return
        with _no_interrupts():
            _terminate(self.state, grace_s)
            if self.proc is not None:
                self.proc.poll()            # reap our child if psutil did not
            state.remove(self.directory, self.state.id)
            self.stopped = True


def _url(host: str, port: int) -> str:
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def command_for(profile: Profile, port: int) -> list[str]:
    """The exact argv that starts the server: the engine's command line, wrapped by the container
    runner (`tokenbench.deploy.container.run_argv(profile, port, engine_argv)`) for runs_in: container."""
    argv = engine_module(profile.engine).launch_argv(profile, port)
    if profile.runs_in == "container":
        argv = _container().run_argv(profile, port, argv)
    return argv


def _container():
    try:
        from tokenbench.deploy import container
    except ImportError:
        raise DeployError("this tokenbench cannot run container profiles yet",
                          "use a profile with runs_in: local") from None
    return container


def choose_port(profile: Profile, stable: bool = False, say: Say = lambda m: None, within: PortRange | None = None
                ) -> int:
    """The profile's `port` (refused when a process listens there, naming it; the TIME_WAIT sockets a
    stopped server leaves do not count, see deploy/ports.py; refused outside `within`, --ports); else, when `stable`
    (`deploy up`), the engine's usual port (vLLM 8000, SGLang 30000, llama.cpp 8080) unless it is taken or outside
    `within`, then a free one, saying so; else a free one (the first free of `within`)."""
    from tokenbench.deploy.ports import check_port, free_port  # a launch's: reading a deployment needs neither
    inside = within if within is not None and not within.any else None
    if profile.port is not None:
        if inside is not None and not inside.lo <= profile.port <= inside.hi:
            raise DeployError(f"profile '{profile.name}' fixes port {profile.port}, outside --ports {inside.text}",
                              "drop the profile's port (--set port=null) or give a range that holds it")
        check_port(profile.host, profile.port)
        return profile.port
    usual = getattr(engine_module(profile.engine), "DEFAULT_PORT", None) if stable else None
    if usual is None or (inside is not None and not inside.lo <= usual <= inside.hi):
        return free_port(profile.host, inside)
    try:
        check_port(profile.host, usual)
        return usual
    except DeployError:
        port = free_port(profile.host, inside)
        say(f"port {usual} (the usual {profile.engine} port) is in use on {profile.host}; using {port}")
        return port


@dataclass(frozen=True)
class LaunchOptions:
    """How tokenbench holds an engine it launches (not what the engine runs)."""

    tied: bool = False          # the engine dies with this process (see local.spawn)
    owned: bool = False         # this process tears it down on exit; a later tokenbench reaps it if this one
                                # dies first (reap_orphans)
    stable_port: bool = False   # the engine's usual port when it is free (see choose_port)
    ports: PortRange | None = None   # the ports it may listen on (--ports); None: any free one
    placement: local.Placement = local.Placement()   # a local engine's CPUs and priority (host/isolation.py)


def launch(profile: Profile, state_dir: str | Path | None = None, say: Say = lambda m: None,
           how: LaunchOptions = LaunchOptions()) -> Deployment:
    """Check, then start the engine process and record it; does not wait for readiness."""
    tied, owned = how.tied, how.owned
    if profile.runs_in == "local":
        say(f"model: {profile.model.bundled or profile.model.path}")
        from tokenbench.local_engines import models  # a local model's file: only when one is launched
        models.resolve(profile.model)                  # a missing model fails here, before launch
    port = choose_port(profile, how.stable_port, say, how.ports)
    argv = command_for(profile, port)
    if profile.runs_in == "container":
        _container().preflight(profile, port)          # no docker engine: fails here, nothing created
    from tokenbench.deploy import secret_refs
    secret = secret_refs.resolve(profile)                  # a missing host variable fails here, before launch
    directory = state.state_dir(state_dir)
    reap_orphans(directory, say)
    dep_id = f"{profile.name}-{port}"
    log_path = (directory / f"{dep_id}.log").resolve()
    say(f"launching {profile.engine} on {_url(profile.host, port)} (log: {log_path})")
    placement = how.placement if profile.runs_in == "local" else local.Placement()
    proc = local.spawn(secret.argv(argv), {**profile.env, **secret.env}, log_path, tied, placement)
    try:
        st = DeploymentState(id=dep_id, profile=profile.name, engine=profile.engine, pid=proc.pid,
                             pgid=proc.pid, create_time=local.create_time(proc.pid), host=profile.host, port=port,
                             base_url=_url(profile.host, port), log_path=str(log_path),
                             started_at=datetime.now(timezone.utc).isoformat(timespec="seconds"), argv=argv,
                             runs_in=profile.runs_in, owner_pid=os.getpid() if owned else None,
                             owner_create_time=local.create_time(os.getpid()) if owned else None)
        dep = Deployment(profile=profile, state=st, directory=directory, proc=proc, api_key=secret.api_key)
        state.save(directory, st)
    except BaseException:
        with _no_interrupts():
            local.terminate(proc.pid, proc.pid, local.create_time(proc.pid), GRACE_S)
            proc.poll()
        raise
    return dep


def start(profile: Profile, state_dir: str | Path | None = None, say: Say = lambda m: None,
          on_launch: Callable[[Deployment], None] = lambda dep: None, how: LaunchOptions = LaunchOptions()
          ) -> Deployment:
    """Launch, wait until ready, read the facts. Any failure or interruption stops the process.
    `on_launch` sees the deployment as soon as its process exists (see `stop_on_signal`)."""
    dep = launch(profile, state_dir, say, how)
    try:
        on_launch(dep)
        say(f"waiting for {dep.base_url}{profile.readiness.path} (up to {profile.readiness.timeout_s:g} s)")
        dep.ready_s = readiness.wait_ready(dep.base_url, profile.readiness, served_model(profile),
                                           dep.exit_code, dep.log_path, dep.api_key)
        dep.facts = engine_module(profile.engine).read_facts(dep.base_url, dep.api_key)
        say(f"ready in {dep.ready_s:.1f} s: {dep.base_url}")
    except BaseException:
        dep.stop()
        raise
    return dep


@contextmanager
def deployed(profile: Profile, state_dir: str | Path | None = None, say: Say = lambda m: None,
             grace_s: float = GRACE_S, how: LaunchOptions = LaunchOptions()) -> Iterator[Deployment]:
    """The server for the duration of the block; torn down on any exit, Ctrl-C or SIGTERM. `how`: its port (the
    usual one, the ranges of --ports) and a local engine's CPUs and priority; it is tied to this process and
    owned by it."""
    with stop_on_signal() as live:
        dep = start(profile, state_dir, say, live.append,
                    dataclasses.replace(how, tied=profile.runs_in == "local", owned=True))
        try:
            yield dep
        finally:
            say(f"stopping {dep.state.id}")
            dep.stop(grace_s)


def stop_state(st: DeploymentState, directory: Path, grace_s: float = GRACE_S) -> None:
    """Stop a deployment recorded by any invocation (no-op for one that already exited)."""
    with _no_interrupts():
        _terminate(st, grace_s)
        state.remove(directory, st.id)


def reap_orphans(directory: Path, say: Say = lambda m: None, grace_s: float = GRACE_S) -> list[str]:
    """Stop what a dead tokenbench left behind: deployments it owned (a sweep or the demo, killed by
    SIGKILL or a crash) whose owner is gone. A local engine died with it already (PR_SET_PDEATHSIG);
    a container did not, and would hold the accelerator while a `--resume` starts another one."""
    reaped = []
    for st in state.load_all(directory):
        if st.owner_pid is None or local.leader(st.owner_pid, st.owner_create_time or 0.0) is not None:
            continue
        say(f"stopping {st.id}, left running by tokenbench process {st.owner_pid}, which is gone")
        stop_state(st, directory, grace_s)
        reaped.append(st.id)
    return reaped


def _terminate(st: DeploymentState, grace_s: float) -> None:
    local.terminate(st.pid, st.pgid, st.create_time, grace_s)
    if st.runs_in == "container":
        cleanup = getattr(_container(), "cleanup", None)   # e.g. `docker rm -f` a container left behind
        if cleanup is not None:
            cleanup(st)


# ---- signals ----

@contextmanager
def stop_on_signal() -> Iterator[list[Deployment]]:
    """While active (main thread only), SIGINT and SIGTERM first stop every deployment appended to
    the yielded list, then raise KeyboardInterrupt. Stopping first bounds the time to exit: whatever
    the interrupted code still does (say, requests it finishes before honouring the cancellation)
    fails fast against a stopped server, and no engine outlives tokenbench."""
    live: list[Deployment] = []
    if threading.current_thread() is not threading.main_thread():
        yield live
        return

    def handler(signum, frame) -> None:
        for dep in live:
            dep.stop()
        raise KeyboardInterrupt(f"signal {signum}")

    saved = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield live
    finally:
        for s, previous in saved.items():
            signal.signal(s, previous)


@contextmanager
def _no_interrupts() -> Iterator[None]:
    """Defer SIGINT/SIGTERM during teardown (it takes well under the grace period)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pending: list[int] = []
    saved = {s: signal.signal(s, lambda signum, _: pending.append(signum)) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, handler in saved.items():
            signal.signal(s, handler)
        if pending:
            raise KeyboardInterrupt(f"signal {pending[0]}")
