"""Container profiles: the `docker run` argv (a list, never a shell string) and a compose file.

One plan, two renderings: `docker_argv()` (what `deploy up` runs and `--dry-run` prints) and
`render_compose()`. The container runs in the foreground under the docker CLI (`--rm`), so the
lifecycle's process handling applies to it; `cleanup()` removes one left behind after a kill.

Quoting: every profile value (env, args, paths, image) is one argv item; docker receives it verbatim
and no shell sees it. A shell runs inside the container only when the profile needs one (setup lines
such as `source .../set_env.sh`, or host tuning applied in the container): then the command is
`bash -lc <one string>` whose last line is `exec <engine argv>` with every item `shlex.quote`d, so a
value such as `x; rm -rf /` or `--foo --bar` stays one argument. `setup` lines themselves are shell
code written by the profile's author and run as written.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from tokenbench.errors import DeployError, UsageError
from tokenbench.spec.deploy_profile import Container, HostTuning, Profile

ASCEND_CONTROL_DEVICES = ("/dev/davinci_manager", "/dev/devmm_svm", "/dev/hisi_hdc")
VISIBLE_ENV = {"ascend": "ASCEND_RT_VISIBLE_DEVICES", "nvidia": "CUDA_VISIBLE_DEVICES"}
LABEL = "tokenbench.profile"
DOCKER_TIMEOUT_S = 20
_NAME_BAD = re.compile(r"[^a-zA-Z0-9_.-]")


@dataclass(slots=True, kw_only=True)
class Plan:
    """Everything docker needs, before rendering as argv or compose."""

    name: str
    image: str
    profile: str
    port: int
    flags: list[str] = field(default_factory=list)      # --privileged --init --network host ...
    devices: list[str] = field(default_factory=list)
    gpus: list[int] | None = None
    volumes: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    secret_env: dict[str, str] = field(default_factory=dict)   # engine variable -> host variable (by name)
    ports: list[str] = field(default_factory=list)
    extra_args: list[str] = field(default_factory=list)
    entrypoint: str = ""
    args: list[str] = field(default_factory=list)
    script: str | None = None                            # the bash -lc string, when a shell is needed


# ---- plan ----

def container_name(profile: Profile, port: int) -> str:
    given = profile.container.name if profile.container else None
    return _NAME_BAD.sub("-", given or f"tokenbench-{profile.name}-{port}")


def visible_devices(profile: Profile) -> dict[str, str]:
    """The accelerator selection variable. A privileged container sees every host device, so the
    host ids apply; otherwise only the mapped ones exist, numbered from 0."""
    var = VISIBLE_ENV.get(profile.accelerator)
    if var is None:
        return {}
    ids = profile.device_ids()
    privileged = bool(profile.container and profile.container.privileged)
    value = ",".join(str(i) for i in (ids if privileged else range(len(ids))))
    given = profile.env.get(var)
    if given is not None and given != value:
        raise UsageError(f"profile '{profile.name}' sets {var}={given} in env, but its devices give {value}",
                         f"remove {var} from env; choose devices with `devices:` or --set parallelism.tp=N")
    return {var: value}


def tuning_lines(tuning: HostTuning | None) -> list[str]:
    """Study A's in-container host tuning, as shell lines (values are numbers or quoted)."""
    if tuning is None or not tuning.in_container:
        return []
    lines = []
    if tuning.cpu_governor:
        governor = shlex.quote(tuning.cpu_governor)
        lines.append(f"echo {governor} | tee /sys/devices/system/cpu/cpu*/cpufreq/scaling_governor")
    for key, value in (("vm.swappiness", tuning.swappiness), ("kernel.numa_balancing", tuning.numa_balancing),
                       ("kernel.sched_migration_cost_ns", tuning.sched_migration_cost_ns),
                       ("vm.nr_hugepages", tuning.hugepages)):
        if value is not None:
            lines.append(f"sysctl -w {key}={int(value)}")
    return lines


