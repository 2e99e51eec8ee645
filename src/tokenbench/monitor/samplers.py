"""Samplers: each reads one signal source now and returns samples stamped on the requests' clock.

A sampler has `name`, `available() -> Availability` (falsy with a reason when its tool or endpoint
is missing) and `sample() -> list[Sample]` (synchronous and quick: subprocesses and HTTP have short
timeouts). Failures raise TokenbenchError subclasses; the runner reports them and carries on.
Each sample's time is the midpoint of the read, so a slow tool does not skew its samples late.
"""

from __future__ import annotations

import shutil
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import psutil

from tokenbench.client.api import UNANSWERED
from tokenbench.errors import MeasurementError, TargetError, UsageError
from tokenbench.monitor import nvml
from tokenbench.monitor.prometheus import MetricNames, load_parser, parse_prometheus, server_samples
from tokenbench.monitor.rapl import POWERCAP, Rapl
from tokenbench.monitor.samples import Sample, make_samples

Clock = Callable[[], int]
_MB = 1024 * 1024


@dataclass(frozen=True, slots=True)
class Availability:
    ok: bool
    reason: str = ""

    def __bool__(self) -> bool:
        return self.ok


class Sampler(Protocol):
    name: str

    def available(self) -> Availability: ...

    def sample(self) -> list[Sample]: ...


