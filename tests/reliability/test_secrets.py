"""Server-side secrets in profiles (`secret_args`, `secret_env`): taken from the host environment by
name; every rendering, state file, stored profile and report holds the name only; the value reaches
the engine process and nothing else. The real llama.cpp engine enforces a key given this way."""

from __future__ import annotations

import json
import os
import secrets
import stat
import subprocess
from pathlib import Path

import pytest
import yaml

from tokenbench.cli.main import main
from tokenbench.client import api
from tokenbench.deploy import container, lifecycle, profiles
from tokenbench.deploy.secret_refs import Secrets, api_key_var, resolve
from tokenbench.errors import DeployError, SpecError

from .helpers import error_lines, files_holding

STUDY_B = "study-b-vllm-ascend-910b"
VLLM = "nvidia-vllm"


def key() -> str:
    return f"tb-secret-{secrets.token_hex(12)}"


def test_renderings_hold_only_the_names(monkeypatch):
    monkeypatch.setenv("TB_SERVER_KEY", value := key())
    monkeypatch.setenv("TB_HF", token := key())
    prof = profiles.load_profile(VLLM, ["secret_args.api-key=TB_SERVER_KEY", "secret_env.HF_TOKEN=TB_HF"])
    argv = container.deploy_dry_run(prof, 31000)
    assert argv[argv.index("--api-key") + 1] == "${TB_SERVER_KEY}"
    assert argv[argv.index("HF_TOKEN") - 1] == "-e"                  # docker copies it from its environment
    compose = yaml.safe_load(container.render_compose(prof, 31000))
    [service] = compose["services"].values()
    assert service["environment"]["HF_TOKEN"] == "${TB_HF}"          # compose interpolates it at `up`
    assert "${TB_SERVER_KEY}" in service["command"]
    text = " ".join(argv) + container.render_compose(prof, 31000) + profiles.to_yaml(prof)
    assert value not in text and token not in text


def test_spawn_argv_gets_the_values_also_inside_a_setup_script(monkeypatch):
    monkeypatch.setenv("TB_SERVER_KEY", value := "it's $(not) a shell")
    prof = profiles.load_profile(STUDY_B, ["secret_args.api-key=TB_SERVER_KEY", "setup=['true']"])
    argv = container.deploy_dry_run(prof, 31000)
    script = resolve(prof).argv(argv)[argv.index("-lc") + 1]
    probe = script.replace("\nexec ", "\nexec printf '<%s>\\n' ")
    out = subprocess.run(["bash", "-c", probe], capture_output=True, text=True, check=True).stdout
    items = [line[1:-1] for line in out.splitlines()]
    assert items[items.index("--api-key") + 1] == value                # one word, not run by the shell
    assert Secrets({"X": "v"}).argv(["--k", "${X}", "${X}y", "${Y}"]) == ["--k", "v", "${X}y", "${Y}"]


def test_the_api_key_variable_is_found_in_either_spelling():
    for flag in ("api-key", "--api-key"):
        assert api_key_var(profiles.load_profile("cpu-smollm2-llamacpp", [f"secret_args.{flag}=TB_K"])) == "TB_K"
    assert api_key_var(profiles.load_profile("cpu-smollm2-llamacpp", ["secret_args.other=TB_K"])) is None


