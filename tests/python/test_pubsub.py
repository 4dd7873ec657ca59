"""Pub/sub on one node: channels, patterns, shard channels, PUBSUB
introspection, and the connection commands that see subscribers (CLIENT
KILL TYPE, CLIENT LIST). Every test here also runs against redis-server
(DELTAGRID_TEST_TARGET=redis). Pub/sub across the nodes of a site is in
test_pubsub_site.py."""
import time

import pytest

from helpers_net import RespConn, RespError


@pytest.fixture
def pair(server):
    """(subscriber, publisher), both RESP2."""
    a, b = RespConn.to(server), RespConn.to(server)
    yield a, b
    a.close()
    b.close()


def test_pattern_subscriptions_receive_pmessages(pair):
    a, b = pair
    assert a.call("PSUBSCRIBE", "news.*") == [b"psubscribe", b"news.*", 1]
    assert a.call("SUBSCRIBE", "news.a") == [b"subscribe", b"news.a", 2]
    assert b.call("PUBLISH", "news.a", "hi") == 2   # once by channel, once by pattern
    got = [a.read(), a.read()]
    assert got == [[b"message", b"news.a", b"hi"], [b"pmessage", b"news.*", b"news.a", b"hi"]]
    assert b.call("PUBLISH", "other", "x") == 0
    assert a.call("PUNSUBSCRIBE", "news.*") == [b"punsubscribe", b"news.*", 1]
    assert b.call("PUBLISH", "news.a", "again") == 1
    assert a.read() == [b"message", b"news.a", b"again"]
    assert a.call("PUNSUBSCRIBE") == [b"punsubscribe", None, 1]
    assert a.call("UNSUBSCRIBE") == [b"unsubscribe", b"news.a", 0]
    assert a.call("PING") == "PONG"                   # out of subscribed mode


def test_pattern_messages_in_resp3_are_pushes(server):
    with RespConn.to(server) as a, RespConn.to(server) as b:
        a.call("HELLO", "3")
        a.send("PSUBSCRIBE", "n*")
        assert a.next_push() == [b"psubscribe", b"n*", 1]
        assert b.call("PUBLISH", "news", "m") == 1
        assert a.next_push() == [b"pmessage", b"n*", b"news", b"m"]
        assert a.call("GET", "k") is None              # RESP3: commands still allowed


def test_shard_channels(pair):
    a, b = pair
    assert a.call("SSUBSCRIBE", "orders") == [b"ssubscribe", b"orders", 1]
    assert a.call("SUBSCRIBE", "plain") == [b"subscribe", b"plain", 1]   # counted apart
    assert b.call("SPUBLISH", "orders", "o1") == 1
    assert a.read() == [b"smessage", b"orders", b"o1"]
    assert b.call("PUBLISH", "orders", "not a shard message") == 0
    assert a.call("SUNSUBSCRIBE") == [b"sunsubscribe", b"orders", 0]
    assert b.call("SPUBLISH", "orders", "o2") == 0


def test_pubsub_introspection(server):
    with RespConn.to(server) as a, RespConn.to(server) as b, RespConn.to(server) as q:
        a.call("SUBSCRIBE", "c1", "c2")
        b.call("SUBSCRIBE", "c1")
        b.call("PSUBSCRIBE", "p*", "q*")
        a.call("PSUBSCRIBE", "p*")
        a.call("SSUBSCRIBE", "s1")
        assert sorted(q.call("PUBSUB", "CHANNELS")) == [b"c1", b"c2"]
        assert q.call("PUBSUB", "CHANNELS", "*2") == [b"c2"]
        assert q.call("PUBSUB", "NUMSUB", "c1", "c2", "c3") == [b"c1", 2, b"c2", 1, b"c3", 0]
        assert q.call("PUBSUB", "NUMSUB") == []
        assert q.call("PUBSUB", "NUMPAT") == 2
        assert q.call("PUBSUB", "SHARDCHANNELS") == [b"s1"]
        assert q.call("PUBSUB", "SHARDNUMSUB", "s1", "s2") == [b"s1", 1, b"s2", 0]
        assert q.call("PUBSUB", "NUMPAT", "x") == RespError(
            "ERR wrong number of arguments for 'pubsub|numpat' command")
        assert q.call("PUBSUB", "NOPE") == RespError(
            "ERR unknown subcommand 'NOPE'. Try PUBSUB HELP.")


