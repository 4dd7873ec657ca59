"""Near cache: server-assisted client-side caching (CLIENT TRACKING).

Every test here also runs against redis-server 7.0 (DELTAGRID_TEST_TARGET=redis)
except where marked. Negative assertions ("no push arrived") use a PING
round-trip from the tracking client as a barrier: Redis queues an invalidation
for client A before it acknowledges the write from client B, so a push caused
by a write B already saw acknowledged must reach A before A's next reply.
"""
import re
import threading
import time

import pytest
import redis

from conftest import TARGET
from helpers import wait_until
from helpers_net import Push, RespConn, RespError, RespSet, encode


def conn3(server):
    c = RespConn.to(server)
    hello = c.call("HELLO", "3")
    assert isinstance(hello, dict) and hello[b"proto"] == 3, hello
    return c


def conn2(server):
    return RespConn.to(server)


@pytest.fixture
def clients(server):
    """(tracker: RESP3 connection, writer: RESP2 connection)."""
    a = conn3(server)
    b = conn2(server)
    yield a, b
    a.close()
    b.close()


def invalidated_keys(conn, expected, timeout=5.0):
    """Collect invalidate pushes until all `expected` keys were named, then
    check (after a barrier) that no other key was invalidated."""
    expected = set(expected)
    seen = set()
    deadline = time.monotonic() + timeout
    while not expected <= seen:
        p = conn.next_push(max(0.0, deadline - time.monotonic()))
        assert p[0] == b"invalidate" and len(p) == 2, p
        assert isinstance(p[1], list), f"expected a key list, got {p!r}"
        seen.update(p[1])
    for p in conn.barrier():
        assert p[0] == b"invalidate", p
        seen.update(p[1] or [])
    assert seen == expected
    return seen


def assert_no_push(conn):
    got = conn.barrier()
    assert got == [], f"unexpected pushes: {got!r}"


# -- the basic push ----------------------------------------------------------

def test_invalidate_push_exact_bytes(server):
    a = RespConn.to(server)
    a.send_raw(b"HELLO 3\r\n")
    assert isinstance(a.read(), dict)
    assert a.call("CLIENT", "TRACKING", "ON") == "OK"
    assert a.call("GET", "k") is None
    with conn2(server) as b:
        assert b.call("SET", "k", "v") == "OK"
    expected = b">2\r\n$10\r\ninvalidate\r\n*1\r\n$1\r\nk\r\n"
    assert a.pos == len(a.buf), "nothing may be pending before the push"
    a.wait_buffered(len(expected))
    assert bytes(a.buf[a.pos:]) == expected
    a.close()


def test_invalidate_before_next_reply(clients):
    """The push for a write another client saw acknowledged precedes the
    reply to the tracking client's next command (what keeps a near cache from
    serving a stale value)."""
    a, b = clients
    a.ok("CLIENT", "TRACKING", "ON")
    for i in range(20):
        key = f"order:{i}"
        assert a.call("GET", key) is None
        assert b.call("SET", key, "x") == "OK"
        got = a.barrier()
        assert got == [Push([b"invalidate", [key.encode()]])], (i, got)


def test_pushes_reach_a_client_that_keeps_pipelining(clients):
    """A tracking client whose socket always has requests waiting still gets
    its invalidation while it goes on sending (pushes go out between
    batches, not only when the client pauses)."""
    a, b = clients
    a.ok("CLIENT", "TRACKING", "ON")
    assert a.call("GET", "busy:k") is None
    stop = threading.Event()
    sent = [0]
    chunk = encode("PING") * 200

    def pump():
        while not stop.is_set():
            a.sock.sendall(chunk)
            sent[0] += 200

    t = threading.Thread(target=pump, daemon=True)
    t.start()
    read = 0
    try:
        while read < 2000:
            assert a.read(timeout=10) == "PONG"
            read += 1
        assert b.call("SET", "busy:k", "v") == "OK"
        deadline = time.monotonic() + 5
        while not a.pushes and time.monotonic() < deadline:
            assert a.read(timeout=10) == "PONG"
            read += 1
        assert a.pushes == [Push([b"invalidate", [b"busy:k"]])], "no invalidation while the client kept pipelining"
    finally:
        stop.set()
        t.join(10)
        while read < sent[0]:
            a.read(timeout=10)
            read += 1