def plan(profile: Profile, port: int, engine_argv: list[str]) -> Plan:
    c = profile.container
    if profile.runs_in != "container" or c is None:
        raise UsageError(f"profile '{profile.name}' does not run in a container",
                         "use a profile with runs_in: container")
    if c.network != "host" and profile.host in ("127.0.0.1", "localhost", "::1"):
        raise UsageError(f"profile '{profile.name}' binds {profile.host} inside a container on network "
                         f"'{c.network or 'bridge'}', where it cannot be reached", "set host: 0.0.0.0")
    p = Plan(name=container_name(profile, port), image=c.image, profile=profile.name, port=port)
    p.flags = _flags(c)
    p.devices, p.gpus = _devices(profile)
    p.volumes = list(c.volumes)
    p.env = {**visible_devices(profile), **profile.env}
    p.secret_env = dict(profile.secret_env)
    p.ports = [] if c.network == "host" else [f"{port}:{port}"]
    p.extra_args = list(c.extra_args)
    shell = tuning_lines(profile.host_tuning) + list(profile.setup)
    if shell:
        p.entrypoint, p.script = "bash", "\n".join(shell + ["exec " + shlex.join(engine_argv)])
        p.args = ["-lc", p.script]
    else:
        p.entrypoint, p.args = engine_argv[0], list(engine_argv[1:])
    return p


def _flags(c) -> list[str]:
    out = ["--privileged"] if c.privileged else []
    out += ["--init"] if c.init else []
    for flag, value in (("--network", c.network), ("--ipc", c.ipc), ("--shm-size", c.shm_size)):
        if value:
            out += [flag, value]
    return out


def _container(profile: Profile) -> Container:
    """The profile's container section (a profile that runs in a container has one: the spec requires it)."""
    if profile.container is None:
        raise UsageError(f"profile '{profile.name}' does not run in a container", "use a profile with runs_in: container")
    return profile.container


def _devices(profile: Profile) -> tuple[list[str], list[int] | None]:
    c = _container(profile)
    if profile.accelerator == "ascend":
        control = ASCEND_CONTROL_DEVICES if c.control_devices is None else c.control_devices
        return [f"/dev/davinci{i}" for i in profile.device_ids()] + list(control) + list(c.devices), None
    if profile.accelerator == "nvidia":
        return list(c.devices), profile.device_ids()
    return list(c.devices), None


# ---- renderings ----

def argv_of(p: Plan) -> list[str]:
    argv = ["docker", "run", "--rm", "--name", p.name, "--label", f"{LABEL}={p.profile}", *p.flags]
    for d in p.devices:
        argv += ["--device", d]
    if p.gpus is not None:
        argv += ["--gpus", '"device=' + ",".join(map(str, p.gpus)) + '"']   # quotes: docker reads it as CSV
    for v in p.volumes:
        argv += ["-v", v]
    for k, v in p.env.items():
        argv += ["-e", f"{k}={v}"]
    for k in p.secret_env:
        argv += ["-e", k]          # no value: docker copies it from its own environment (set at spawn)
    for port in p.ports:
        argv += ["-p", port]
    return argv + p.extra_args + ["--entrypoint", p.entrypoint, p.image, *p.args]


def _engine_argv(profile: Profile, port: int) -> list[str]:
    from tokenbench.deploy.engines import engine_module
    return engine_module(profile.engine).launch_argv(profile, port)


def docker_argv(profile: Profile, port: int) -> list[str]:
    """The complete `docker run` argv for this profile on this port (pure: runs nothing)."""
    return argv_of(plan(profile, port, _engine_argv(profile, port)))


def deploy_dry_run(profile: Profile, port: int) -> list[str]:
    """What `deploy up --dry-run` prints (with `format_command`); needs no docker engine."""
    return docker_argv(profile, port)


