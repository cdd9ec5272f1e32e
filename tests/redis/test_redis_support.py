"""Tests of the real redis-server fixture (tests/support/redis_support.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import redis

from tests.support.redis_support import (
    REDIS_SKIP_REASON,
    RedisServer,
    RedisServerError,
    find_free_port,
    redis_server_binary,
)

pytestmark = pytest.mark.redis

REPO_ROOT = Path(__file__).resolve().parents[2]


def test_server_answers_and_is_configured(redis_server: RedisServer) -> None:
    assert redis_server.url == f"redis://127.0.0.1:{redis_server.port}/0"
    assert redis_server.is_running
    assert redis_server.ping()
    client = redis_server.client(decode_responses=True)
    assert client.ping() is True
    assert client.config_get("save") == {"save": ""}
    assert client.config_get("appendonly") == {"appendonly": "no"}
    assert client.config_get("bind") == {"bind": "127.0.0.1"}
    assert client.set("k", "v")
    assert client.get("k") == "v"


def test_no_persistence_files_left(tmp_path: Path) -> None:
    workdir = tmp_path / "srv"
    with RedisServer(workdir) as server:
        client = server.client()
        client.sadd("s", *range(1000))
        server.stop()  # graceful SIGTERM: would write dump.rdb if saving were on
        server.start()
        assert client.scard("s") == 0  # no persistence across restarts
    assert not server.is_running
    leftovers = {p.name for p in workdir.iterdir()} - {"redis-server.log"}
    assert leftovers == set()


def test_kill_then_restart_on_same_port(redis_server: RedisServer) -> None:
    port, url, pid = redis_server.port, redis_server.url, redis_server.pid
    client = redis_server.client()
    client.set("before", "1")

    redis_server.kill()
    assert not redis_server.is_running
    assert not redis_server.ping()
    with pytest.raises(redis.exceptions.ConnectionError):
        client.get("before")

    redis_server.start()
    assert (redis_server.port, redis_server.url) == (port, url)
    assert redis_server.pid != pid
    # same client object reconnects to the new process; data is gone
    assert client.get("before") is None
    assert redis_server.starts == 2


def test_restart_soft_and_hard_keep_port(redis_server: RedisServer) -> None:
    port = redis_server.port
    for hard in (False, True, False):
        redis_server.restart(hard=hard)
        assert redis_server.port == port
        assert redis_server.ping()
    assert redis_server.starts == 4


def test_stop_and_kill_are_idempotent(redis_server: RedisServer) -> None:
    redis_server.stop()
    redis_server.stop()
    redis_server.kill()
    assert not redis_server.is_running
    assert redis_server.start().ping()


def test_two_servers_get_distinct_ports(tmp_path: Path) -> None:
    with RedisServer(tmp_path / "a") as a, RedisServer(tmp_path / "b") as b:
        assert a.port != b.port
        a.client().set("x", "a")
        assert b.client().get("x") is None


def test_busy_fixed_port_fails_fast_with_log(tmp_path: Path) -> None:
    with RedisServer(tmp_path / "a") as a:
        clash = RedisServer(tmp_path / "b", port=a.port, startup_timeout=3.0)
        with pytest.raises(RedisServerError, match="exited with code"):
            clash.start()
        assert not clash.is_running
        assert a.ping()


def test_session_server_is_flushed_between_uses(redis_server_session: RedisServer) -> None:
    client = redis_server_session.client()
    assert client.dbsize() == 0
    client.set("left-over", "1")


def test_session_server_is_flushed_between_uses_again(
    redis_server_session: RedisServer,
) -> None:
    assert redis_server_session.client().dbsize() == 0


def test_free_port_and_binary_helpers() -> None:
    assert 0 < find_free_port() < 65536
    binary = redis_server_binary()
    assert binary is not None and os.access(binary, os.X_OK)


def _run_inner_pytest(
    tmp_path: Path, env_extra: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    """Run a tiny test file that uses ``redis_server`` with redis-server made unfindable."""
    test_file = tmp_path / "test_inner.py"
    test_file.write_text(
        textwrap.dedent(
            """
            pytest_plugins = ["tests.support.redis_support"]

            def test_uses_redis(redis_server):
                assert redis_server.ping()
            """
        )
    )
    # Not the outer run's options (PYTEST_ADDOPTS: CI's --basetemp and --junitxml)
    env = {k: v for k, v in os.environ.items()
           if k not in {"CI", "IRI_REQUIRE_REDIS", "PYTEST_ADDOPTS"}}
    env.update(env_extra)
    env["IRI_REDIS_SERVER"] = str(tmp_path / "no-such-redis-server")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider",
         "--basetemp", str(tmp_path / "inner"), "--rootdir", str(tmp_path), "-c", os.devnull,
         str(test_file)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )  # fmt: skip


@pytest.mark.slow
def test_missing_binary_skips_locally(tmp_path: Path) -> None:
    result = _run_inner_pytest(tmp_path, {})
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 skipped" in result.stdout
    assert REDIS_SKIP_REASON in result.stdout


@pytest.mark.slow
@pytest.mark.parametrize("env_extra", [{"IRI_REQUIRE_REDIS": "1"}, {"CI": "true"}])
def test_missing_binary_fails_when_required(tmp_path: Path, env_extra: dict[str, str]) -> None:
    result = _run_inner_pytest(tmp_path, env_extra)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "1 error" in result.stdout
    assert "skipped" not in result.stdout
    assert REDIS_SKIP_REASON in result.stdout