def test_redis_py_resp3_push(server):
    """The same push seen through redis-py's RESP3 parser."""
    conn = redis.Connection(host=server.host, port=server.port, protocol=3, socket_timeout=5)
    conn.connect()
    try:
        got = []
        conn._parser.set_invalidation_push_handler(got.append)
        conn.send_command("CLIENT", "TRACKING", "ON")
        assert conn.read_response() == b"OK"
        conn.send_command("GET", "k")
        assert conn.read_response() is None
        other = redis.Redis(host=server.host, port=server.port, socket_timeout=5)
        other.set("k", "v")
        other.close()
        assert conn.can_read(timeout=5)
        conn.read_response(push_request=True)
        assert got == [[b"invalidate", [b"k"]]]
    finally:
        conn.disconnect()


# -- which writes invalidate --------------------------------------------------

WRITES = {
    "set": ([("SET", "k", "v")], [("GET", "k")], ("SET", "k", "v2"), {b"k"}),
    "hset": ([("HSET", "h", "f", "v")], [("HGET", "h", "f")], ("HSET", "h", "f", "v2"), {b"h"}),
    "hset_other_field": ([("HSET", "h", "f", "v")], [("HGETALL", "h")], ("HSET", "h", "g", "1"), {b"h"}),
    "del": ([("SET", "k", "v")], [("GET", "k")], ("DEL", "k"), {b"k"}),
    "append": ([("SET", "k", "v")], [("GET", "k")], ("APPEND", "k", "x"), {b"k"}),
    "append_missing": ([], [("GET", "k")], ("APPEND", "k", "x"), {b"k"}),
    "incr": ([("SET", "n", "1")], [("GET", "n")], ("INCR", "n"), {b"n"}),
    "expire": ([("SET", "k", "v")], [("GET", "k")], ("EXPIRE", "k", "100"), {b"k"}),
    "rename": ([("SET", "src", "1"), ("SET", "dst", "2")], [("GET", "src"), ("GET", "dst")],
               ("RENAME", "src", "dst"), {b"src", b"dst"}),
    "rename_to_new": ([("SET", "src", "1")], [("GET", "src"), ("GET", "dst")],
                      ("RENAME", "src", "dst"), {b"src", b"dst"}),
    "mget_mset": ([("MSET", "m1", "1", "m2", "2")], [("MGET", "m1", "m2")],
                  ("MSET", "m1", "x", "m2", "y"), {b"m1", b"m2"}),
    "sadd": ([("SADD", "s", "a")], [("SMEMBERS", "s")], ("SADD", "s", "b"), {b"s"}),
    "srem_last": ([("SADD", "s", "a")], [("SISMEMBER", "s", "a")], ("SREM", "s", "a"), {b"s"}),
    "sinterstore": ([("SADD", "s", "a"), ("SADD", "d", "x")], [("SCARD", "d")],
                    ("SINTERSTORE", "d", "s", "s"), {b"d"}),
    "zadd": ([("ZADD", "z", "1", "a")], [("ZRANGE", "z", "0", "-1")], ("ZADD", "z", "2", "a"), {b"z"}),
    "zincrby": ([("ZADD", "z", "1", "a")], [("ZSCORE", "z", "a")], ("ZINCRBY", "z", "1", "a"), {b"z"}),
    "zpopmin": ([("ZADD", "z", "1", "a")], [("ZCARD", "z")], ("ZPOPMIN", "z"), {b"z"}),
    "setbit": ([("SET", "b", "")], [("GETBIT", "b", "3")], ("SETBIT", "b", "3", "1"), {b"b"}),
    "pfadd": ([("PFADD", "p", "x")], [("PFCOUNT", "p")], ("PFADD", "p", "y"), {b"p"}),
    "lpush": ([("RPUSH", "l", "a")], [("LRANGE", "l", "0", "-1")], ("LPUSH", "l", "b"), {b"l"}),
    "rpop_last": ([("RPUSH", "l", "a")], [("LLEN", "l")], ("RPOP", "l"), {b"l"}),
    "lmove": ([("RPUSH", "src", "a"), ("RPUSH", "dst", "b")], [("LINDEX", "src", "0"), ("LPOS", "dst", "b")],
              ("LMOVE", "src", "dst", "LEFT", "RIGHT"), {b"src", b"dst"}),
    "sort_store": ([("RPUSH", "l", "2", "1")], [("LRANGE", "d", "0", "-1")], ("SORT", "l", "STORE", "d"), {b"d"}),
}


