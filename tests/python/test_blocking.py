"""Blocking sorted-set pops (BZPOPMIN, BZPOPMAX, BZMPOP): exact Redis 7.0
replies, clients that wait and are woken in the order they blocked, timeouts,
CLIENT UNBLOCK, MULTI, and nothing left behind by a client that goes away.

No test sleeps and hopes: a client is known to be blocked when CLIENT LIST
shows it with flag `b` (and INFO counts it in blocked_clients)."""
import time

import pytest

from helpers import WRONGTYPE, arity, wait_until
from helpers_clients import blocked_clients, blocked_ids, connect, wait_blocked
from helpers_net import bulks, err_bytes

pytestmark = pytest.mark.shared_server

NULL2 = b"*-1\r\n"
NULL3 = b"_\r\n"
NOT_FLOAT = "ERR timeout is not a float or out of range"
NEGATIVE = "ERR timeout is negative"
NUMKEYS = "ERR numkeys should be greater than 0"
UNBLOCKED = "UNBLOCKED client unblocked via CLIENT UNBLOCK"



def popped3(key, member, score):
    """BZPOPMIN's reply in RESP3: the score as a double."""
    return b"*3\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n,%s\r\n" % (
        len(key), key.encode(), len(member), member.encode(), str(score).encode())


def mpopped(key, *pairs, resp3=False):
    """BZMPOP's reply: [key, [[member, score], ...]]."""
    out = b"*2\r\n$%d\r\n%s\r\n*%d\r\n" % (len(key), key.encode(), len(pairs))
    for m, s in pairs:
        score = b",%s\r\n" % str(s).encode() if resp3 else b"$%d\r\n%s\r\n" % (len(str(s)), str(s).encode())
        out += b"*2\r\n$%d\r\n%s\r\n" % (len(m), m.encode()) + score
    return out






def test_immediate_pops(conn):
    conn.cmd("ZADD", "z", "1", "a", "2", "b", "3", "c", "4", "d")
    assert conn.cmd("BZPOPMIN", "z", "0") == bulks("z", "a", "1")
    assert conn.cmd("BZPOPMAX", "z", "0") == bulks("z", "d", "4")
    # The first key that holds members, whatever the keys before it.
    assert conn.cmd("BZPOPMIN", "nokey", "z", "1") == bulks("z", "b", "2")
    assert conn.cmd("BZMPOP", "0", "2", "nokey", "z", "MAX", "COUNT", "5") == mpopped("z", ("c", 3))
    assert conn.cmd("EXISTS", "z") == b":0\r\n"
    conn.cmd("ZADD", "z", "1.5", "a", "2", "b")
    assert conn.cmd("BZMPOP", "0", "1", "z", "MIN") == mpopped("z", ("a", "1.5"))
    conn.call("HELLO", "3")
    assert conn.cmd("BZPOPMAX", "z", "0") == popped3("z", "b", 2)
    conn.cmd("ZADD", "z", "1", "a", "2", "b")
    assert conn.cmd("BZMPOP", "0", "1", "z", "MIN", "COUNT", "2") == mpopped("z", ("a", 1), ("b", 2), resp3=True)


def test_argument_errors(conn):
    for cmd in ("BZPOPMIN", "BZPOPMAX"):
        assert conn.cmd(cmd, "k") == err_bytes(arity(cmd.lower()))
        assert conn.cmd(cmd, "k", "abc") == err_bytes(NOT_FLOAT)
        assert conn.cmd(cmd, "k", "nan") == err_bytes(NOT_FLOAT)
        assert conn.cmd(cmd, "k", "-1") == err_bytes(NEGATIVE)
        assert conn.cmd(cmd, "k", "-0.5") == err_bytes(NEGATIVE)
        # (long long)(seconds * 1000) of what does not fit is negative.
        assert conn.cmd(cmd, "k", "1e100") == err_bytes(NEGATIVE)
        assert conn.cmd(cmd, "k", "inf") == err_bytes(NEGATIVE)
    assert conn.cmd("BZMPOP", "0", "1", "k") == err_bytes(arity("bzmpop"))
    assert conn.cmd("BZMPOP", "abc", "1", "k", "MIN") == err_bytes(NOT_FLOAT)
    # The timeout is read after the other arguments.
    assert conn.cmd("BZMPOP", "abc", "0", "k", "MIN") == err_bytes(NUMKEYS)
    assert conn.cmd("BZMPOP", "abc", "1", "k", "FOO") == err_bytes("ERR syntax error")
    assert conn.cmd("BZMPOP", "-1", "1", "k", "MIN", "COUNT", "0") == err_bytes(
        "ERR count should be greater than 0")
    assert conn.cmd("BZMPOP", "-1", "1", "k", "MIN") == err_bytes(NEGATIVE)
    assert conn.cmd("BZMPOP", "0", "0", "k", "MIN") == err_bytes(NUMKEYS)
    assert conn.cmd("BZMPOP", "0", "a", "k", "MIN") == err_bytes(NUMKEYS)
    assert conn.cmd("BZMPOP", "0", "-1", "k", "MIN") == err_bytes(NUMKEYS)
    assert conn.cmd("BZMPOP", "0", "2", "k", "MIN") == err_bytes("ERR syntax error")
    assert conn.cmd("BZMPOP", "0", "1", "k", "FOO") == err_bytes("ERR syntax error")
    assert conn.cmd("BZMPOP", "0", "1", "k", "MIN", "COUNT") == err_bytes("ERR syntax error")
    assert conn.cmd("BZMPOP", "0", "1", "k", "MIN", "COUNT", "0") == err_bytes(
        "ERR count should be greater than 0")
    assert conn.cmd("BZMPOP", "0", "1", "k", "MIN", "COUNT", "1", "COUNT", "1") == err_bytes(
        "ERR syntax error")


