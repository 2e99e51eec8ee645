"""The real SGLang engine on the CPU, started once per test session (one to several minutes on 2 cores).

Needs `tokenbench setup sglang-cpu`; without it every test that asks for the server is skipped, and says
why, except under CI (CI=true), where a missing set-up is a failure (`make test` runs the set-up first)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.engines.setup_needed import require
from tokenbench.local_engines import sglang_cpu

PROFILE = "cpu-gemma3-sglang"


def require_setup() -> None:
    require(sglang_cpu.missing())


@dataclass
class Server:
    base_url: str
    pid: int
    port: int
    state_dir: Path
    facts: object


@pytest.fixture(scope="session")
def sglang_server(tmp_path_factory) -> Iterator[Server]:
    """`tokenbench deploy up cpu-gemma3-sglang` on a free loopback port (not 30000: a user's server may hold
    it), with the deployment records in a temporary directory; `deploy down --all` at the end of the session
    (test_server.py's last test does it first and checks that nothing is left). With `--sleep-on-idle`: an idle
    SGLang scheduler otherwise polls its sockets in a loop, taking CPU that the clients these tests start (and
    everything else on a 2-core machine) need; it changes nothing while requests run (the scheduler wakes on
    their arrival)."""
    require_setup()
    from tokenbench.cli.main import main
    from tokenbench.deploy import state
    from tokenbench.deploy.engines import facts_for

    state_dir = tmp_path_factory.mktemp("sglang-deployments")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(state.STATE_ENV, str(state_dir))
        assert main(["deploy", "up", PROFILE, "--set", "port=null", "--set", "args.sleep-on-idle=true"]) == 0
        try:
            (st,) = state.load_all(state_dir)
            yield Server(st.base_url, st.pid, st.port, state_dir, facts_for(st.base_url))
        finally:
            main(["deploy", "down", "--all"])