def format_command(argv: list[str]) -> str:
    """A pasteable shell rendering, one option per line (each item shell-quoted)."""
    lines: list[list[str]] = [[]]
    for i, item in enumerate(argv):
        if i > 2 and item.startswith("-"):
            lines.append([])
        lines[-1].append(shlex.quote(item))
    return " \\\n    ".join(" ".join(line) for line in lines)


def render_compose(profile: Profile, port: int | None = None) -> str:
    """A docker compose file with the same container (`docker compose up` runs it)."""
    port = port or profile.port
    if port is None:
        raise UsageError(f"profile '{profile.name}' has no port, which a compose file needs", "pass --set port=N")
    p = plan(profile, port, _engine_argv(profile, port))
    service = _secret_refs(_dollars(_compose_service(profile, p)), profile, p)
    body = yaml.dump({"services": {p.name: service}}, Dumper=_Dumper, sort_keys=False, width=1000,
                     default_flow_style=False, allow_unicode=True)
    return _compose_head(profile, p, port) + body


def _compose_service(profile: Profile, p: Plan) -> dict:
    """The compose service of the container plan `p`, every value as docker run would get it."""
    service: dict = {"image": p.image, "container_name": p.name, "labels": {LABEL: p.profile}}
    service.update(_compose_flags(profile))
    if p.devices:
        service["devices"] = p.devices
    if p.volumes:
        service["volumes"] = p.volumes
    if p.env or p.secret_env:
        service["environment"] = dict(p.env)
    if p.ports:
        service["ports"] = p.ports
    service["entrypoint"] = [p.entrypoint] + (["-lc"] if p.script is not None else [])
    service["command"] = [p.script] if p.script is not None else p.args
    if p.gpus is not None:
        service["deploy"] = {"resources": {"reservations": {"devices": [
            {"driver": "nvidia", "device_ids": [str(g) for g in p.gpus], "capabilities": ["gpu"]}]}}}
    return service


def _secret_refs(service: dict, profile: Profile, p: Plan) -> dict:
    """Secrets as `${VAR}` references that compose fills from the host at `up` (their values stay out)."""
    for k, var in p.secret_env.items():
        service["environment"][k] = "${" + var + "}"
    if "command" in service:
        service["command"] = [_undollar_secrets(c, profile) for c in service["command"]]
    return service


def _compose_head(profile: Profile, p: Plan, port: int) -> str:
    head = f"# generated by tokenbench from profile '{profile.name}' (port {port})\n"
    if p.extra_args:
        head += f"# not translated (docker run extra_args): {shlex.join(p.extra_args)}\n"
    if profile.secret_args or profile.secret_env:
        names = sorted({*profile.secret_args.values(), *profile.secret_env.values()})
        head += f"# export {', '.join(names)} before `docker compose up`: their values are not in this file\n"
    return head


def _undollar_secrets(text: str, profile: Profile) -> str:
    """Let compose interpolate the secret args' `${VAR}` placeholders (every other `$` stays literal)."""
    for var in profile.secret_args.values():
        text = text.replace("$${" + var + "}", "${" + var + "}")
    return text


class _Dumper(yaml.SafeDumper):
    """Multi-line strings (the bash -lc script) as literal blocks, as written."""


def _str(dumper: yaml.SafeDumper, text: str) -> yaml.ScalarNode:
    return dumper.represent_scalar("tag:yaml.org,2002:str", text, style="|" if "\n" in text else None)


_Dumper.add_representer(str, _str)


def _compose_flags(profile: Profile) -> dict:
    c = _container(profile)
    out: dict = {}
    if c.privileged:
        out["privileged"] = True
    if c.init:
        out["init"] = True
    if c.network:
        out["network_mode"] = c.network
    if c.ipc:
        out["ipc"] = c.ipc
    if c.shm_size:
        out["shm_size"] = c.shm_size
    return out


def _dollars(value):
    """Compose interpolates `$VAR`; `$$` is a literal dollar."""
    if isinstance(value, str):
        return value.replace("$", "$$")
    if isinstance(value, list):
        return [_dollars(v) for v in value]
    if isinstance(value, dict):
        return {k: _dollars(v) for k, v in value.items()}
    return value