@pytest.mark.parametrize("case", sorted(WRITES))
def test_write_invalidates(clients, case):
    setup, reads, write, keys = WRITES[case]
    a, b = clients
    for cmd in setup:
        assert not isinstance(b.call(*cmd), RespError), cmd
    a.ok("CLIENT", "TRACKING", "ON")
    for cmd in reads:
        assert not isinstance(a.call(*cmd), RespError), cmd
    assert a.barrier() == []
    r = b.call(*write)
    assert not isinstance(r, RespError), r
    invalidated_keys(a, keys)


def test_flushall_invalidates_with_null(clients):
    a, b = clients
    b.ok("SET", "k", "v")
    a.ok("CLIENT", "TRACKING", "ON")
    assert a.call("GET", "k") == b"v"
    b.ok("FLUSHALL")
    assert a.next_push() == Push([b"invalidate", None])
    # and on the wire it is the RESP3 null
    a.call("GET", "k")
    b.ok("FLUSHALL")
    want = b">2\r\n$10\r\ninvalidate\r\n_\r\n"
    a.wait_buffered(len(want))
    assert bytes(a.buf[a.pos:]) == want


def test_read_of_missing_key_is_tracked(clients):
    a, b = clients
    a.ok("CLIENT", "TRACKING", "ON")
    assert a.call("GET", "nope") is None
    b.ok("SET", "nope", "now")
    invalidated_keys(a, {b"nope"})


def test_expiry_invalidates(clients):
    a, b = clients
    b.ok("SET", "k", "v")
    a.ok("CLIENT", "TRACKING", "ON")
    assert a.call("GET", "k") == b"v"
    assert b.call("PEXPIRE", "k", "300") == 1
    invalidated_keys(a, {b"k"})  # the EXPIRE command itself is a change
    assert a.call("GET", "k") == b"v"  # tracked again
    # nobody touches the key: the server's own expiry must send the push
    assert a.next_push(timeout=5) == Push([b"invalidate", [b"k"]])
    assert a.call("GET", "k") is None


def test_set_with_px_expiry_invalidates(clients):
    a, b = clients
    b.ok("SET", "t", "v", "PX", "500")
    a.ok("CLIENT", "TRACKING", "ON")
    assert a.call("GET", "t") == b"v"
    assert a.next_push(timeout=5) == Push([b"invalidate", [b"t"]])


def test_only_first_change_invalidates(clients):
    a, b = clients
    a.ok("CLIENT", "TRACKING", "ON")
    assert a.call("GET", "k") is None
    b.ok("SET", "k", "1")
    invalidated_keys(a, {b"k"})
    b.ok("SET", "k", "2")
    assert_no_push(a)  # not read since the last invalidation
    assert a.call("GET", "k") == b"2"
    b.ok("SET", "k", "3")
    invalidated_keys(a, {b"k"})


def test_write_to_unread_key_no_push(clients):
    a, b = clients
    a.ok("CLIENT", "TRACKING", "ON")
    assert a.call("GET", "read") is None
    b.ok("SET", "unread", "1")
    assert_no_push(a)


def test_tracking_off_stops_pushes(clients):
    a, b = clients
    a.ok("CLIENT", "TRACKING", "ON")
    assert a.call("GET", "k") is None
    a.ok("CLIENT", "TRACKING", "OFF")
    b.ok("SET", "k", "1")
    assert_no_push(a)


