"""Pytest fixtures that run a real, throw-away ``redis-server`` process.

Register from ``tests/conftest.py`` with ``pytest_plugins = ["tests.support.redis_support"]``.

Fixtures
--------
``redis_server``          function scope: a fresh server per test (safe to kill/restart).
``redis_server_session``  session scope: one shared server, FLUSHALL'd before each use.
``redis_cluster``         a 3-master Redis Cluster (``--cluster-enabled yes`` x3, made with
                          ``redis-cli --cluster create``), shared by the session and
                          FLUSHALL'd on every master before each use.

``IRI_REDIS_SERVER`` / ``IRI_REDIS_CLI`` name other binaries (e.g. ``valkey-server`` and
``valkey-cli``) to run the same tests against them.

Both yield a :class:`RedisServer`. The server listens on 127.0.0.1 only, on a free port,
with persistence disabled (``--save "" --appendonly no``) and its ``--dir`` inside a pytest
temporary directory, so nothing is left behind. It is always stopped at teardown.

If ``redis-server`` is not on PATH the fixtures *skip*, unless Redis is required, in which
case they *fail*: Redis is required when ``IRI_REQUIRE_REDIS=1`` or ``CI=true`` is set
(``.ci/run`` sets both), so CI can never go green with the Redis tests silently skipped.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.watch import CEILING, Stalled, Watch, cpu_of, run_watched, size_of

__all__ = [
    "REDIS_CLI_SKIP_REASON",
    "REDIS_SKIP_REASON",
    "RedisCluster",
    "redis_cli_binary",
    "redis_cluster",
    "RedisServer",
    "RedisServerError",
    "find_free_port",
    "redis_required",
    "redis_server",
    "redis_server_binary",
    "redis_server_session",
]

REDIS_SKIP_REASON = "redis-server not installed: apt-get install -y redis-server"
REDIS_CLI_SKIP_REASON = "redis-cli not installed: apt-get install -y redis-tools"

_TRUTHY = {"1", "true", "yes", "on"}


class RedisServerError(RuntimeError):
    """The redis-server process could not be started or did not answer PING."""


def redis_required() -> bool:
    """True when a missing redis-server must fail the tests instead of skipping them."""
    return (
        os.environ.get("IRI_REQUIRE_REDIS", "").strip().lower() in _TRUTHY
        or os.environ.get("CI", "").strip().lower() in _TRUTHY
    )


def redis_server_binary() -> str | None:
    """Path of ``redis-server`` (``IRI_REDIS_SERVER`` overrides PATH lookup), or None."""
    override = os.environ.get("IRI_REDIS_SERVER")
    if override:
        return override if os.access(override, os.X_OK) else None
    found = shutil.which("redis-server")
    if found is None:
        # Debian installs it in /usr/bin, but a minimal PATH may lack /usr/sbin etc.
        for candidate in ("/usr/bin/redis-server", "/usr/local/bin/redis-server"):
            if os.access(candidate, os.X_OK):
                return candidate
    return found


def find_free_port(host: str = "127.0.0.1") -> int:
    """Ask the kernel for a currently free TCP port on ``host``."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


def _ping(host: str, port: int, timeout: float) -> bool:
    """Raw RESP PING (no client library involved); True iff the answer is +PONG."""
    return _request(host, port, b"PING\r\n", timeout).startswith(b"+PONG")