# ---- docker engine ----

def docker_available() -> tuple[bool, str]:
    """(True, 'docker engine 28.2.2') or (False, why) -- asks the daemon, not just the CLI."""
    if shutil.which("docker") is None:
        return False, "the docker CLI is not installed (no 'docker' on PATH)"
    try:
        done = subprocess.run(["docker", "version", "--format", "{{.Server.Version}}"], capture_output=True,
                              text=True, timeout=DOCKER_TIMEOUT_S, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return False, f"no docker engine answered within {DOCKER_TIMEOUT_S} s"
    except OSError as exc:
        return False, f"the docker CLI could not run ({exc.strerror or exc})"
    if done.returncode != 0 or not done.stdout.strip():
        why = _last_line(done.stderr) or f"docker version exited with {done.returncode}"
        return False, f"no docker engine is reachable ({why})"
    return True, f"docker engine {done.stdout.strip()}"


def _last_line(text: str) -> str:
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    return lines[-1] if lines else ""


def _docker(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["docker", *args], capture_output=True, text=True, timeout=DOCKER_TIMEOUT_S,
                          stdin=subprocess.DEVNULL)


def check_engine() -> None:
    ok, why = docker_available()
    if not ok:
        raise DeployError(f"cannot start the container: {why}",
                          "start the docker daemon (e.g. `systemctl start docker`) or set DOCKER_HOST; "
                          "`tokenbench deploy up PROFILE --dry-run` prints the command without running it")


def check_name(name: str) -> None:
    """Remove a stopped leftover of ours with this name; refuse a running one or one not ours."""
    found = _docker("ps", "-a", "--filter", f"name=^/{name}$",
                    "--format", '{{.State}} {{.Label "' + LABEL + '"}}')
    fields = found.stdout.split()
    if not fields:
        return
    if len(fields) < 2:
        raise DeployError(f"a container named '{name}' exists and was not started by tokenbench",
                          f"remove it (`docker rm -f {name}`) or set container.name in the profile")
    if fields[0] == "running":
        raise DeployError(f"container '{name}' is already running",
                          f"stop it with `tokenbench deploy down` or `docker rm -f {name}`")
    _docker("rm", "-f", name)


def run_argv(profile: Profile, port: int, engine_argv: list[str]) -> list[str]:
    """The `docker run` argv the lifecycle spawns for a container profile (pure: runs nothing).
    Call `preflight(profile, port)` first for a clear error when no docker engine answers."""
    return argv_of(plan(profile, port, engine_argv))


def preflight(profile: Profile, port: int) -> None:
    """Before spawning: DeployError unless a docker engine answers (nothing is created then)."""
    check_engine()
    check_name(container_name(profile, port))


def start(profile: Profile, port: int, log_path: str | Path) -> subprocess.Popen:
    """Run the container in the foreground under the docker CLI, output to log_path.
    Refuses (DeployError, nothing created, no log written) when no docker engine answers."""
    from tokenbench.deploy import local
    argv = run_argv(profile, port, _engine_argv(profile, port))     # render errors come first
    preflight(profile, port)
    return local.spawn(argv, {}, Path(log_path))


def name_in(argv: list[str]) -> str | None:
    """The container name in a `docker run` argv recorded earlier."""
    for i, item in enumerate(argv[:-1]):
        if item == "--name":
            return argv[i + 1]
    return None


def remove(name: str) -> None:
    """`docker rm -f NAME`; quiet when it is already gone or docker is unreachable."""
    if shutil.which("docker") is None:
        return
    try:
        _docker("rm", "-f", name)
    except (subprocess.TimeoutExpired, OSError):
        pass


def cleanup(st) -> None:
    """Called by the lifecycle after stopping a container deployment: remove what the kill left."""
    name = name_in(list(getattr(st, "argv", []) or []))
    if name:
        remove(name)