def test_client_kill_type(server):
    with RespConn.to(server) as sub, RespConn.to(server) as c:
        sub.call("SUBSCRIBE", "x")
        assert c.call("CLIENT", "KILL", "TYPE", "wrong_type") == RespError(
            "ERR Unknown client type 'wrong_type'")
        assert c.call("CLIENT", "KILL", "TYPE", "master") == 0
        assert c.call("CLIENT", "KILL", "USER", "wrong_user") == RespError("ERR No such user 'wrong_user'")
        assert c.call("CLIENT", "KILL", "TYPE", "pubsub") == 1
        assert c.call("PUBSUB", "NUMSUB", "x") in ([b"x", 0], [b"x", 1])  # the kill is asynchronous
        deadline = time.monotonic() + 5
        while c.call("PUBSUB", "NUMSUB", "x") != [b"x", 0]:
            assert time.monotonic() < deadline
            time.sleep(0.01)


def test_client_list_shows_subscriptions_and_the_query_buffer(server):
    with RespConn.to(server) as a, RespConn.to(server) as c:
        a.call("SUBSCRIBE", "c1", "c2")
        a.call("PSUBSCRIBE", "p*")
        a.call("SSUBSCRIBE", "s")
        a.send_raw(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\nab")    # half a command
        time.sleep(0.2)
        line = next(l for l in c.call("CLIENT", "LIST").decode().splitlines()
                    if "cmd=ssubscribe" in l)
        fields = dict(f.split("=", 1) for f in line.split())
        assert (fields["sub"], fields["psub"], fields["ssub"]) == ("2", "1", "1")
        assert "P" in fields["flags"]
        assert int(fields["qbuf"]) > 0, line
        # The caller's own line counts the request being run (Redis: 26 bytes).
        line = next(l for l in c.call("CLIENT", "LIST").decode().splitlines()
                    if "cmd=client|list" in l)
        assert " qbuf=26 " in line, line


def test_wait_on_a_node_without_replicas(server):
    with RespConn.to(server) as c:
        assert c.call("SET", "k", "v") == "OK"
        assert c.call("WAIT", 0, 0) == 0
        assert c.call("WAIT", 1, 50) == 0
        assert c.call("WAIT", 1, -1) == RespError("ERR timeout is negative")
        assert c.call("WAIT", "x", 0) == RespError("ERR value is not an integer or out of range")


def test_client_reply_off_and_skip_keep_pubsub_messages(server):
    with RespConn.to(server) as a, RespConn.to(server) as b:
        a.send("CLIENT", "REPLY", "OFF")
        a.send("SET", "k", "1")                     # no reply
        assert a.call("SUBSCRIBE", "ch") == [b"subscribe", b"ch", 1]   # still confirmed
        assert b.call("PUBLISH", "ch", "m") == 1
        assert a.read() == [b"message", b"ch", b"m"]
        assert a.call("UNSUBSCRIBE", "ch") == [b"unsubscribe", b"ch", 0]
        assert a.call("CLIENT", "REPLY", "ON") == "OK"
        a.send("CLIENT", "REPLY", "SKIP")
        a.send("GET", "k")                          # skipped
        assert a.call("GET", "k") == b"1"
        a.send("CLIENT", "REPLY", "SKIP")
        assert a.call("PSUBSCRIBE", "p*") == [b"psubscribe", b"p*", 1]   # a confirmation is not skipped
        assert a.call("PUNSUBSCRIBE") == [b"punsubscribe", b"p*", 0]
        assert a.call("CLIENT", "REPLY", "MAYBE") == RespError("ERR syntax error")


def test_publish_after_an_unsubscribe_sent_before_it_reaches_nobody(server):
    """Redis's pubsub.tcl: UNSUBSCRIBE is sent (its reply not awaited), then
    another connection publishes: Redis takes requests in arrival order and
    counts 0 receivers every time. Here connections run on several threads;
    a PUBLISH lets the requests already waiting run first."""
    reached = 0
    with RespConn.to(server) as p:
        for i in range(200):
            with RespConn.to(server) as s:
                assert s.call("SUBSCRIBE", f"c{i}", "other") == [b"subscribe", f"c{i}".encode(), 1]
                assert s.read() == [b"subscribe", b"other", 2]
                s.send("UNSUBSCRIBE")
                reached += p.call("PUBLISH", f"c{i}", "hello")
    assert reached == 0
