"""A range of ports for everything tokenbench opens for others to reach: `--ports LO-HI` (the study's
`target.ports`, `deploy up --ports`, `demo --ports`) bounds an engine it deploys and its OTLP receiver, and
`--otlp-listen HOST:LO-HI` the receiver; each takes the first free port of the range, skipping taken ones, and
a range with none free is one line naming it. Real sockets; the engine is the built-in `reference-sglang`
profile (the reference server behind SGLang's command line, which exports its spans)."""

from __future__ import annotations

import contextlib
import re
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tokenbench.cli.main import main
from tokenbench.deploy import lifecycle, ports, profiles
from tokenbench.errors import DeployError, UsageError
from tokenbench.monitor.otlp_receiver import start
from tokenbench.spec.ports import PortRange

from .helpers import write_profile


def free_block(n: int) -> PortRange:
    """n consecutive ports free now (a few tries; the kernel's ephemeral range is avoided by starting high)."""
    for lo in range(41000, 60000, 97):
        if all(_free(p) for p in range(lo, lo + n)):
            return PortRange(lo, lo + n - 1)
    raise AssertionError("no block of free ports")


def _free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


@contextlib.contextmanager
def listening(port: int) -> Iterator[None]:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", port))
        s.listen()
        yield


@pytest.mark.parametrize("text,want", [("8000", (8000, 8000)), ("20000-20100", (20000, 20100)), ("0", (0, 0))])
def test_a_port_or_a_range_is_read(text, want):
    r = PortRange.parse(text)
    assert (r.lo, r.hi) == want and PortRange.parse(r.text) == r


@pytest.mark.parametrize("text", ["", "x", "70000", "5-3", "0-10", "1-", "-5", "1.5"])
def test_anything_else_is_refused(text):
    with pytest.raises(ValueError):
        PortRange.parse(text)


def test_the_first_free_port_of_the_range_is_taken_and_a_full_range_is_one_line():
    r = free_block(3)
    with listening(r.lo):
        assert ports.free_port("127.0.0.1", r) == r.lo + 1
        with listening(r.lo + 1), listening(r.lo + 2), pytest.raises(DeployError, match=f"no port of {r.text}"):
            ports.free_port("127.0.0.1", r)


def test_a_deployed_engine_takes_its_port_from_the_range_and_a_fixed_port_outside_it_is_refused(tmp_path):
    r = free_block(2)
    profile = profiles.load_profile(str(write_profile(tmp_path, "sleeper")))
    with listening(r.lo):
        assert lifecycle.choose_port(profile, within=r) == r.hi
        assert lifecycle.choose_port(profile, stable=True, within=r) == r.hi       # the usual port is outside
    fixed = profile.model_copy(update={"port": r.hi + 1000})
    with pytest.raises(DeployError, match="outside --ports"):
        lifecycle.choose_port(fixed, within=r)


def test_the_otlp_receiver_listens_in_its_range_skipping_a_taken_port():
    r = free_block(3)
    with listening(r.lo):
        with start(f"127.0.0.1:{r.text}") as receiver:
            assert receiver.port == r.lo + 1
        with start(None, within=r) as receiver:          # --ports alone: the receiver's range too
            assert receiver.port == r.lo + 1
    with listening(r.lo), listening(r.lo + 1), listening(r.lo + 2), pytest.raises(UsageError, match=r.text):
        start(f"127.0.0.1:{r.text}")


def test_deploy_up_dry_run_takes_the_port_from_the_range(tmp_path, capsys):
    r = free_block(2)
    path = write_profile(tmp_path, "sleeper")
    with listening(r.lo):
        assert main(["deploy", "up", str(path), "--dry-run", "--ports", r.text]) == 0
    assert str(r.hi) in capsys.readouterr().out
    assert main(["deploy", "up", str(path), "--dry-run", "--ports", "70000"]) == 2


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_a_sweep_that_deploys_an_engine_opens_everything_in_the_range(tmp_path: Path, capsys):
    r = free_block(4)
    spec = {"target": {"profile": "reference-sglang"}, "pairs": [[16, 4]], "concurrency": [1],
            "requests": {"num_prompts": 3}, "warmup_requests": 0}
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(spec))
    with listening(r.lo):
        assert main(["sweep", str(tmp_path / "s.yaml"), "--ports", r.text, "--db", str(tmp_path / "r.db")]) == 0
    said = capsys.readouterr()
    receiver = re.search(r"spans at 127\.0\.0\.1:(\d+)", said.out + said.err)
    engine = re.search(r"tokenbench http://127\.0\.0\.1:(\d+)", said.out + said.err)
    assert receiver and engine, said.err[-1500:]
    opened = {int(receiver.group(1)), int(engine.group(1))}
    assert opened <= set(range(r.lo + 1, r.hi + 1)) and len(opened) == 2