def test_two_trackers_both_notified(server):
    a1, a2, b = conn3(server), conn3(server), conn2(server)
    for a in (a1, a2):
        a.ok("CLIENT", "TRACKING", "ON")
        assert a.call("GET", "shared") is None
    b.ok("SET", "shared", "1")
    for a in (a1, a2):
        invalidated_keys(a, {b"shared"})
    for c in (a1, a2, b):
        c.close()


# -- modes -----------------------------------------------------------------------

def test_bcast_prefix(clients):
    a, b = clients
    a.ok("CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "a:")
    b.ok("SET", "a:1", "x")  # never read by a
    invalidated_keys(a, {b"a:1"})
    b.ok("SET", "b:1", "x")
    assert_no_push(a)
    b.ok("MSET", "a:2", "1", "b:2", "1", "a:3", "1")
    invalidated_keys(a, {b"a:2", b"a:3"})
    # BCAST keeps notifying without re-reading
    b.ok("SET", "a:1", "y")
    invalidated_keys(a, {b"a:1"})


def test_bcast_without_prefix_gets_everything(clients):
    a, b = clients
    a.ok("CLIENT", "TRACKING", "ON", "BCAST")
    b.ok("SET", "anything", "1")
    invalidated_keys(a, {b"anything"})


def test_optin(clients):
    a, b = clients
    a.ok("CLIENT", "TRACKING", "ON", "OPTIN")
    assert a.call("GET", "k1") is None           # not tracked
    a.ok("CLIENT", "CACHING", "yes")
    assert a.call("GET", "k2") is None           # tracked
    assert a.call("GET", "k3") is None           # CACHING yes covered one command only
    b.ok("MSET", "k1", "1", "k2", "1", "k3", "1")
    invalidated_keys(a, {b"k2"})


def test_optin_caching_covers_the_next_transaction(clients):
    """rueidis's DoCache: CLIENT CACHING YES, MULTI, PTTL k, GET k, EXEC, in
    one write. CACHING YES applies to the whole transaction (as Redis), so
    the GET inside it is tracked and a later write is invalidated; the
    transaction after it is not covered."""
    a, b = clients
    a.ok("CLIENT", "TRACKING", "ON", "OPTIN")
    b.ok("SET", "k", "v1")
    b.ok("SET", "other", "v1")
    a.send_raw(encode("CLIENT", "CACHING", "YES") + encode("MULTI") + encode("PTTL", "k")
               + encode("GET", "k") + encode("EXEC"))
    assert [a.read() for _ in range(4)] == ["OK", "OK", "QUEUED", "QUEUED"]
    assert a.read() == [-1, b"v1"]
    a.ok("MULTI")
    assert a.call("GET", "other") == "QUEUED"
    assert a.call("EXEC") == [b"v1"]              # no CACHING YES before it
    b.ok("SET", "k", "v2")
    b.ok("SET", "other", "v2")
    invalidated_keys(a, {b"k"})


def test_optout(clients):
    a, b = clients
    a.ok("CLIENT", "TRACKING", "ON", "OPTOUT")
    a.ok("CLIENT", "CACHING", "no")
    assert a.call("GET", "k1") is None           # excluded
    assert a.call("GET", "k2") is None           # tracked
    b.ok("MSET", "k1", "1", "k2", "1")
    invalidated_keys(a, {b"k2"})


def test_noloop(clients):
    a, b = clients
    a.ok("CLIENT", "TRACKING", "ON", "NOLOOP")
    assert a.call("GET", "k") is None
    a.ok("SET", "k", "mine")
    assert_no_push(a)
    # the write consumed the tracking entry: another writer now sends nothing
    b.ok("SET", "k", "theirs")
    assert_no_push(a)
    # re-read: writes by others are still reported
    assert a.call("GET", "k") == b"theirs"
    b.ok("SET", "k", "again")
    invalidated_keys(a, {b"k"})


def test_without_noloop_own_write_pushes(clients):
    a, _ = clients
    a.ok("CLIENT", "TRACKING", "ON")
    assert a.call("GET", "k") is None
    assert a.call("SET", "k", "mine") == "OK"  # reply first or push first: both fine
    assert a.next_push() == Push([b"invalidate", [b"k"]])
    assert_no_push(a)


def test_bcast_noloop(clients):
    a, b = clients
    a.ok("CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "p:", "NOLOOP")
    a.ok("SET", "p:1", "x")
    assert_no_push(a)
    b.ok("SET", "p:1", "y")
    invalidated_keys(a, {b"p:1"})


# -- redirection ------------------------------------------------------------------

def test_redirect_resp2_pubsub(server):
    a = conn2(server)
    a_id = a.client_id()
    assert a.call("SUBSCRIBE", "__redis__:invalidate") == [b"subscribe", b"__redis__:invalidate", 1]
    b = conn2(server)
    b.ok("CLIENT", "TRACKING", "ON", "REDIRECT", a_id)
    assert b.call("GET", "k") is None
    c = conn2(server)
    c.ok("SET", "k", "v")
    assert a.read() == [b"message", b"__redis__:invalidate", [b"k"]]
    # nothing arrives on the tracking connection itself
    assert b.barrier() == []
    assert b.pos == len(b.buf)
    # FLUSHALL: a null payload ($-1) instead of the key list
    assert b.call("GET", "k") == b"v"
    c.ok("FLUSHALL")
    want = b"*3\r\n$7\r\nmessage\r\n$20\r\n__redis__:invalidate\r\n$-1\r\n"
    a.wait_buffered(len(want))
    assert bytes(a.buf[a.pos:]) == want
    for x in (a, b, c):
        x.close()


def test_redirect_to_resp3_client(server):
    a = conn3(server)
    b = conn2(server)
    b.ok("CLIENT", "TRACKING", "ON", "REDIRECT", a.client_id())
    assert b.call("GET", "k") is None
    with conn2(server) as c:
        c.ok("SET", "k", "v")
    assert a.next_push() == Push([b"invalidate", [b"k"]])
    a.close()
    b.close()


def test_redirect_broken(server):
    a = conn2(server)
    a_id = a.client_id()
    b = conn3(server)
    b.ok("CLIENT", "TRACKING", "ON", "REDIRECT", a_id)
    assert b.call("GET", "k") is None
    a.close()
    c = conn2(server)
    # a's disconnect is processed asynchronously: keep writing until b hears
    deadline = time.monotonic() + 5
    push = None
    while push is None and time.monotonic() < deadline:
        c.ok("SET", "k", "v")
        got = b.barrier()
        if got:
            push = got[0]
        else:
            assert b.call("GET", "k") == b"v"  # track it again and retry
    assert push == Push([b"tracking-redir-broken", a_id])
    info = b.call("CLIENT", "TRACKINGINFO")
    assert set(info[b"flags"]) == {b"on", b"broken_redirect"}
    assert info[b"redirect"] == a_id
    b.close()
    c.close()


def test_redirect_to_missing_client(server):
    with conn2(server) as c:
        r = c.call("CLIENT", "TRACKING", "ON", "REDIRECT", "987654321")
        assert r == RespError("ERR The client ID you want redirect to does not exist")


def test_resp2_tracking_without_redirect_is_allowed_and_silent(server):
    """Redis 7 accepts TRACKING ON on a RESP2 connection without REDIRECT; it
    cannot push, so it sends nothing (the reply stream stays clean)."""
    b = conn2(server)
    assert b.call("CLIENT", "TRACKING", "ON") == "OK"
    assert b.call("GET", "k") is None
    with conn2(server) as c:
        c.ok("SET", "k", "v")
    assert b.call("PING") == "PONG"
    assert b.pushes == [] and b.pos == len(b.buf)
    assert b.call("GET", "k") == b"v"
    b.close()


# -- introspection -------------------------------------------------------------------

def test_trackinginfo_resp3_shape(server):
    a = conn3(server)
    info = a.call("CLIENT", "TRACKINGINFO")
    assert info == {b"flags": RespSet([b"off"]), b"redirect": -1, b"prefixes": []}
    assert isinstance(info[b"flags"], RespSet)  # a RESP3 set
    a.ok("CLIENT", "TRACKING", "ON")
    assert a.call("CLIENT", "TRACKINGINFO") == {b"flags": RespSet([b"on"]), b"redirect": 0, b"prefixes": []}
    a.ok("CLIENT", "TRACKING", "OFF")
    a.ok("CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "a", "PREFIX", "b", "NOLOOP")
    info = a.call("CLIENT", "TRACKINGINFO")
    assert set(info[b"flags"]) == {b"on", b"bcast", b"noloop"}
    assert sorted(info[b"prefixes"]) == [b"a", b"b"]
    assert info[b"redirect"] == 0
    a.ok("CLIENT", "TRACKING", "OFF")
    a.ok("CLIENT", "TRACKING", "ON", "BCAST")
    assert a.call("CLIENT", "TRACKINGINFO")[b"prefixes"] == [b""]
    a.ok("CLIENT", "TRACKING", "OFF")
    a.ok("CLIENT", "TRACKING", "ON", "OPTIN")
    assert set(a.call("CLIENT", "TRACKINGINFO")[b"flags"]) == {b"on", b"optin"}
    a.ok("CLIENT", "CACHING", "yes")
    assert set(a.call("CLIENT", "TRACKINGINFO")[b"flags"]) == {b"on", b"optin", b"caching-yes"}
    # any other command (here PING) consumes CACHING yes
    assert a.call("PING") == "PONG"
    assert set(a.call("CLIENT", "TRACKINGINFO")[b"flags"]) == {b"on", b"optin"}
    a.ok("CLIENT", "TRACKING", "OFF")
    a.ok("CLIENT", "TRACKING", "ON", "OPTOUT")
    a.ok("CLIENT", "CACHING", "no")
    assert set(a.call("CLIENT", "TRACKINGINFO")[b"flags"]) == {b"on", b"optout", b"caching-no"}
    a.ok("CLIENT", "TRACKING", "OFF")
    assert a.call("CLIENT", "TRACKINGINFO") == {b"flags": RespSet([b"off"]), b"redirect": -1, b"prefixes": []}
    a.close()


def test_trackinginfo_resp2_shape(server):
    b = conn2(server)
    assert b.call("CLIENT", "TRACKINGINFO") == [b"flags", [b"off"], b"redirect", -1, b"prefixes", []]
    a = conn2(server)
    a_id = a.client_id()
    b.ok("CLIENT", "TRACKING", "ON", "REDIRECT", a_id)
    assert b.call("CLIENT", "TRACKINGINFO") == [b"flags", [b"on"], b"redirect", a_id, b"prefixes", []]
    a.close()
    b.close()


def test_getredir(server):
    a = conn2(server)
    b = conn2(server)
    assert b.call("CLIENT", "GETREDIR") == -1
    b.ok("CLIENT", "TRACKING", "ON")
    assert b.call("CLIENT", "GETREDIR") == 0
    b.ok("CLIENT", "TRACKING", "OFF")
    assert b.call("CLIENT", "GETREDIR") == -1
    a_id = a.client_id()
    b.ok("CLIENT", "TRACKING", "ON", "REDIRECT", a_id)
    assert b.call("CLIENT", "GETREDIR") == a_id
    a.close()
    b.close()


# -- errors ---------------------------------------------------------------------------

ERRORS = [
    ([], ("CLIENT", "CACHING", "yes"),
     "ERR CLIENT CACHING can be called only when the client is in tracking mode "
     "with OPTIN or OPTOUT mode enabled"),
    ([("CLIENT", "TRACKING", "ON")], ("CLIENT", "CACHING", "yes"),
     "ERR CLIENT CACHING YES is only valid when tracking is enabled in OPTIN mode."),
    ([("CLIENT", "TRACKING", "ON")], ("CLIENT", "CACHING", "no"),
     "ERR CLIENT CACHING NO is only valid when tracking is enabled in OPTOUT mode."),
    ([("CLIENT", "TRACKING", "ON", "OPTOUT")], ("CLIENT", "CACHING", "yes"),
     "ERR CLIENT CACHING YES is only valid when tracking is enabled in OPTIN mode."),
    ([("CLIENT", "TRACKING", "ON", "OPTIN")], ("CLIENT", "CACHING", "no"),
     "ERR CLIENT CACHING NO is only valid when tracking is enabled in OPTOUT mode."),
    ([("CLIENT", "TRACKING", "ON", "OPTIN")], ("CLIENT", "CACHING", "maybe"), "ERR syntax error"),
    ([], ("CLIENT", "TRACKING", "maybe"), "ERR syntax error"),
    ([], ("CLIENT", "TRACKING", "ON", "BOGUS"), "ERR syntax error"),
    ([], ("CLIENT", "TRACKING", "ON", "PREFIX", "x"), "ERR PREFIX option requires BCAST mode to be enabled"),
    ([], ("CLIENT", "TRACKING", "ON", "OPTIN", "OPTOUT"),
     "ERR You can't specify both OPTIN mode and OPTOUT mode"),
    ([], ("CLIENT", "TRACKING", "ON", "BCAST", "OPTIN"),
     "ERR OPTIN and OPTOUT are not compatible with BCAST"),
    ([], ("CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "a", "PREFIX", "ab"),
     "ERR Prefix 'a' overlaps with another provided prefix 'ab'. "
     "Prefixes for a single client must not overlap."),
    ([("CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "ab")], ("CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "a"),
     "ERR Prefix 'a' overlaps with an existing prefix 'ab'. Prefixes for a single client must not overlap."),
    ([("CLIENT", "TRACKING", "ON")], ("CLIENT", "TRACKING", "ON", "BCAST"),
     "ERR You can't switch BCAST mode on/off before disabling tracking for this client, "
     "and then re-enabling it with a different mode."),
    ([("CLIENT", "TRACKING", "ON", "OPTIN")], ("CLIENT", "TRACKING", "ON", "OPTOUT"),
     "ERR You can't switch OPTIN/OPTOUT mode before disabling tracking for this client, "
     "and then re-enabling it with a different mode."),
]


@pytest.mark.parametrize("setup,cmd,error", ERRORS, ids=[str(i) for i in range(len(ERRORS))])
def test_tracking_errors(server, setup, cmd, error):
    with conn3(server) as c:
        for s in setup:
            c.ok(*s)
        assert c.call(*cmd) == RespError(error)
        c.call("PING")  # connection still usable


def test_bcast_sends_one_message_per_prefix_for_a_transaction(clients):
    """As Redis's tracking.tcl: the writes of one MULTI/EXEC come as one
    message per matching prefix; default mode sends one message per key."""
    a, b = clients
    a.ok("CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "a:", "PREFIX", "b:")
    a.ok("MULTI")
    for k in ["a:1", "a:2", "b:1", "b:2", "c:1"]:
        assert a.call("INCR", k) == "QUEUED"
    assert a.call("EXEC") == [1, 1, 1, 1, 1]
    pushes = [a.next_push(), a.next_push()]
    assert sorted(sorted(p[1]) for p in pushes) == [[b"a:1", b"a:2"], [b"b:1", b"b:2"]]
    assert_no_push(a)
    a.ok("CLIENT", "TRACKING", "OFF")
    a.ok("CLIENT", "TRACKING", "ON")
    assert a.call("MGET", "x", "y") == [None, None]
    b.ok("MSET", "x", "1", "y", "2")
    assert sorted([a.next_push()[1], a.next_push()[1]]) == [[b"x"], [b"y"]]
    assert_no_push(a)


def test_keys_read_before_switching_to_bcast_are_not_invalidated_one_by_one(clients):
    """Redis's tracking.tcl: keys read in default mode, then tracking off and
    on in BCAST mode: one BCAST message, not stale per-key ones first."""
    a, b = clients
    a.ok("CLIENT", "TRACKING", "ON")
    assert a.call("MGET", "a", "b", "c") == [None, None, None]
    a.ok("CLIENT", "TRACKING", "OFF")
    a.ok("CLIENT", "TRACKING", "ON", "BCAST")
    b.ok("MSET", "a", "1", "b", "2", "c", "3")
    p = a.next_push()
    assert p[0] == b"invalidate" and sorted(p[1]) == [b"a", b"b", b"c"], p
    assert_no_push(a)


def test_optin_or_optout_may_follow_default_mode_but_not_each_other(clients):
    a, _ = clients
    a.ok("CLIENT", "TRACKING", "ON")
    a.ok("CLIENT", "TRACKING", "ON", "OPTIN")
    assert a.call("CLIENT", "TRACKING", "ON", "OPTOUT") == RespError(
        "ERR You can't switch OPTIN/OPTOUT mode before disabling tracking for this client, "
        "and then re-enabling it with a different mode.")
    a.ok("CLIENT", "TRACKING", "ON")


def test_lowering_tracking_table_max_keys_invalidates_at_once(clients, server):
    a, b = clients
    a.ok("CLIENT", "TRACKING", "ON")
    for i in range(50):
        assert a.call("GET", f"k{i}") is None
    try:
        b.ok("CONFIG", "SET", "tracking-table-max-keys", "1")
        seen = [a.next_push()[1] for _ in range(49)]
        assert all(len(keys) == 1 for keys in seen)
        assert len({k[0] for k in seen}) == 49
        assert_no_push(a)
    finally:
        b.ok("CONFIG", "SET", "tracking-table-max-keys", "1000000")


def test_bcast_prefix_added_later_is_merged(clients):
    a, b = clients
    a.ok("CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "x:")
    a.ok("CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "y:")
    assert sorted(a.call("CLIENT", "TRACKINGINFO")[b"prefixes"]) == [b"x:", b"y:"]
    b.ok("MSET", "x:1", "1", "y:1", "1", "z:1", "1")
    invalidated_keys(a, {b"x:1", b"y:1"})


# -- redis-py's client-side cache ---------------------------------------------------------

@pytest.mark.deltagrid_only
def test_the_version_reported_is_the_command_set_implemented(server):
    """HELLO and INFO report 7.2: Jedis and redis-py switch features on from
    this number, and 7.4's commands (HEXPIRE and the other hash-field
    expiry commands) do not exist here. redis-py's own client-side cache
    asks for 7.4 and so stays off unless its gate is lowered (below)."""
    with conn2(server) as c:
        hello = c.call("HELLO", "3")
        info = c.call("INFO", "server").decode()
        hexpire = c.call("HEXPIRE", "h", "10", "FIELDS", "1", "f")
    assert hello[b"server"] == b"redis", hello
    version = hello[b"version"].decode()
    assert re.fullmatch(r"7\.2\.\d+", version), version
    assert f"redis_version:{version}\r\n" in info
    assert isinstance(hexpire, Exception) and "unknown command" in str(hexpire), hexpire


def test_redis_py_cache_sees_fresh_value(server, monkeypatch):
    from redis.cache import CacheConfig
    from redis.connection import CacheProxyConnection
    # redis-py's cache asks for a server of 7.4 or later; redis-server 7.0 and
    # deltagrid (7.2) are refused by that gate, so lower it: what is checked
    # here is the caching behaviour itself.
    monkeypatch.setattr(CacheProxyConnection, "MIN_ALLOWED_VERSION", "7.0.0")
    plain = redis.Redis(host=server.host, port=server.port, socket_timeout=5)
    cached = redis.Redis(host=server.host, port=server.port, protocol=3,
                         cache_config=CacheConfig(), socket_timeout=5)
    try:
        plain.set("k", "v1")
        assert cached.get("k") == b"v1"
        assert cached.get("k") == b"v1"
        cache = cached.get_cache()
        assert cache.size == 1  # served from the near cache
        plain.set("k", "v2")
        wait_until(lambda: cached.get("k") == b"v2", timeout=5, message="cached client sees v2")
        plain.delete("k")
        wait_until(lambda: cached.get("k") is None, timeout=5, message="cached client sees delete")
        plain.set("k", "v3")
        assert wait_until(lambda: cached.get("k") == b"v3", timeout=5)
        plain.flushall()
        wait_until(lambda: cached.get("k") is None, timeout=5, message="cached client sees FLUSHALL")
    finally:
        cached.close()
        plain.close()