class _CommandSampler:
    """Runs a command-line tool with a timeout and parses its stdout. A tool's parser is imported once the
    tool is found: a host without it does not load it."""

    name = ""
    tool = ""               # the program, looked up on PATH

    def __init__(self, timeout_s: float = 5.0, clock: Clock = time.perf_counter_ns) -> None:
        self.timeout_s = timeout_s
        self.clock = clock

    def available(self) -> Availability:
        if shutil.which(self.tool) is None:
            return Availability(False, f"`{self.tool}` not found on PATH")
        return Availability(True)

    def sample(self) -> list[Sample]:
        start = self.clock()
        text = self._run()
        return self._parse(text, (start + self.clock()) // 2)

    def _run(self) -> str:
        try:
            done = subprocess.run(self.command(), capture_output=True, text=True, timeout=self.timeout_s,
                                  check=False, errors="replace")
        except subprocess.TimeoutExpired as exc:
            raise MeasurementError(f"{self.name} took over {self.timeout_s} s",
                                   "the tool hangs; check the driver, or raise the timeout") from exc
        except OSError as exc:
            raise MeasurementError(f"{self.name} could not run: {exc}", "check that the tool is executable") from exc
        if done.returncode != 0:
            raise MeasurementError(f"{self.name} exited with {done.returncode}: {done.stderr.strip()[:200]}",
                                   "run the command by hand to see why it fails")
        return done.stdout

    def command(self) -> tuple[str, ...]:
        raise NotImplementedError

    def _parse(self, text: str, t_ns: int) -> list[Sample]:
        raise NotImplementedError


class NpuSmiSampler(_CommandSampler):
    name = "npu-smi"
    tool = "npu-smi"

    def command(self) -> tuple[str, ...]:
        return (self.tool, "info")

    def _parse(self, text: str, t_ns: int) -> list[Sample]:
        from tokenbench.monitor.npu_smi import npu_samples, parse_npu_smi
        return npu_samples(parse_npu_smi(text), t_ns)


class NvidiaSmiSampler(_CommandSampler):
    """NVML (`pynvml`, package nvidia-ml-py) when it imports and initialises, else nvidia-smi CSV."""

    name = "nvidia-smi"
    tool = "nvidia-smi"

    def __init__(self, timeout_s: float = 5.0, clock: Clock = time.perf_counter_ns,
                 use_nvml: bool | None = None) -> None:
        super().__init__(timeout_s, clock)
        self.use_nvml = use_nvml    # None: decided on first use

    def available(self) -> Availability:
        return Availability(True) if self._nvml() else super().available()

    def command(self) -> tuple[str, ...]:
        from tokenbench.monitor.nvidia_smi import COMMAND
        return COMMAND

    def sample(self) -> list[Sample]:
        if not self._nvml():
            return super().sample()
        from tokenbench.monitor.nvidia_smi import gpu_samples
        start = self.clock()
        readings = nvml.readings()
        return gpu_samples(readings, (start + self.clock()) // 2)

    def _nvml(self) -> bool:
        if self.use_nvml is None:
            self.use_nvml = nvml.init()
        return self.use_nvml

    def _parse(self, text: str, t_ns: int) -> list[Sample]:
        from tokenbench.monitor.nvidia_smi import gpu_samples, parse_nvidia_smi
        return gpu_samples(parse_nvidia_smi(text), t_ns)


class PrometheusSampler:
    """Scrapes `<base_url>/metrics` with urllib and a short timeout; `names`: the engines' metric names
    (deploy.engines.metric_names())."""

    name = "server"
    on_server = True        # the server does the work of a scrape: the monitor keeps its share small

    def __init__(self, base_url: str, names: MetricNames, engine: str | None = None, timeout_s: float = 2.0,
                 clock: Clock = time.perf_counter_ns) -> None:
        url = base_url.rstrip("/")
        self.url = url if url.endswith("/metrics") else url + "/metrics"
        self.names = names
        self.engine = None if engine in (None, "", "auto") else engine
        self.timeout_s = timeout_s
        self.clock = clock

    def available(self) -> Availability:
        try:
            self._get()
        except TargetError as exc:
            return Availability(False, exc.message)
        load_parser()                 # in the caller's thread, before the monitor's starts
        return Availability(True)

    def sample(self) -> list[Sample]:
        start = self.clock()
        text = self._get()
        t_ns = (start + self.clock()) // 2
        try:
            metrics = parse_prometheus(text, self.names, self.engine)
        except UsageError as exc:
            raise TargetError(f"{self.url} answered something that is not metrics: {exc.message}",
                              "point --base-url at the inference server") from exc
        return server_samples(metrics, t_ns)

    def _get(self) -> str:
        try:
            with urllib.request.urlopen(self.url, timeout=self.timeout_s) as answer:
                return answer.read().decode("utf-8", errors="replace")
        except urllib.error.HTTPError as exc:
            raise TargetError(f"{self.url} answered HTTP {exc.code}",
                              "start the server with its metrics endpoint enabled") from exc
        except UNANSWERED as exc:
            raise TargetError(f"cannot read {self.url}: {exc}", "check that the server is up") from exc


class HostSampler:
    """Host CPU and memory (psutil), the CPU packages' energy counters where the host exposes them (RAPL,
    monitor/rapl.py); optionally one process (with its children), e.g. the server."""

    name = "host"

    def __init__(self, pid: int | None = None, clock: Clock = time.perf_counter_ns,
                 powercap: str | Path = POWERCAP) -> None:
        self.pid = pid
        self.clock = clock
        self.rapl = Rapl(powercap)
        self._procs: dict[int, psutil.Process] = {}
        psutil.cpu_percent(interval=None)  # the first call only starts the measurement window

    def available(self) -> Availability:
        if self.pid is not None and not psutil.pid_exists(self.pid):
            return Availability(False, f"process {self.pid} does not exist")
        if self.pid is not None:
            self._process_values()  # starts the CPU measurement window of the process tree
        return Availability(True)

    def sample(self) -> list[Sample]:
        t_ns = self.clock()
        memory = psutil.virtual_memory()
        values = {"cpu_pct": psutil.cpu_percent(interval=None),
                  "mem_used_mb": memory.used / _MB, "mem_pct": memory.percent}
        samples = make_samples(t_ns, "host", values, {})
        samples += [Sample(t_ns, "host", "energy_j", joules, {"zone": zone}) for zone, joules in self.rapl.read().items()]
        if self.pid is not None:
            samples += make_samples(t_ns, "host", self._process_values(), {"pid": str(self.pid)})
        return samples

    def _process_values(self) -> dict[str, float | None]:
        """CPU % and RSS summed over the process and its children. A process seen for the first
        time only starts its CPU window (psutil's first reading is a meaningless 0)."""
        try:
            root = psutil.Process(self.pid)
            tree = [root, *root.children(recursive=True)]
        except psutil.Error:
            return {"proc_cpu_pct": None, "proc_rss_mb": None}
        cpu: float | None = None
        rss = 0.0
        for proc in tree:
            known = proc.pid in self._procs
            cached = self._procs.setdefault(proc.pid, proc)
            try:
                percent = cached.cpu_percent(interval=None)
                rss += cached.memory_info().rss / _MB
            except psutil.Error:  # exited since it was listed
                continue
            if known:
                cpu = (cpu or 0.0) + percent
        return {"proc_cpu_pct": cpu, "proc_rss_mb": rss}


def default_samplers(base_url: str | None = None, engine: str | None = None,
                     pid: int | None = None, names: MetricNames | None = None) -> list[Sampler]:
    """Host, both accelerator tools (each reports once if missing) and the server when a URL is given
    (read with the engines' metric `names`; without them its samples are kept raw, none mapped)."""
    samplers: list[Sampler] = [HostSampler(pid), NpuSmiSampler(), NvidiaSmiSampler()]
    if base_url:
        samplers.append(PrometheusSampler(base_url, names or {}, engine))
    return samplers
