"""Eviction in a site and between sites (issue 9): an eviction is a local
decision. A primary's evictions are logged, so its partition's replicas
remove the same keys (they never evict by themselves); WAN publishers do
not ship them, so another site keeps every key. Real nodes: a site of three
(one backup per partition) with `maxmemory` and `allkeys-lru`, linked to a
single-node site without a limit."""
import pytest
import redis
from redis.cluster import RedisCluster
from redis.crc import key_slot

from helpers import wait_until
from helpers_wan import client, sites, target_status, wait_drained  # noqa: F401 (sites: a fixture)

pytestmark = pytest.mark.deltagrid_only

KEYS = 100_000
VALUE = "v" * 300


def copies_by_key(nodes, keys):
    """{key: [held on its primary, held on each replica]} per CLUSTER SLOTS."""
    by_port = {n.port: n for n in nodes}
    slots = client(nodes[0]).execute_command("CLUSTER", "SLOTS")
    ports_of = {}
    for k in keys:
        slot = key_slot(k.encode())
        ports_of[k] = next([p[1]] + [r[1] for r in rs] for first, last, p, *rs in slots if first <= slot <= last)
    held = {}
    for n in nodes:
        # One connection, READONLY, EXISTS pipelined on it (redis-py's
        # pipelines may take another connection from the pool).
        c = redis.Connection(host="127.0.0.1", port=n.port, socket_timeout=20)
        c.send_command("READONLY")
        assert c.read_response() == b"OK"
        mine = [k for k in keys if n.port in ports_of[k]]
        for i in range(0, len(mine), 1_000):
            chunk = mine[i:i + 1_000]
            c.send_packed_command(c.pack_commands([("EXISTS", k) for k in chunk]))
            for k in chunk:
                held.setdefault(k, {})[n.port] = c.read_response() == 1
        c.disconnect()
    assert set(by_port) >= {p for k in keys for p in ports_of[k]}
    return {k: [held[k][p] for p in ports_of[k]] for k in keys}


def test_evictions_reach_the_replicas_and_never_another_site(sites):
    a = sites(1, "a", size=3, backups=1,
              node_settings=['maxmemory = "24MiB"', 'maxmemory_policy = "allkeys-lru"'])
    b = sites(2, "b")
    a.target(b)
    b.target(a)
    a.start()
    b.start()
    rc = RedisCluster(host="127.0.0.1", port=a.live[0].port, socket_timeout=20)
    keys = [f"key:{i}" for i in range(KEYS)]
    p = rc.pipeline()
    for i, k in enumerate(keys):
        p.set(k, VALUE)
        if i % 2_000 == 1_999:
            p.execute()
    p.execute()

    evicted = lambda: sum(client(n).info("stats")["evicted_keys"] for n in a.live)
    assert evicted() > 1_000, "the site held every key: nothing was evicted"
    for n in a.live:
        info = client(n).info("memory")
        assert info["used_memory"] <= info["maxmemory"] * 1.05, (n.port, info["used_memory"])

    # Every copy of a key agrees with its primary: held by both or by none.
    def replicas_agree():
        copies = copies_by_key(a.live, keys)
        return all(all(h == c[0] for h in c[1:]) for c in copies.values())
    wait_until(replicas_agree, timeout=30, interval=1, message="replicas hold what their primary evicted")
    copies = copies_by_key(a.live, keys)
    held_at_a = sum(c[0] for c in copies.values())
    assert held_at_a < KEYS, held_at_a

    # The other site keeps every key: no eviction left the site (its
    # receiver would ignore one; the publishers send none).
    wait_drained(a, "b")
    shipped = [target_status(n, "b") for n in a.live]
    assert sum(t["events_queued"] for t in shipped) == KEYS, shipped
    assert sum(t["events_distributed"] for t in shipped) == KEYS, shipped
    rb = client(b.live[0])
    assert rb.dbsize() == KEYS, rb.dbsize()
    assert all(v == VALUE.encode() for v in rb.mget(keys[:5_000]))
    assert client(b.live[0]).info("stats")["evicted_keys"] == 0
