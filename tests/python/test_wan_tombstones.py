"""Deletes that stay deleted however long a site is away: tombstones are
kept until every other site has passed them (not for an hour, as before),
then let go; over the tombstone budget the operator is told. Real
processes on loopback; the outage is a paused publisher and an hour is the
DEBUG CLOCK-ADVANCE of the site that deletes."""
import pytest
from redis.cluster import RedisCluster

from helpers import wait_until
from helpers_wan import (WanSite, client, metric, source_status, wait_converged, wait_drained, wait_state,
                         wan_control, wan_status)

pytestmark = pytest.mark.deltagrid_only

HOUR_MS = 3_600_000


@pytest.fixture
def pair(tmp_path):
    made = []

    def make(**kw):
        a = WanSite(tmp_path, 1, "london", **kw)
        b = WanSite(tmp_path, 2, "newyork", **kw)
        made.extend([a, b])
        a.target(b)
        b.target(a)
        a.start()
        b.start()
        return a, b

    yield make
    for s in made:
        s.stop()


def tombstones(site):
    return wan_status(site.nodes[0])["tombstones"]


def test_every_node_of_a_site_lets_settled_tombstones_go(tmp_path):
    """A site of three nodes: the primaries of the deleted keys and their
    replicas all hear the other site's marks (WANSETTLED) and let go."""
    london = WanSite(tmp_path, 1, "london", size=3)
    newyork = WanSite(tmp_path, 2, "newyork")
    london.target(newyork)
    newyork.target(london)
    try:
        london.start()
        newyork.start()
        a = RedisCluster(host="127.0.0.1", port=london.live[0].port, socket_timeout=20)
        keys = [f"k{i}" for i in range(200)]
        for k in keys:
            a.set(k, "v")
        wait_converged([london, newyork], min_keys=200)
        for k in keys:
            a.delete(k)
        assert sum(wan_status(n)["tombstones"] for n in london.live) >= 2 * 200, "primaries and replicas"
        wait_until(lambda: all(wan_status(n)["tombstones"] == 0 for n in london.live + newyork.live),
                   timeout=30, message="every node let the tombstones go")
        wait_converged([london, newyork])
    finally:
        london.stop()
        newyork.stop()


def test_a_site_away_past_an_hour_comes_back_and_nothing_deleted_returns(pair):
    # London's clock is moved 2 hours ahead below: New York must accept it.
    london, newyork = pair(node_settings=['max_clock_offset = "1d"'])
    a, b = client(london.nodes[0]), client(newyork.nodes[0])
    a.hset("user", mapping={"name": "ann", "visits": "1"})
    a.sadd("tags", "x", "y")
    a.zadd("board", {"p": 1, "q": 2})
    a.hset("profile", mapping={"city": "ldn", "age": "30"})
    a.set("doc", "v1")
    wait_converged([london, newyork], min_keys=5)
    # New York has told London how far it got (it applied London's writes).
    wait_until(lambda: wan_status(london.nodes[0])["settled"], timeout=15, message="New York announced marks")

    # New York goes away: its publisher holds back what it writes.
    wan_control(newyork.nodes[0], "pause", "london")
    wait_state(newyork.nodes[0], "london", "paused")
    b.hset("user", mapping={"visits": "2", "city": "nyc"})
    b.sadd("tags", "y")  # already there: nothing happens
    b.zadd("board", {"q": 5})  # an add London's removal did not see: it stays
    b.hset("profile", "city", "nyc")
    b.set("doc", "v2")

    # London deletes afterwards (newer), then more than an hour passes for
    # it, and it deletes again: the old rule dropped tombstones an hour
    # older than the newest on that insert.
    a.execute_command("DEBUG", "CLOCK-ADVANCE", 1000)
    assert a.delete("user", "doc") == 2
    assert a.srem("tags", "y") == 1
    assert a.zrem("board", "q") == 1
    assert a.hdel("profile", "city") == 1
    # user, doc and profile.city lie above anything New York has passed.
    assert tombstones(london) >= 4
    a.execute_command("DEBUG", "CLOCK-ADVANCE", 2 * HOUR_MS)
    a.set("other", "1")
    assert a.delete("other") == 1
    assert tombstones(london) >= 5, "nothing is dropped for its age"

    # While New York is away its marks do not move past London's deletes
    # (though it applied them): London keeps their tombstones.
    wait_until(lambda: b.exists("user", "doc") == 0, timeout=15, message="London's deletes reached New York")
    assert tombstones(london) >= 4

    # New York comes back: what it held back is older than London's
    # deletes and loses at both sites.
    wan_control(newyork.nodes[0], "resume", "london")
    wait_until(lambda: source_status(london.nodes[0], "newyork")["events_received"] >= 4, timeout=15,
               message="New York's held-back writes reached London")
    wait_drained(newyork, "london")
    # And London's later removals have reached New York: they leave up to
    # 50 ms after the deletes before them (the small-batch hold).
    wait_drained(london, "newyork")
    for r in (a, b):
        assert r.exists("user", "doc") == 0
        assert r.smembers("tags") == {b"x"}
        assert r.zrange("board", 0, -1, withscores=True) == [(b"p", 1.0), (b"q", 5.0)]
        assert r.hgetall("profile") == {b"age": b"30"}
    assert source_status(london.nodes[0], "newyork")["conflicts_lost"] >= 3
    wait_converged([london, newyork], ttl_slack=2)

    # Both sites have now passed every delete: the tombstones go.
    wait_until(lambda: tombstones(london) == 0 and tombstones(newyork) == 0, timeout=20,
               message="tombstones let go once both sites passed them")
    assert metric(london.nodes[0], "deltagrid_tombstones_evicted_unsettled_total") == 0


def test_over_the_tombstone_budget_the_operator_is_told(pair):
    london, newyork = pair(tombstone_memory="16KiB")
    a = client(london.nodes[0])
    a.mset({f"k{i}": "v" for i in range(2000)})
    wait_converged([london, newyork], min_keys=2000)
    wan_control(newyork.nodes[0], "pause", "london")
    wait_state(newyork.nodes[0], "london", "paused")
    for i in range(0, 2000, 100):
        a.delete(*[f"k{j}" for j in range(i, i + 100)])
    status = wan_status(london.nodes[0])
    assert status["tombstones_evicted_unsettled"] > 0
    assert metric(london.nodes[0], "deltagrid_tombstones_evicted_unsettled_total") > 0
    wait_until(lambda: b"before every remote site had passed them" in london.logs(), timeout=15,
               message="a warning in the log")
    wan_control(newyork.nodes[0], "resume", "london")
    wait_drained(newyork, "london")
    wait_converged([london, newyork])
