"""Shared harness for the black-box tests: starts a real server process on
free loopback ports and hands tests its address.

By default the server is `deltagrid server` (binary from $DELTAGRID_BIN or
target/debug/deltagrid). With DELTAGRID_TEST_TARGET=redis the same tests run
against Debian's redis-server instead, which is how we check that a test
asserts Redis's real behaviour and not our reading of it. Tests that only make
sense for deltagrid (admin HTTP, deltas) are marked `deltagrid_only`.

Fixtures: `server` (a fresh server per test; in a module marked
`pytestmark = pytest.mark.shared_server`, one server per module, FLUSHALLed
before each test), `make_server`, `conn` (a RespConn on `server`) and `r` (a
redis-py client on `server`, parametrized over RESP2/RESP3 x bytes/str).
"""
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from helpers import CLIENT_PARAMS, make_client
from helpers_net import RespConn
import ports

ROOT = Path(__file__).resolve().parents[2]
TARGET = os.environ.get("DELTAGRID_TEST_TARGET", "deltagrid")


_handed_out = set()


def free_port():
    """A free loopback port never handed out before in this run (see
    ports.py)."""
    return ports.free_port(_handed_out)


def binary():
    return os.environ.get("DELTAGRID_BIN", str(ROOT / "target" / "debug" / "deltagrid"))


class Server:
    """A running server process; `port` speaks RESP, `admin_port` HTTP (deltagrid only)."""

    def __init__(self, tmp_path, extra_args=(), config=None, port=None):
        self.port = port or free_port()
        self.admin_port = free_port()
        self.host = "127.0.0.1"
        self.log_path = tmp_path / f"server-{self.port}.log"
        if TARGET == "redis":
            args = ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1",
                    "--save", "", "--appendonly", "no", "--enable-debug-command", "yes"]
            args += list(translate_for_redis(extra_args))
        else:
            args = [binary(), "server", "--listen", f"127.0.0.1:{self.port}",
                    "--admin-listen", f"127.0.0.1:{self.admin_port}",
                    "--data-dir", str(tmp_path / "data"), "--enable-debug-command"]
            if config is not None:
                cfg = tmp_path / "deltagrid.toml"
                cfg.write_text(config)
                args += ["--config", str(cfg)]
            else:
                # As Redis above (--appendonly no): nothing kept on disk.
                # Configured nodes (sites, test_persistence) keep theirs.
                args += ["--persistence", "off"]
            args += list(extra_args)
        self.log = open(self.log_path, "ab")  # a restart on the same directory appends
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT)
        self._wait_ready()

    def _wait_ready(self):
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited with {self.proc.returncode}: {self.log_path.read_text()}")
            try:
                with socket.create_connection((self.host, self.port), timeout=0.5) as s:
                    s.sendall(b"PING\r\n")
                    data = s.recv(64)
                    if data.startswith(b"+PONG") or data.startswith(b"-NOAUTH"):
                        return
            except OSError:
                pass
            time.sleep(0.05)
        raise RuntimeError("server did not become ready in 30 s")

    def stop(self):
        if self.proc.poll() is None:
            # SIGINT stops at once; SIGTERM would first drain a site member.
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


def translate_for_redis(extra_args):
    """Map the deltagrid flags tests use onto redis-server's."""
    it = iter(extra_args)
    for a in it:
        if a == "--requirepass":
            yield from ["--requirepass", next(it)]
        elif a in ("--maxmemory", "--maxmemory-policy"):
            yield from [a, next(it)]
        elif a == "--aclfile":
            yield from ["--aclfile", next(it)]
        elif a == "--maxclients":
            yield from ["--maxclients", next(it)]
        elif a == "--tls-listen":
            yield from ["--tls-port", next(it).rsplit(":", 1)[1]]
        elif a in ("--tls-cert-file", "--tls-key-file", "--tls-ca-cert-file", "--tls-auth-clients"):
            yield from [a, next(it)]
        else:
            raise ValueError(f"no redis-server equivalent for {a}")


class SharedServer:
    """One server process reused by every test of a module (restarted if it died)."""

    def __init__(self, tmp_path_factory):
        self.factory = tmp_path_factory
        self.current = None

    def get(self):
        if self.current is None or self.current.proc.poll() is not None:
            if self.current is not None:
                self.current.stop()
            self.current = Server(self.factory.mktemp("shared"))
        return self.current

    def stop(self):
        if self.current is not None:
            self.current.stop()


@pytest.fixture(scope="module")
def shared_server_holder(tmp_path_factory):
    holder = SharedServer(tmp_path_factory)
    yield holder
    holder.stop()


@pytest.fixture
def server(request):
    if request.node.get_closest_marker("shared_server"):
        s = request.getfixturevalue("shared_server_holder").get()
        with RespConn.to(s) as c:
            assert c.cmd("FLUSHALL") == b"+OK\r\n"
        yield s
        return
    s = Server(request.getfixturevalue("tmp_path"))
    yield s
    s.stop()


@pytest.fixture
def make_server(tmp_path):
    """Start servers with extra flags or a TOML config: make_server(extra_args=[...], config="...")."""
    started = []

    def start(extra_args=(), config=None):
        sub = tmp_path / f"s{len(started)}"
        sub.mkdir()
        s = Server(sub, extra_args, config)
        started.append(s)
        return s

    yield start
    for s in started:
        s.stop()


@pytest.fixture
def conn(server):
    with RespConn.to(server) as c:
        yield c


@pytest.fixture(params=CLIENT_PARAMS)
def r(request, server):
    proto, decode = request.param
    c = make_client(server, proto, decode)
    yield c
    c.close()


def pytest_configure(config):
    config.addinivalue_line("markers", "deltagrid_only: needs deltagrid features redis-server lacks")
    config.addinivalue_line("markers", "shared_server: tests of the module share one server, "
                                       "FLUSHALLed before each test (only for tests that change "
                                       "nothing but the keyspace: no CONFIG SET, DEBUG, CLIENT KILL...)")


def pytest_collection_modifyitems(config, items):
    if TARGET != "redis":
        return
    skip = pytest.mark.skip(reason="deltagrid-only test")
    for item in items:
        if "deltagrid_only" in item.keywords:
            item.add_marker(skip)