def test_wrong_type(conn):
    conn.cmd("SET", "s", "x")
    conn.cmd("ZADD", "z", "1", "a")
    assert conn.cmd("BZPOPMIN", "s", "0") == err_bytes(WRONGTYPE)
    assert conn.cmd("BZPOPMAX", "nokey", "s", "0") == err_bytes(WRONGTYPE)
    assert conn.cmd("BZMPOP", "0", "1", "s", "MIN") == err_bytes(WRONGTYPE)
    # Keys are taken in order: a sorted set before the string is popped.
    assert conn.cmd("BZPOPMIN", "s", "z", "0") == err_bytes(WRONGTYPE)
    assert conn.cmd("BZPOPMIN", "z", "s", "0") == bulks("z", "a", "1")


@pytest.mark.parametrize("resp3", [False, True], ids=["resp2", "resp3"])
def test_blocked_until_another_client_adds(server, conn, resp3):
    with connect(server, resp3) as waiter:
        waiter.send("BZPOPMIN", "k1", "k2", "0")
        wait_blocked(conn, waiter)
        assert blocked_clients(conn) == 1
        line = [l for l in conn.call("CLIENT", "LIST").decode().splitlines() if f"id={waiter.id} " in l][0]
        assert " cmd=bzpopmin " in line
        conn.cmd("ZADD", "k2", "5", "m", "6", "n")
        expected = popped3("k2", "m", 5) if resp3 else bulks("k2", "m", "5")
        assert waiter.read_raw() == expected
        assert conn.cmd("ZRANGE", "k2", "0", "-1") == bulks("n")
        wait_until(lambda: blocked_clients(conn) == 0, message="no client blocked")

        # k2 still holds "n": no wait.
        assert waiter.cmd("BZMPOP", "0", "2", "k3", "k2", "MAX", "COUNT", "3") == mpopped(
            "k2", ("n", 6), resp3=resp3)

        waiter.send("BZMPOP", "0", "2", "k3", "k2", "MAX", "COUNT", "3")
        wait_blocked(conn, waiter)
        conn.cmd("ZADD", "k3", "1", "a", "2", "b")
        assert waiter.read_raw() == mpopped("k3", ("b", 2), ("a", 1), resp3=resp3)
        assert conn.cmd("EXISTS", "k3") == b":0\r\n"


def test_clients_are_served_in_the_order_they_blocked(server, conn):
    with connect(server) as first, connect(server) as second, connect(server) as third:
        first.send("BZPOPMIN", "k", "0")
        wait_blocked(conn, first)
        second.send("BZPOPMIN", "k", "0")
        wait_blocked(conn, second)
        third.send("BZPOPMAX", "other", "k", "0")
        wait_blocked(conn, third)
        # Two members for three clients: the first two get them, in order.
        conn.cmd("ZADD", "k", "1", "x", "2", "y")
        assert first.read_raw() == bulks("k", "x", "1")
        assert second.read_raw() == bulks("k", "y", "2")
        wait_until(lambda: blocked_ids(conn) == {third.id}, message="only the third client blocked")
        conn.cmd("ZADD", "k", "3", "z")
        assert third.read_raw() == bulks("k", "z", "3")
        wait_until(lambda: blocked_clients(conn) == 0, message="no client blocked")


def test_a_client_that_blocked_first_keeps_its_place(server, conn):
    with connect(server) as first, connect(server) as second:
        first.send("BZPOPMIN", "k", "0")
        wait_blocked(conn, first)
        second.send("BZPOPMIN", "k", "0")
        wait_blocked(conn, second)
        # Members taken in the same transaction never reach the waiters.
        conn.call("MULTI")
        conn.call("ZADD", "k", "1", "a")
        conn.call("ZPOPMIN", "k")
        assert conn.call("EXEC") == [1, [b"a", b"1"]]
        assert blocked_ids(conn) >= {first.id, second.id}
        conn.cmd("ZADD", "k", "2", "b")
        assert first.read_raw() == bulks("k", "b", "2")
        conn.cmd("ZADD", "k", "3", "c")
        assert second.read_raw() == bulks("k", "c", "3")


