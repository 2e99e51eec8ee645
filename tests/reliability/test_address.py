"""--base-url as users type it: a URL, HOST:PORT without a scheme, or a running deployment's name."""

from __future__ import annotations

import pytest

from tokenbench.deploy import address, state
from tokenbench.errors import UsageError


@pytest.mark.parametrize("given, url", [
    ("http://127.0.0.1:8000/", "http://127.0.0.1:8000"), ("127.0.0.1:8000", "http://127.0.0.1:8000"),
    ("localhost:30000/", "http://localhost:30000"), ("gpu-box.lan:8080", "http://gpu-box.lan:8080"),
    ("[::1]:8000", "http://[::1]:8000"), ("https://api.example.com", "https://api.example.com"),
    ("  http://h:1  ", "http://h:1")])
def test_urls_with_and_without_scheme(given, url):
    assert address.base_url(given) == url


@pytest.mark.parametrize("given", ["", "   ", "ftp://h:1", "http://", "http://h:99999", "http://h:0", "no-such-thing",
                                   "http://[::1"])
def test_what_is_no_target_is_one_usage_error_naming_the_flag(given, tmp_path):
    with pytest.raises(UsageError) as exc:
        address.base_url(given, directory=tmp_path)
    assert exc.value.message.startswith("--base-url") and "deploy status" in exc.value.hint
    assert "\n" not in exc.value.one_line()


def deployment(dep_id: str, profile: str, port: int) -> state.DeploymentState:
    return state.DeploymentState(id=dep_id, profile=profile, engine="llamacpp", pid=1, pgid=1, create_time=0.0,
                                 host="127.0.0.1", port=port, base_url=f"http://127.0.0.1:{port}", log_path="x",
                                 started_at="now", argv=[])


def test_a_running_deployment_by_id_or_profile(tmp_path):
    state.save(tmp_path, deployment("tiny-8080", "tiny", 8080))
    assert address.base_url("tiny", directory=tmp_path) == "http://127.0.0.1:8080"
    assert address.base_url("tiny-8080", directory=tmp_path) == "http://127.0.0.1:8080"
    state.save(tmp_path, deployment("tiny-8081", "tiny", 8081))
    with pytest.raises(UsageError) as exc:
        address.base_url("tiny", directory=tmp_path)
    assert "tiny-8080" in exc.value.hint and "tiny-8081" in exc.value.hint
