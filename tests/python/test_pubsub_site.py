"""Pub/sub across the nodes of a site: PUBLISH on any node reaches
subscribers on every node (Redis Cluster broadcasts over its bus), SPUBLISH
is routed by the channel's slot, and subscribers keep working when the node
that published is killed."""
import time

import pytest
from redis.cluster import RedisCluster
from redis.crc import key_slot

from helpers import wait_until
from helpers_net import RespConn, RespError
from test_cluster import owner_of, started_site, status_rows

pytestmark = pytest.mark.deltagrid_only

N = 100


@pytest.fixture
def site(tmp_path):
    with started_site(tmp_path) as nodes:
        yield nodes


def subscribers(nodes):
    """Per node: a RESP2 connection subscribed to `ch` and to pattern `c*`."""
    subs = []
    for s in nodes:
        c = RespConn.to(s)
        assert c.call("SUBSCRIBE", "ch") == [b"subscribe", b"ch", 1]
        assert c.call("PSUBSCRIBE", "c*") == [b"psubscribe", b"c*", 2]
        subs.append(c)
    return subs


def publish_and_collect(publisher, subs, tag, local=0):
    """PUBLISH N messages on `publisher` (which has `local` receivers of its
    own); every subscriber gets each of them twice (channel and pattern), in
    order."""
    with RespConn.to(publisher) as p:
        for i in range(N):
            assert p.call("PUBLISH", "ch", f"{tag}{i}") == local
    for c in subs:
        got = [c.read(timeout=10) for _ in range(2 * N)]
        direct = [m[2].decode() for m in got if m[0] == b"message"]
        pattern = [m[3].decode() for m in got if m[0] == b"pmessage"]
        assert direct == pattern == [f"{tag}{i}" for i in range(N)]


def test_publish_on_one_node_reaches_subscribers_on_every_other(site):
    subs = subscribers(site[1:])
    try:
        publish_and_collect(site[0], subs, "a")
        # The reply counts this node's receivers only, as Redis Cluster.
        with RespConn.to(site[1]) as p:
            assert p.call("PUBLISH", "ch", "local") == 2
        for c in subs[1:]:
            assert [c.read(timeout=10) for _ in range(2)][0] == [b"message", b"ch", b"local"]
        # Then the publisher is killed: subscribers on the other nodes keep working.
        site[0].proc.kill()
        site[0].proc.wait()
        wait_until(lambda: status_rows(site[1])["n1"][4] == "dead", timeout=20, message="n1 never marked dead")
        subs[0].call("PING")  # the subscriber's connection survived
        subs[0].read(timeout=10)  # ... the 'local' messages it got above
        subs[0].read(timeout=10)
        publish_and_collect(site[2], subs, "b", local=2)
        publish_and_collect(site[1], subs, "c", local=2)
    finally:
        for c in subs:
            c.close()


def received(get, kind, n):
    """Up to `n` payloads of redis-py pubsub messages of `kind`, within 10 s."""
    got = []
    deadline = time.monotonic() + 10
    while len(got) < n and time.monotonic() < deadline:
        m = get(timeout=0.5)
        if m and m["type"] == kind:
            got.append(m["data"])
    return got


def test_redis_py_cluster_pubsub_and_sharded_pubsub(site):
    rc = RedisCluster(host="127.0.0.1", port=site[0].port, decode_responses=True)
    try:
        ps = rc.pubsub()
        ps.subscribe("events")
        wait_until(lambda: ps.get_message(timeout=0.1) is not None, timeout=5, message="subscribe reply")
        for node in site:  # publish through every node, whichever one redis-py subscribed on
            with RespConn.to(node) as p:
                for i in range(N // len(site) + 1):
                    p.call("PUBLISH", "events", f"{node.port}:{i}")
        sent = (N // len(site) + 1) * len(site)
        got = received(ps.get_message, "message", sent)
        assert len(got) == sent and len(set(got)) == sent
        ps.close()

        sps = rc.pubsub()
        sps.ssubscribe("orders{1}")
        wait_until(lambda: sps.get_sharded_message(timeout=0.1) is not None, timeout=5,
                   message="ssubscribe reply")
        for i in range(N):
            assert rc.spublish("orders{1}", f"o{i}") == 1
        got = received(sps.get_sharded_message, "smessage", N)
        assert got == [f"o{i}" for i in range(N)]
        sps.close()
    finally:
        rc.close()


def test_sharded_commands_are_routed_by_the_channel_slot(site):
    slot = key_slot(b"orders{1}")
    owner = owner_of(site, slot)
    other = next(s for s in site if s is not owner)
    with RespConn.to(other) as c:
        assert c.call("SPUBLISH", "orders{1}", "x") == RespError(f"MOVED {slot} 127.0.0.1:{owner.port}")
        assert c.call("SSUBSCRIBE", "orders{1}") == RespError(f"MOVED {slot} 127.0.0.1:{owner.port}")
        assert c.call("SSUBSCRIBE", "a", "b") == RespError(
            "CROSSSLOT Keys in request don't hash to the same slot")
    with RespConn.to(owner) as c:
        assert c.call("SSUBSCRIBE", "orders{1}") == [b"ssubscribe", b"orders{1}", 1]