@pytest.mark.parametrize("resp3", [False, True], ids=["resp2", "resp3"])
def test_timeout_answers_null(server, conn, resp3):
    with connect(server, resp3) as waiter:
        null = NULL3 if resp3 else NULL2
        for cmd in (("BZPOPMIN", "k", "0.3"), ("BZPOPMAX", "k", "a", "0.3"),
                    ("BZMPOP", "0.3", "2", "k", "a", "MIN")):
            start = time.monotonic()
            waiter.send(*cmd)
            assert waiter.read_raw(timeout=5) == null
            elapsed = time.monotonic() - start
            assert 0.25 <= elapsed < 3.0, (cmd, elapsed)
        wait_until(lambda: blocked_clients(conn) == 0, message="no client blocked")
        assert waiter.cmd("PING") == b"+PONG\r\n"


def test_client_unblock(server, conn):
    with connect(server) as waiter:
        assert conn.cmd("CLIENT", "UNBLOCK", str(waiter.id)) == b":0\r\n"
        assert conn.cmd("CLIENT", "UNBLOCK", "999999") == b":0\r\n"
        assert conn.cmd("CLIENT", "UNBLOCK", "abc") == err_bytes("ERR value is not an integer or out of range")
        assert conn.cmd("CLIENT", "UNBLOCK", str(waiter.id), "foo") == err_bytes(
            "ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR")
        assert conn.cmd("CLIENT", "UNBLOCK") == err_bytes(arity("client|unblock"))

        waiter.send("BZPOPMIN", "k", "0")
        wait_blocked(conn, waiter)
        assert conn.cmd("CLIENT", "UNBLOCK", str(waiter.id)) == b":1\r\n"
        assert waiter.read_raw() == NULL2

        waiter.send("BZMPOP", "0", "1", "k", "MIN")
        wait_blocked(conn, waiter)
        assert conn.cmd("CLIENT", "UNBLOCK", str(waiter.id), "TIMEOUT") == b":1\r\n"
        assert waiter.read_raw() == NULL2

        waiter.send("BZPOPMAX", "k", "0")
        wait_blocked(conn, waiter)
        assert conn.cmd("CLIENT", "UNBLOCK", str(waiter.id), "ERROR") == b":1\r\n"
        assert waiter.read_raw() == err_bytes(UNBLOCKED)

        wait_until(lambda: blocked_clients(conn) == 0, message="no client blocked")
        assert conn.cmd("CLIENT", "UNBLOCK", str(waiter.id)) == b":0\r\n"
        # Unblocked, it waits for the key no more: the members stay.
        conn.cmd("ZADD", "k", "1", "a")
        assert waiter.cmd("ZCARD", "k") == b":1\r\n"


@pytest.mark.parametrize("resp3", [False, True], ids=["resp2", "resp3"])
def test_multi_does_not_block(conn, resp3):
    if resp3:
        conn.call("HELLO", "3")
    null = NULL3 if resp3 else NULL2
    conn.cmd("MULTI")
    assert conn.cmd("BZPOPMIN", "k", "0") == b"+QUEUED\r\n"
    assert conn.cmd("BZMPOP", "0", "1", "k", "MIN") == b"+QUEUED\r\n"
    assert conn.cmd("ZADD", "k", "1", "a") == b"+QUEUED\r\n"
    assert conn.cmd("BZPOPMAX", "k", "0") == b"+QUEUED\r\n"
    popped = popped3("k", "a", 1) if resp3 else bulks("k", "a", "1")
    assert conn.cmd("EXEC") == b"*4\r\n" + null + null + b":1\r\n" + popped
    assert blocked_clients(conn) == 0


def test_pipelined_requests_wait_for_the_blocked_one(server, conn):
    with connect(server) as waiter:
        waiter.send_raw(b"".join([
            b"*3\r\n$8\r\nBZPOPMIN\r\n$1\r\nk\r\n$1\r\n0\r\n",
            b"*2\r\n$4\r\nECHO\r\n$5\r\nafter\r\n",
        ]))
        wait_blocked(conn, waiter)
        conn.cmd("ZADD", "k", "1", "a")
        assert waiter.read_raw() == bulks("k", "a", "1")
        assert waiter.read_raw() == b"$5\r\nafter\r\n"


def test_a_key_of_another_type_keeps_the_client_waiting(server, conn):
    with connect(server) as waiter:
        waiter.send("BZPOPMIN", "k", "0")
        wait_blocked(conn, waiter)
        conn.cmd("SET", "k", "string")
        conn.cmd("DEL", "k")
        assert waiter.id in blocked_ids(conn)
        conn.cmd("ZADD", "k", "1", "a")
        assert waiter.read_raw() == bulks("k", "a", "1")


def test_a_client_gone_while_blocked_leaves_nothing_behind(server, conn):
    waiter = connect(server)
    waiter.send("BZPOPMIN", "k", "0")
    wait_blocked(conn, waiter)
    assert blocked_clients(conn) == 1
    waiter.close()
    wait_until(lambda: blocked_clients(conn) == 0, message="no client blocked")
    assert waiter.id not in blocked_ids(conn)
    conn.cmd("ZADD", "k", "1", "a", "2", "b")
    assert conn.cmd("ZCARD", "k") == b":2\r\n"
    with connect(server) as other:
        assert other.cmd("BZPOPMIN", "k", "0") == bulks("k", "a", "1")
