"""MONITOR, SHUTDOWN and SAVE, and what QUIT leaves behind. Every test here
also runs against redis-server (DELTAGRID_TEST_TARGET=redis) except where
marked."""
import re
import time

import pytest

from conftest import TARGET
from helpers_net import RespConn, RespError

LINE = re.compile(r'^\d+\.\d{6} \[0 127\.0\.0\.1:\d+\] (.*)$')


def monitored(m, n):
    """The next `n` MONITOR lines, without their time and client."""
    out = []
    for _ in range(n):
        line = m.read(timeout=5)
        match = LINE.match(line)
        assert match, line
        out.append(match.group(1))
    return out


def test_monitor_shows_commands_as_they_run(server):
    with RespConn.to(server) as m, RespConn.to(server) as c:
        assert m.call("MONITOR") == "OK"
        c.call("set", "foo", 'b"ar\n')
        c.call("get", "foo")
        assert monitored(m, 2) == ['"set" "foo" "b\\"ar\\n"', '"get" "foo"']
        c.call("multi")
        c.call("set", "foo", "bar")
        c.call("exec")
        assert monitored(m, 3) == ['"multi"', '"set" "foo" "bar"', '"exec"']
        c.call("multi")
        c.call("nosuch", "x")
        c.call("exec")
        assert monitored(m, 2) == ['"multi"', '"exec"']
        c.call("auth", "not-real")
        c.call("hello", "2", "AUTH", "not-real", "not-a-password")
        assert monitored(m, 2) == ['"auth" "(redacted)"',
                                   '"hello" "2" "AUTH" "(redacted)" "(redacted)"']


def test_save_and_shutdown_are_refused_inside_multi(server):
    with RespConn.to(server) as c:
        c.call("MULTI")
        assert c.call("SAVE") == RespError("ERR Command not allowed inside a transaction")
        assert c.call("SHUTDOWN") == RespError("ERR Command not allowed inside a transaction")
        assert str(c.call("EXEC")).startswith("EXECABORT")
        assert c.call("SHUTDOWN", "ABORT") == RespError("ERR No shutdown in progress.")


def test_a_client_that_quit_is_gone_before_the_next_write(server):
    """A REDIRECT target that sent QUIT and read its OK is gone: the next
    invalidation tells the tracking client its redirect is broken."""
    with RespConn.to(server) as a, RespConn.to(server) as target, RespConn.to(server) as w:
        a.call("HELLO", "3")
        rid = target.call("CLIENT", "ID")
        a.call("CLIENT", "TRACKING", "ON", "REDIRECT", rid)
        w.call("SET", "k", "1")
        a.call("GET", "k")
        assert target.call("QUIT") == "OK"
        w.call("SET", "k", "2")
        push = a.next_push()
        assert push[0] == b"tracking-redir-broken", push


@pytest.mark.deltagrid_only  # stopping redis-server would end the module's shared server too
def test_shutdown_stops_the_node(server):
    with RespConn.to(server) as c:
        c.send("SHUTDOWN", "NOSAVE")
    deadline = time.monotonic() + 15
    while server.proc.poll() is None:
        assert time.monotonic() < deadline, "the node did not stop"
        time.sleep(0.05)
    assert server.proc.returncode == 0
    assert b"SHUTDOWN asked by a client" in server.log_path.read_bytes()
