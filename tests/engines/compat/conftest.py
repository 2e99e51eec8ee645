"""Servers nobody here wrote, unpatched, started by the tests: `transformers serve` 5.17 (continuous batching,
CPU) on a random tiny Llama made at test time, and a LiteLLM proxy in front of the embedded llama.cpp. Each
is started with a bounded wait for readiness and stopped by its process group's id.

Needs `tokenbench setup transformers-serve` / `tokenbench setup litellm` (`make test` runs them); without
them the tests are skipped and say why, except under CI (CI=true), where a missing set-up is a failure."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.engines.setup_needed import require
from tokenbench.deploy.ports import free_port
from tokenbench.local_engines.python_servers import LITELLM, TRANSFORMERS, PythonServer

READY_S = 240                  # the longest wait for a server to answer (a busy 2-core machine)
GATEWAY_KEY = "sk-tokenbench-test"
GATEWAY_MODEL = "smol-gateway"
MAKER = Path(__file__).with_name("make_tiny_llama.py")


def require_setup(server: PythonServer) -> None:
    require(server.missing())


@dataclass
class Running:
    base_url: str
    proc: subprocess.Popen
    log: Path
    model: str = ""


def _answers(url: str, key: str | None) -> bool:
    req = urllib.request.Request(url, headers={"Authorization": f"Bearer {key}"} if key else {})
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            return resp.status == 200
    except (urllib.error.URLError, OSError):
        return False


@contextlib.contextmanager
def started(argv: list[str], log: Path, ready_url: str, env: dict[str, str], key: str | None = None
            ) -> Iterator[subprocess.Popen]:
    """argv in a process group of its own, its output to `log`; ready when `ready_url` answers 200 (within
    READY_S); stopped by its group id: SIGTERM, then SIGKILL after 15 s."""
    with log.open("w") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                env={**os.environ, **env}, start_new_session=True)
    try:
        deadline = time.monotonic() + READY_S
        while not _answers(ready_url, key):
            if proc.poll() is not None or time.monotonic() > deadline:
                tail = log.read_text()[-1500:]
                pytest.fail(f"{argv[0]} not ready (exit {proc.poll()}) within {READY_S} s: {tail}")
            time.sleep(0.5)
        yield proc
    finally:
        _stop(proc)


def _stop(proc: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(15)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(5)


@pytest.fixture(scope="session")
def tiny_llama(tmp_path_factory) -> Path:
    """A random 2-layer Llama and its tokenizer, made here (nothing downloaded)."""
    require_setup(TRANSFORMERS)
    folder = tmp_path_factory.mktemp("tiny-llama")
    subprocess.run([str(TRANSFORMERS.python()), str(MAKER), str(folder)], check=True, timeout=300,
                   capture_output=True)
    return folder


@pytest.fixture(scope="session")
def transformers_serve(tiny_llama, tmp_path_factory) -> Iterator[Running]:
    """`transformers serve` as released: no hub cache (its /v1/models answers 500), continuous batching with a
    small KV cache (without the --cb-* sizes it takes 80 % of free memory), on a free loopback port."""
    port, home = free_port("127.0.0.1"), tmp_path_factory.mktemp("hf-home")
    log = home / "serve.log"
    argv = [str(TRANSFORMERS.venv_dir() / "bin" / "transformers"), "serve", str(tiny_llama), "--continuous-batching",
            "--cb-num-blocks", "64", "--cb-block-size", "32", "--cb-max-batch-tokens", "512", "--device", "cpu",
            "--host", "127.0.0.1", "--port", str(port)]
    env = {"HF_HUB_OFFLINE": "1", "HF_HOME": str(home / "hf"), "OMP_NUM_THREADS": "1"}
    url = f"http://127.0.0.1:{port}"
    with started(argv, log, f"{url}/health", env) as proc:
        yield Running(url, proc, log, str(tiny_llama))


@pytest.fixture(scope="session")
def litellm_proxy(llamacpp_server, tmp_path_factory) -> Iterator[Running]:
    """A LiteLLM proxy whose one model, `smol-gateway`, is the embedded llama.cpp's (a master key set, as it
    requires); on a free loopback port."""
    require_setup(LITELLM)
    folder = tmp_path_factory.mktemp("litellm")
    upstream = llamacpp_server.facts.model
    (folder / "config.yaml").write_text(
        f"model_list:\n  - model_name: {GATEWAY_MODEL}\n    litellm_params:\n      model: openai/{upstream}\n"
        f"      api_base: {llamacpp_server.base_url}/v1\n      api_key: none\n")
    port = free_port("127.0.0.1")
    argv = [str(LITELLM.venv_dir() / "bin" / "litellm"), "--config", str(folder / "config.yaml"),
            "--host", "127.0.0.1", "--port", str(port), "--num_workers", "1"]
    env = {"LITELLM_MASTER_KEY": GATEWAY_KEY, "LITELLM_LOCAL_MODEL_COST_MAP": "True",
           "LITELLM_TELEMETRY": "False"}
    url = f"http://127.0.0.1:{port}"
    with started(argv, folder / "proxy.log", f"{url}/v1/models", env, GATEWAY_KEY) as proc:
        yield Running(url, proc, folder / "proxy.log", GATEWAY_MODEL)