def _request(host: str, port: int, command: bytes, timeout: float) -> bytes:
    """Send one inline command, return the raw reply (b"" on any socket error)."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.settimeout(timeout)
            sock.sendall(command)
            data = b""
            # bounded: at most 64 reads; a bulk reply "$<len>\r\n<body>\r\n" is read whole
            for _ in range(64):
                chunk = sock.recv(65536)
                if not chunk:
                    break
                data += chunk
                head, sep, body = data.partition(b"\r\n")
                if not sep:
                    continue
                if not head.startswith(b"$") or len(body) >= int(head[1:]) + 2:
                    break
            return data
    except (OSError, ValueError):
        return b""


def _server_pid(host: str, port: int, timeout: float) -> int | None:
    """``process_id`` from ``INFO server``: tells which process answers on the port."""
    reply = _request(host, port, b"INFO server\r\n", timeout)
    for line in reply.splitlines():
        if line.startswith(b"process_id:"):
            return int(line.split(b":", 1)[1])
    return None


class RedisServer:
    """A real ``redis-server`` child process bound to 127.0.0.1:``port``.

    ``start()`` picks a free port the first time; ``restart()``/``start()`` after
    ``stop()``/``kill()`` reuse the SAME port, so clients holding ``url`` reconnect
    to the new process (data is NOT kept: persistence is off).
    """

    host = "127.0.0.1"

    def __init__(
        self,
        workdir: Path,
        *,
        port: int | None = None,
        binary: str | None = None,
        startup_timeout: float = 60.0,
        startup_ceiling: float = CEILING,
        stop_timeout: float = 5.0,
        extra_args: tuple[str, ...] = (),
    ) -> None:
        resolved = binary or redis_server_binary()
        if resolved is None:
            raise RedisServerError(REDIS_SKIP_REASON)
        self.binary: str = resolved
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self._port: int | None = port
        self._port_fixed = port is not None
        # start-up is bounded by progress: it fails when the server has neither
        # answered nor logged a line nor used CPU for startup_timeout seconds, or
        # after startup_ceiling seconds (a busy machine makes it slow, not broken)
        self.startup_timeout = startup_timeout
        self.startup_ceiling = startup_ceiling
        self.stop_timeout = stop_timeout
        self.extra_args = tuple(extra_args)
        self.process: subprocess.Popen[bytes] | None = None
        self._clients: list[Any] = []
        self.starts = 0

    # ----------------------------------------------------------------- properties
    @property
    def port(self) -> int:
        if self._port is None:
            raise RedisServerError("server was never started: no port assigned yet")
        return self._port

    @property
    def url(self) -> str:
        return f"redis://{self.host}:{self.port}/0"

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    @property
    def logfile(self) -> Path:
        return self.workdir / "redis-server.log"

    @property
    def is_running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def command(self, port: int) -> list[str]:
        return [
            self.binary,
            "--port", str(port),
            "--bind", self.host,
            "--protected-mode", "yes",
            "--save", "",
            "--appendonly", "no",
            "--dir", str(self.workdir),
            "--daemonize", "no",
            "--databases", "16",
            *self.extra_args,
        ]  # fmt: skip

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> RedisServer:
        """Start the process and wait (bounded by progress) until it answers PING."""
        if self.is_running:
            return self
        # A kernel-chosen port can be grabbed by someone else before redis binds it:
        # retry with a new port a few times, but never change a fixed/known port.
        attempts = 1 if (self._port_fixed or self._port is not None) else 5
        last_error: RedisServerError | None = None
        for _ in range(attempts):
            port = self._port if self._port is not None else find_free_port(self.host)
            try:
                # a fresh kernel-chosen port that fails is not retried: pick another one
                self._spawn_and_wait(port, bind_tries_max=5 if attempts == 1 else 1)
            except RedisServerError as exc:
                last_error = exc
                continue
            self._port = port
            self.starts += 1
            return self
        assert last_error is not None
        raise last_error

    def _spawn_and_wait(self, port: int, *, bind_tries_max: int) -> None:
        # Retry the bind a few times on the same port: right after a kill the old
        # socket is released asynchronously (redis sets SO_REUSEADDR, so TIME_WAIT
        # is not an issue, but the dying process may still hold the listener briefly).
        watch = Watch(size_of(self.logfile), stall=self.startup_timeout,
                      ceiling=self.startup_ceiling)
        bind_tries = 0
        while True:
            bind_tries += 1
            log = self.logfile.open("ab")
            try:
                proc = subprocess.Popen(
                    self.command(port),
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    cwd=self.workdir,
                    start_new_session=True,  # a Ctrl-C of pytest does not hit redis first
                )
            finally:
                log.close()
            self.process = proc
            watch.signals = (size_of(self.logfile), cpu_of(proc.pid))
            over = None
            while (over := watch.over()) is None:
                if proc.poll() is not None:
                    break
                # check it is OUR process that answers (not another server on the port)
                if _server_pid(self.host, port, timeout=0.5) == proc.pid:
                    return
                time.sleep(0.02)
            if proc.poll() is None:  # still alive but never answered: give up
                self._terminate(proc)
                raise RedisServerError(
                    f"redis-server on port {port} did not answer PING: {over}\n"
                    f"{self.log_tail()}"
                )
            self.process = None
            if bind_tries >= bind_tries_max or watch.over() is not None:
                raise RedisServerError(
                    f"redis-server exited with code {proc.returncode} on port {port}\n"
                    f"{self.log_tail()}"
                )
            time.sleep(0.1 * bind_tries)

    def _terminate(self, proc: subprocess.Popen[bytes]) -> None:
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=self.stop_timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
                proc.wait(timeout=self.stop_timeout)

    def stop(self) -> None:
        """Graceful stop (SIGTERM, SIGKILL after ``stop_timeout``). Idempotent."""
        proc, self.process = self.process, None
        if proc is not None:
            self._terminate(proc)

    def kill(self) -> None:
        """Hard crash: SIGKILL, then reap. Idempotent."""
        proc, self.process = self.process, None
        if proc is not None and proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            proc.wait(timeout=self.stop_timeout)

    def restart(self, *, hard: bool = False) -> RedisServer:
        """Stop (or SIGKILL when ``hard``) and start again on the same port."""
        if hard:
            self.kill()
        else:
            self.stop()
        return self.start()

    def close(self) -> None:
        """Teardown: close clients handed out by :meth:`client`, then stop the server."""
        for client in self._clients:
            with contextlib.suppress(Exception):
                client.close()
        self._clients.clear()
        self.stop()

    def __enter__(self) -> RedisServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -------------------------------------------------------------------- helpers
    def client(self, **kwargs: Any) -> Any:
        """A ``redis.Redis`` client for this server (closed at teardown).

        Defaults: short socket timeouts so a test against a dead server fails fast.
        Any redis-py keyword (``decode_responses``, ``retry``, ...) can be passed.
        """
        import redis  # imported lazily: the fixture itself only needs the binary

        kwargs.setdefault("socket_connect_timeout", 2.0)
        kwargs.setdefault("socket_timeout", 5.0)
        client = redis.Redis.from_url(self.url, **kwargs)
        self._clients.append(client)
        return client

    def ping(self, timeout: float = 0.5) -> bool:
        """Raw PING, independent of redis-py; False when the server is down."""
        return self._port is not None and _ping(self.host, self._port, timeout)

    def flushall(self) -> None:
        with socket.create_connection((self.host, self.port), timeout=2.0) as sock:
            sock.settimeout(2.0)
            sock.sendall(b"FLUSHALL\r\n")
            answer = sock.recv(64)
        if not answer.startswith(b"+OK"):
            raise RedisServerError(f"FLUSHALL failed: {answer!r}")

    def snapshot(self, to: Path) -> Path:
        """Take an RDB snapshot now (``SAVE``, what a ``save`` point or a backup does) and
        copy it to *to*: what :meth:`restart_from` brings back."""
        with socket.create_connection((self.host, self.port), timeout=2.0) as sock:
            sock.settimeout(10.0)
            sock.sendall(b"SAVE\r\n")
            answer = sock.recv(64)
        if not answer.startswith(b"+OK"):
            raise RedisServerError(f"SAVE failed: {answer!r}")
        shutil.copyfile(self.workdir / "dump.rdb", to)
        return to

    def restart_from(self, snapshot: Path) -> RedisServer:
        """Stop the server (it saves nothing: ``save ""``), put *snapshot* in place of its
        dump and start it again on the same port: Redis back on older data, as a restore
        from a backup, or a restart from an old RDB file, leaves it."""
        self.stop()
        shutil.copyfile(snapshot, self.workdir / "dump.rdb")
        return self.start()

    def log_tail(self, lines: int = 20) -> str:
        try:
            text = self.logfile.read_text(errors="replace")
        except OSError:
            return "(no redis-server log)"
        return "\n".join(text.splitlines()[-lines:])

    def __repr__(self) -> str:
        state = "running" if self.is_running else "stopped"
        return f"<RedisServer {self.host}:{self._port} pid={self.pid} {state}>"


def _start_or_skip(workdir: Path) -> RedisServer:
    binary = redis_server_binary()
    if binary is None:
        if redis_required():
            pytest.fail(
                f"{REDIS_SKIP_REASON} (Redis tests are required here: "
                "IRI_REQUIRE_REDIS=1 or CI=true)",
                pytrace=False,
            )
        pytest.skip(REDIS_SKIP_REASON)
    server = RedisServer(workdir, binary=binary)
    try:
        server.start()
    except RedisServerError as exc:
        server.close()
        pytest.fail(f"could not start redis-server: {exc}", pytrace=False)
    return server


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[RedisServer]:
    """A private redis-server for one test; may be stopped/killed/restarted freely."""
    server = _start_or_skip(tmp_path / "redis")
    try:
        yield server
    finally:
        server.close()


@pytest.fixture(scope="session")
def _redis_server_session_process(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[RedisServer]:
    server = _start_or_skip(tmp_path_factory.mktemp("redis-session"))
    try:
        yield server
    finally:
        server.close()


@pytest.fixture
def redis_server_session(_redis_server_session_process: RedisServer) -> RedisServer:
    """The shared session server, emptied (FLUSHALL) and running for this test.

    Do not stop/kill it in a test (use ``redis_server`` for that); if a test did,
    it is restarted here on the same port.
    """
    server = _redis_server_session_process
    if not server.ping():
        server.restart()
    server.flushall()
    return server


# --------------------------------------------------------------------------- cluster


def redis_cli_binary() -> str | None:
    """Path of ``redis-cli`` (``IRI_REDIS_CLI`` overrides PATH lookup), or None."""
    override = os.environ.get("IRI_REDIS_CLI")
    if override:
        return override if os.access(override, os.X_OK) else None
    found = shutil.which("redis-cli")
    if found is None:
        for candidate in ("/usr/bin/redis-cli", "/usr/local/bin/redis-cli"):
            if os.access(candidate, os.X_OK):
                return candidate
    return found


def _info_field(reply: bytes, name: bytes) -> bytes | None:
    for line in reply.splitlines():
        if line.startswith(name + b":"):
            return line.split(b":", 1)[1].strip()
    return None


class RedisCluster:
    """Three ``redis-server --cluster-enabled yes`` masters on 127.0.0.1, no replicas.

    :meth:`start` starts the servers (each a :class:`RedisServer` with its own
    ``--dir`` and ``nodes.conf``), joins them with ``redis-cli --cluster create
    ... --cluster-replicas 0 --cluster-yes`` (16,384 slots split in three) and waits,
    bounded, until every node reports ``cluster_state:ok``.
    """

    host = "127.0.0.1"

    def __init__(self, workdir: Path, *, masters: int = 3, binary: str | None = None,
                 cli: str | None = None, timeout: float = 120.0,
                 extra_args: tuple[str, ...] = ()) -> None:
        self.workdir = Path(workdir)
        self.masters = masters
        self.timeout = timeout
        resolved = cli or redis_cli_binary()
        if resolved is None:
            raise RedisServerError(REDIS_CLI_SKIP_REASON)
        self.cli: str = resolved
        self.binary = binary
        self.extra_args = tuple(extra_args)
        self.nodes: list[RedisServer] = []

    @property
    def url(self) -> str:
        """A startup node's URL (redis-py's ``RedisCluster.from_url`` finds the others)."""
        return f"redis://{self.host}:{self.nodes[0].port}"

    @property
    def ports(self) -> list[int]:
        return [node.port for node in self.nodes]

    def start(self) -> RedisCluster:
        args = ("--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                "--cluster-node-timeout", "5000", *self.extra_args)
        try:
            for i in range(self.masters):
                node = RedisServer(self.workdir / f"node{i}", binary=self.binary,
                                   extra_args=args)
                self.nodes.append(node)
                node.start()
            addresses = [f"{self.host}:{port}" for port in self.ports]
            try:  # bounded by progress (its output, its CPU time, the nodes' logs)
                proc = run_watched(
                    [self.cli, "--cluster", "create", *addresses, "--cluster-replicas", "0",
                     "--cluster-yes"],
                    *(size_of(node.logfile) for node in self.nodes),
                    what="redis-cli --cluster create", stall=self.timeout,
                    stdin=subprocess.DEVNULL, errors="replace",
                )
            except Stalled as exc:
                raise RedisServerError(str(exc)) from exc
            if proc.returncode != 0:
                raise RedisServerError(
                    f"redis-cli --cluster create failed ({proc.returncode}): "
                    f"{(proc.stdout + proc.stderr)[-2000:]}"
                )
            self._wait_ok()
        except BaseException:
            self.close()
            raise
        return self

    def _wait_ok(self) -> None:
        """Wait until every node says ``cluster_state:ok``: bounded by progress (the
        nodes' logs and states change as they meet), not by a deadline."""
        states: list[bytes | None] = []
        watch = Watch(lambda: tuple(states), *(size_of(node.logfile) for node in self.nodes),
                      stall=self.timeout)
        while (over := watch.over()) is None:
            states = [
                _info_field(_request(self.host, port, b"CLUSTER INFO\r\n", 1.0),
                            b"cluster_state")
                for port in self.ports
            ]
            if all(state == b"ok" for state in states):
                return
            time.sleep(0.1)
        raise RedisServerError(f"cluster not ok: {over}: {states}")

    def flushall(self) -> None:
        for node in self.nodes:
            node.flushall()

    def dbsizes(self) -> list[int]:
        """Keys held by each master (``DBSIZE``), in node order."""
        sizes = []
        for port in self.ports:
            reply = _request(self.host, port, b"DBSIZE\r\n", 2.0)
            if not reply.startswith(b":"):
                raise RedisServerError(f"DBSIZE on {port}: {reply!r}")
            sizes.append(int(reply[1:].strip()))
        return sizes

    def client(self, **kwargs: Any) -> Any:
        """A ``redis.cluster.RedisCluster`` client (close it yourself)."""
        from redis.cluster import RedisCluster as Client

        kwargs.setdefault("socket_connect_timeout", 2.0)
        kwargs.setdefault("socket_timeout", 5.0)
        return Client.from_url(self.url, **kwargs)

    def close(self) -> None:
        for node in self.nodes:
            node.close()

    def __enter__(self) -> RedisCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<RedisCluster {self.host} ports={[n._port for n in self.nodes]}>"


@pytest.fixture(scope="session")
def _redis_cluster_process(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[RedisCluster]:
    binary = redis_server_binary()
    cli = redis_cli_binary()
    missing = REDIS_SKIP_REASON if binary is None else REDIS_CLI_SKIP_REASON
    if binary is None or cli is None:
        if redis_required():
            pytest.fail(f"{missing} (Redis tests are required here: IRI_REQUIRE_REDIS=1 "
                        "or CI=true)", pytrace=False)
        pytest.skip(missing)
    cluster = RedisCluster(tmp_path_factory.mktemp("redis-cluster"), binary=binary, cli=cli)
    try:
        cluster.start()
    except RedisServerError as exc:
        pytest.fail(f"could not start a Redis Cluster: {exc}", pytrace=False)
    try:
        yield cluster
    finally:
        cluster.close()


@pytest.fixture
def redis_cluster(_redis_cluster_process: RedisCluster) -> RedisCluster:
    """The session's 3-master cluster, every master emptied (FLUSHALL) for this test."""
    cluster = _redis_cluster_process
    cluster.flushall()
    return cluster


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "redis: needs a real redis-server process")