def test_missing_host_variable_stops_before_anything_starts(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("TB_ABSENT", raising=False)
    monkeypatch.setenv("TOKENBENCH_STATE", str(tmp_path / "state"))
    prof = profiles.load_profile("cpu-smollm2-llamacpp", ["secret_args.api-key=TB_ABSENT"])
    with pytest.raises(DeployError) as exc:
        resolve(prof)
    assert "$TB_ABSENT, which is not set" in exc.value.message and "export TB_ABSENT=" in exc.value.hint
    assert main(["deploy", "up", "cpu-smollm2-llamacpp", "--set", "secret_args.api-key=TB_ABSENT"]) != 0
    [line] = error_lines(capsys.readouterr().err)
    assert "TB_ABSENT" in line
    assert not list((tmp_path / "state").glob("*.json"))


@pytest.mark.parametrize("sets,needle", [
    (["secret_args.api-key=not-a-name"], "not an environment variable name"),
    (["args.api-key=plain", "secret_args.api-key=TB_K"], "both as a secret and as a plain value"),
    (["env.HF_TOKEN=x", "secret_env.HF_TOKEN=TB_K"], "both as a secret and as a plain value"),
])
def test_bad_secret_declarations_are_refused(sets, needle):
    with pytest.raises(SpecError, match=needle):
        profiles.load_profile("cpu-smollm2-llamacpp", sets)


def _recording_docker(tmp_path: Path) -> Path:
    """A `docker` that answers version/ps and, on `run`, records its argv and the HF_TOKEN it was
    given, then sleeps like a running container (never a real container: none can run here)."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    script = bindir / "docker"
    script.write_text(f"""#!/bin/sh
case "$1" in
  version) echo 28.2.2 ;;
  run) printf '%s\\n' "$@" > {tmp_path}/run-argv; printf '%s' "$HF_TOKEN" > {tmp_path}/run-env; exec sleep 60 ;;
esac
exit 0
""")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return bindir


def test_container_gets_the_value_through_dockers_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", f"{_recording_docker(tmp_path)}:{os.environ['PATH']}")
    monkeypatch.setenv("TB_HF", token := key())
    prof = profiles.load_profile(VLLM, ["secret_env.HF_TOKEN=TB_HF"])
    dep = lifecycle.launch(prof, tmp_path / "state")
    try:
        for _ in range(200):
            if (tmp_path / "run-env").exists() and (tmp_path / "run-env").read_text():
                break
            subprocess.run(["sleep", "0.05"], check=True)
        assert (tmp_path / "run-env").read_text() == token
        run_argv = (tmp_path / "run-argv").read_text().splitlines()
        assert "HF_TOKEN" in run_argv and token not in "\n".join(run_argv)
        assert files_holding(tmp_path / "state", token.encode()) == []
    finally:
        dep.stop()


@pytest.mark.engine
def test_real_engine_enforces_a_key_that_no_output_holds(tmp_path, monkeypatch, capsys):
    """llama.cpp started with `secret_args: {api-key: TB_SERVER_KEY}`: it refuses requests without the
    key; deploy, readiness, facts and a whole sweep (which takes the key from the profile) work; then
    no file of the state, database, reports or exports, and no printed line, holds the key."""
    monkeypatch.setenv("TB_SERVER_KEY", value := key())
    out = tmp_path / "out"
    monkeypatch.setenv("TOKENBENCH_STATE", str(out / "state"))
    prof = profiles.load_profile("cpu-smollm2-llamacpp", ["secret_args.api-key=TB_SERVER_KEY"])
    with lifecycle.deployed(prof, out / "state") as dep:
        assert dep.facts.ctx_per_seq                                   # facts were read with the key
        assert api.call(dep.base_url, "/v1/models", quiet=True, timeout=5)[0] == 401
        assert api.call(dep.base_url, "/v1/models", api_key=value, quiet=True, timeout=5)[0] == 200
        state = json.loads(next((out / "state").glob("*.json")).read_text())
        assert "${TB_SERVER_KEY}" in state["argv"]
    spec = out / "sweep.yaml"
    spec.write_text("target: {profile: cpu-smollm2-llamacpp, set: ['secret_args.api-key=TB_SERVER_KEY']}\n"
                    "pairs: [[8, 4]]\nconcurrency: [1]\nrequests: {min: 2, per_concurrency: 1}\n"
                    "warmup_requests: 1\n")
    db = str(out / "results.db")
    assert main(["sweep", str(spec), "--db", db]) == 0
    run_id = main_run_id(db)
    assert main(["report", run_id, "--db", db, "-o", str(out / "report")]) == 0
    assert main(["export", run_id, "--db", db, "-o", str(out / "export.json")]) == 0
    printed = capsys.readouterr()
    assert "--api-key ${TB_SERVER_KEY}" in (out / "report" / "report.md").read_text()
    assert files_holding(out, value.encode()) == []
    assert value not in printed.out + printed.err


def main_run_id(db: str) -> str:
    import sqlite3
    con = sqlite3.connect(db)
    [(run_id,)] = con.execute("SELECT id FROM runs").fetchall()
    con.close()
    return run_id
