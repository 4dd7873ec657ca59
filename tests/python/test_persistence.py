"""Local persistence (`node.persistence = "log"`, `node.fsync`): a node
keeps its copies on its own disk and loads them when it starts again, so a
site whose every node is killed comes back with its data.

Real processes, real kill -9, real files: a standalone node restarted on
its data directory holds every type it held; with `fsync = "always"` a
whole three-node site killed at once loses no acknowledged write and
applies none twice (counters exact); with `everysec` what is lost was
acknowledged in the last second or so before the kill; a damaged end of
the change log is cut and what precedes it loads; partitions whose every
copy went down wait for the node that had all their writes (CLUSTERDOWN)
until it is back or revoked; `persistence = "off"` restarts empty. SAVE, BGSAVE, LASTSAVE and INFO persistence report the
snapshots.
"""
import contextlib
import re
import subprocess
import threading
import time

import pytest
import redis
from redis.cluster import RedisCluster
from redis.crc import key_slot

from conftest import Server, binary, free_port
from helpers import wait_until
from helpers_net import http_get
from test_cluster import (all_partitions_backed_up, cluster_info, cluster_status, site_config,
                          status_rows)

pytestmark = pytest.mark.deltagrid_only


def node_config(persistence=None, fsync=None):
    lines = ["[node]"]
    if persistence:
        lines.append(f'persistence = "{persistence}"')
    if fsync:
        lines.append(f'fsync = "{fsync}"')
    return "\n".join(lines) + "\n"


def kill9(node):
    node.proc.kill()
    node.proc.wait()
    node.log.close()


def again(node, tmp_path, config):
    """The node started again on the same data directory and port."""
    return Server(tmp_path, config=config, port=node.port)


@contextlib.contextmanager
def restarted(node, tmp_path, config):
    """`again`, stopped when the block ends; yields (node, client)."""
    n = again(node, tmp_path, config)
    try:
        yield n, redis.Redis(port=n.port)
    finally:
        n.stop()


def flip(path, at):
    """Flips the byte `at` (negative: from the end) of the file `path`."""
    data = bytearray(path.read_bytes())
    data[at] ^= 0xFF
    path.write_bytes(bytes(data))


def fill_every_type(r):
    r.set("s", "string value")
    r.set("long", "x" * 5000)
    r.incrby("counter", 41)
    r.incrbyfloat("float", "1.5")
    r.hset("h", mapping={f"f{i}": f"v{i}" for i in range(20)})
    r.hincrby("h", "n", 7)
    r.sadd("set", *[f"m{i}" for i in range(50)])
    r.srem("set", "m3")
    r.zadd("z", {f"m{i}": i / 2 for i in range(40)})
    r.zincrby("z", 10, "m1")
    r.rpush("list", *[f"e{i}" for i in range(30)])
    r.lpop("list")
    r.pfadd("hll", *[f"u{i}" for i in range(300)])
    r.setbit("bits", 1000, 1)
    r.set("ttl", "soon", ex=1000)
    r.set("gone", "x")
    r.delete("gone")


def read_every_type(r):
    return {
        "s": r.get("s"), "long": r.get("long"), "counter": r.get("counter"),
        "float": r.get("float"), "h": r.hgetall("h"), "set": r.smembers("set"),
        "z": r.zrange("z", 0, -1, withscores=True), "list": r.lrange("list", 0, -1),
        "hll": r.pfcount("hll"), "bits": r.bitcount("bits"), "ttl": r.ttl("ttl") > 900,
        "gone": r.exists("gone"), "dbsize": r.dbsize(),
    }


@pytest.mark.parametrize("snapshot", [False, True])
def test_a_node_killed_with_9_restarts_with_every_type(tmp_path, snapshot):
    config = node_config(fsync="always")
    n = Server(tmp_path, config=config)
    r = redis.Redis(port=n.port)
    fill_every_type(r)
    if snapshot:
        assert r.bgsave() is True
        wait_until(lambda: r.info("persistence")["rdb_saves"] == 1, timeout=10,
                   message="the snapshot was not written")
        r.incr("counter")  # after the snapshot: from the log
        r.decr("counter")
    before = read_every_type(r)
    assert before["dbsize"] == 11
    kill9(n)
    n = again(n, tmp_path, config)
    try:
        r = redis.Redis(port=n.port)
        assert read_every_type(r) == before
        info = r.info("persistence")
        assert info["aof_enabled"] == 1 and info["persistence"] == "log"
        assert info["persistence_fsync"] == "always" and info["persistence_loaded_complete"] == 1
        assert info["loading_loaded_keys"] == 11
        if snapshot:
            assert info["persistence_loaded_snapshot_entries"] >= 11
            assert info["persistence_loaded_log_records"] == 2
        # Writes go on from where the log was.
        assert r.incr("counter") == 42
    finally:
        n.stop()
    with restarted(n, tmp_path, config) as (n, r):
        assert r.get("counter") == b"42"


def test_persistence_off_restarts_empty(tmp_path):
    config = node_config(persistence="off")
    n = Server(tmp_path, config=config)
    r = redis.Redis(port=n.port)
    r.set("k", "v")
    assert r.info("persistence")["aof_enabled"] == 0
    with pytest.raises(redis.ResponseError, match="persistence is off"):
        r.bgsave()
    kill9(n)
    with restarted(n, tmp_path, config) as (n, r):
        assert r.dbsize() == 0
        assert not (tmp_path / "data" / "store").exists()


def test_save_bgsave_and_lastsave(tmp_path):
    n = Server(tmp_path, config=node_config())
    try:
        r = redis.Redis(port=n.port)
        info = r.info("persistence")
        assert info["persistence_fsync"] == "everysec"
        assert info["rdb_saves"] == 0 and info["rdb_bgsave_in_progress"] == 0
        for i in range(100):
            r.set(f"k{i}", i)
        assert r.info("persistence")["rdb_changes_since_last_save"] == 100
        time.sleep(1.1)  # LASTSAVE has a resolution of one second
        first = r.lastsave()
        assert r.save() is True
        assert r.lastsave() > first
        info = r.info("persistence")
        assert info["rdb_saves"] == 1 and info["rdb_last_bgsave_status"] == "ok"
        assert info["rdb_changes_since_last_save"] == 0
        assert info["persistence_snapshot_bytes"] > 0
        r.set("one more", 1)  # a snapshot is named by the log record it starts from
        assert r.execute_command("BGSAVE", "SCHEDULE") is True  # redis-py: "...started/scheduled"
        with pytest.raises(redis.ResponseError, match="syntax"):
            r.execute_command("BGSAVE", "NOW")
        wait_until(lambda: r.info("persistence")["rdb_saves"] == 2, timeout=10,
                   message="BGSAVE did not write a snapshot")
        # Two snapshots are kept (the newest may be found damaged).
        snaps = list((tmp_path / "data" / "store" / "snapshots").glob("*.snap"))
        assert len(snaps) == 2
        r.set("and another", 1)
        r.save()
        assert len(list((tmp_path / "data" / "store" / "snapshots").glob("*.snap"))) == 2
        from prometheus_client.parser import text_string_to_metric_families
        metrics = {f.name: f.samples[0].value for f in text_string_to_metric_families(
            http_get("127.0.0.1", n.admin_port, "/metrics")[2].decode()) if f.samples}
        assert metrics["deltagrid_persist_snapshots"] == 3  # the _total suffix is the family's
        assert metrics["deltagrid_persist_log_bytes"] > 0
        assert metrics["deltagrid_persist_snapshot_bytes"] > 0
        assert metrics["deltagrid_persist_write_ok"] == 1
    finally:
        n.stop()


def test_a_damaged_log_end_is_cut_and_what_precedes_it_loads(tmp_path):
    config = node_config(fsync="always")
    n = Server(tmp_path, config=config)
    r = redis.Redis(port=n.port)
    for i in range(200):
        r.set(f"k{i}", f"v{i}")
    kill9(n)
    # Flip bytes inside the last record, as a torn or corrupted write.
    flip(sorted((tmp_path / "data" / "store" / "log").glob("*.seg"))[-1], -3)
    with restarted(n, tmp_path, config) as (n, r):
        assert r.dbsize() == 199
        assert r.get("k198") == b"v198" and r.get("k199") is None
        assert b"cutting torn tail" in n.log_path.read_bytes()


def test_a_damaged_snapshot_falls_back_to_the_one_before(tmp_path):
    config = node_config(fsync="always")
    n = Server(tmp_path, config=config)
    r = redis.Redis(port=n.port)
    for i in range(100):
        r.set(f"k{i}", "a")
    r.save()
    for i in range(100):
        r.set(f"k{i}", "b")
    r.save()
    r.set("k0", "c")
    kill9(n)
    snaps = sorted((tmp_path / "data" / "store" / "snapshots").glob("*.snap"))
    flip(snaps[-1], len(snaps[-1].read_bytes()) // 2)
    with restarted(n, tmp_path, config) as (n, r):
        assert r.get("k0") == b"c" and r.get("k50") == b"b" and r.dbsize() == 100
        assert b"snapshot not loaded, trying the one before" in n.log_path.read_bytes()


# --- a whole site --------------------------------------------------------

def start_site(tmp_path, fsync, n=3):
    cluster_ports = [free_port() for _ in range(n)]
    ports = [free_port() for _ in range(n)]
    nodes = []
    for i in range(n):
        d = tmp_path / f"n{i + 1}"
        d.mkdir(exist_ok=True)
        config = site_config(i, ports, cluster_ports) + ""
        config = config.replace("[node]\n", f'[node]\nfsync = "{fsync}"\n', 1)
        nodes.append((d, config, ports[i]))
    servers = [Server(d, config=c, port=p) for d, c, p in nodes]
    wait_formed(servers)
    return nodes, servers


def wait_formed(servers, timeout=60):
    for s in servers:
        wait_until(lambda s=s: b"cluster_state:ok" in cluster_info(s), timeout=timeout,
                   message="site did not form")


def typed_writer(port, stop, ledger, errors, prefix):
    """SET, HSET, SADD, ZADD and INCR in turn; the ledger holds what was
    acknowledged, with when: key -> (kind, value, monotonic time), and for
    counters key -> [acknowledged, attempted, time of the last ack]."""
    rc = RedisCluster(host="127.0.0.1", port=port, decode_responses=True, socket_timeout=8)
    i = 0
    while not stop.is_set():
        kind = ("set", "hash", "sadd", "zadd", "incr")[i % 5]
        try:
            if kind == "set":
                rc.set(f"{prefix}:s:{i}", f"v{i}")
                ledger[f"{prefix}:s:{i}"] = ("set", f"v{i}", time.monotonic())
            elif kind == "hash":
                rc.hset(f"{prefix}:h:{i % 50}", f"f{i}", f"v{i}")
                ledger[(f"{prefix}:h:{i % 50}", f"f{i}")] = ("hash", f"v{i}", time.monotonic())
            elif kind == "sadd":
                rc.sadd(f"{prefix}:set:{i % 20}", f"m{i}")
                ledger[(f"{prefix}:set:{i % 20}", f"m{i}")] = ("sadd", None, time.monotonic())
            elif kind == "zadd":
                rc.zadd(f"{prefix}:z:{i % 20}", {f"m{i}": i})
                ledger[(f"{prefix}:z:{i % 20}", f"m{i}")] = ("zadd", float(i), time.monotonic())
            else:
                key = f"{prefix}:c:{i % 10}"
                counts = ledger.setdefault(key, ["incr", 0, 0, 0.0])
                counts[2] += 1
                rc.incr(key)
                counts[1] += 1
                counts[3] = time.monotonic()
        except Exception as e:  # outcome unknown: not acknowledged
            errors.append(repr(e))
            time.sleep(0.05)
        i += 1


def lost_writes(port, ledgers):
    """[(key, acknowledged at)] of acknowledged writes the site no longer
    holds; counters must be exact up to increments whose reply was lost."""
    rc = RedisCluster(host="127.0.0.1", port=port, decode_responses=True, socket_timeout=8)
    lost = []
    for ledger in ledgers:
        for key, entry in ledger.items():
            kind = entry[0]
            if kind == "set":
                ok = rc.get(key) == entry[1]
            elif kind == "hash":
                ok = rc.hget(*key) == entry[1]
            elif kind == "sadd":
                ok = rc.sismember(*key)
            elif kind == "zadd":
                ok = rc.zscore(*key) == entry[1]
            else:
                value = int(rc.get(key) or 0)
                assert value <= entry[2], f"{key}: {value} > {entry[2]} attempted: applied twice"
                ok = value >= entry[1]
            if not ok:
                lost.append((key, entry[-1]))
    return lost


def killed_under_writes(servers, writers, acked, prefix):
    """`writers` typed writers on the site's nodes in turn until `acked`
    writes were acknowledged, then every node killed with -9 at once,
    writers still writing. Returns (their ledgers, when the kill began)."""
    stop, errors = threading.Event(), []
    ledgers = [dict() for _ in range(writers)]
    threads = [threading.Thread(target=typed_writer,
                                args=(servers[i % len(servers)].port, stop, ledgers[i], errors,
                                      f"{prefix}{i}"))
               for i in range(writers)]
    for t in threads:
        t.start()
    try:
        wait_until(lambda: sum(len(l) for l in ledgers) > acked, timeout=60,
                   message="writers got going")
        for s in servers:
            s.proc.kill()
        killed_at = time.monotonic()
        for s in servers:
            s.proc.wait()
            s.log.close()
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=30)
    return ledgers, killed_at


@pytest.mark.parametrize("fsync", ["always", "everysec"])
def test_a_whole_site_killed_with_9_restarts_with_its_data(tmp_path, fsync):
    nodes, servers = start_site(tmp_path, fsync)
    ledgers, killed_at = killed_under_writes(servers, 4, 1500, "w")
    acked = sum(len(l) for l in ledgers)
    servers = [Server(d, config=c, port=p) for d, c, p in nodes]
    try:
        wait_formed(servers)
        lost = []
        wait_until(lambda: not (lost := lost_writes(servers[0].port, ledgers)) or
                   all(killed_at - at < 1.5 for _, at in lost) or None,
                   timeout=30, message="acknowledged writes lost")
        lost = lost_writes(servers[0].port, ledgers)
        print(f"fsync={fsync}: {len(lost)} of {acked} acknowledged writes lost")
        if fsync == "always":
            assert not lost, f"{len(lost)} of {acked} acknowledged writes lost, e.g. {lost[:5]}"
        else:
            late = [(k, killed_at - at) for k, at in lost if killed_at - at >= 1.5]
            assert not late, f"lost writes acknowledged long before the kill: {late[:5]}"
        # The site takes writes again.
        rc = RedisCluster(host="127.0.0.1", port=servers[1].port, decode_responses=True)
        assert rc.set("after", "restart") and rc.get("after") == "restart"
        assert any(b"loaded this node's copies from disk" in s.log_path.read_bytes() for s in servers)
        for s in servers:
            info = redis.Redis(port=s.port).info("persistence")
            assert info["persistence_fsync"] == fsync, info
            assert info["persistence_loaded_complete"] == (fsync == "always"), info
    finally:
        for s in servers:
            s.stop()


def waiting_partitions(node):
    """{partition: [names it waits for]} from `cluster status`."""
    waiting = {}
    for line in cluster_status(node).splitlines():
        m = re.match(r"\s+\d+ waiting for (.+?): ([\d ]+)$", line)
        if m:
            for p in m.group(2).split():
                waiting[int(p)] = m.group(1).split(", ")
    return waiting


def slots_covered(node):
    slots = redis.Redis(port=node.port).execute_command("CLUSTER SLOTS")
    return sum(last - first + 1 for first, last, *_ in slots)


def key_in_partition(p, partitions=271):
    return next(k for k in (f"probe{i}" for i in range(100000))
                if key_slot(k.encode()) * partitions // 16384 == p)


def test_partitions_whose_every_copy_went_down_wait_for_their_disks(tmp_path):
    """The whole site killed with -9 under writes (fsync = always) and two
    nodes of three started again: the partitions that had a complete copy
    on the third wait for it (CLUSTERDOWN, listed by `cluster status`)
    rather than resuming from a copy that may lack acknowledged writes.
    `deltagrid cluster revoke` gives them to the best copy that came back:
    the survivors' copies were in sync, so nothing acknowledged is lost.
    The third node started later rejoins and takes copies again."""
    nodes, servers = start_site(tmp_path, "always")
    ledgers, _ = killed_under_writes(servers, 2, 1000, "v")
    servers = [Server(d, config=c, port=p) for d, c, p in nodes[:2]]
    try:
        wait_until(lambda: waiting_partitions(servers[0]) and
                   all(w == ["n3"] for w in waiting_partitions(servers[0]).values()),
                   timeout=60, message="no partition waits for n3")
        waiting = waiting_partitions(servers[0])
        print(f"{len(waiting)} of 271 partitions wait for n3")
        assert len(waiting) < 271, "partitions with both copies back resume"
        # Still waiting a moment later: nothing resumes without n3's disk.
        time.sleep(3)
        assert waiting_partitions(servers[1]) == waiting
        key = key_in_partition(next(iter(waiting)))
        for s in servers:
            with pytest.raises(redis.exceptions.ClusterDownError, match="waits for one to come back"):
                redis.Redis(port=s.port).get(key)
        # Partitions that do not wait serve; the others are not served yet.
        served = key_in_partition(next(p for p in range(271) if p not in waiting))
        rc = RedisCluster(host="127.0.0.1", port=servers[0].port, decode_responses=True,
                          require_full_coverage=False)
        wait_until(lambda: rc.set(served, "ok"), timeout=30, message="a partition that does not wait is not served")
        out = subprocess.run([binary(), "cluster", "revoke", "--admin",
                              f"127.0.0.1:{servers[1].admin_port}", "--node", "n3"],
                             capture_output=True, text=True, timeout=30)
        assert out.returncode == 0 and "revoked" in out.stdout, out
        wait_until(lambda: not waiting_partitions(servers[0]) and slots_covered(servers[0]) == 16384,
                   timeout=30, message="revoking n3 did not resume the partitions waiting for it")
        lost = lost_writes(servers[0].port, ledgers)
        assert not lost, f"{len(lost)} of {sum(len(l) for l in ledgers)} acknowledged writes lost: {lost[:5]}"
        # n3 comes back: it rejoins, holding copies again, and loses nothing.
        d, c, p = nodes[2]
        servers.append(Server(d, config=c, port=p))
        wait_until(lambda: status_rows(servers[0])["n3"][3:5] == ["up", "active"] and
                   all_partitions_backed_up(servers[0]) and slots_covered(servers[2]) == 16384,
                   timeout=90, message="n3 did not rejoin with in-sync copies")
        assert not lost_writes(servers[2].port, ledgers)
    finally:
        for s in servers:
            s.stop()


def replication_info(node):
    return redis.Redis(port=node.port).info("replication")


def test_a_restarted_node_catches_up_from_its_primaries_logs(tmp_path):
    """One node of three killed with -9 under writes and started again:
    the copies it held as a replica come back by catch-up from their
    primaries' logs (the changes it missed), not by snapshots; the site
    loses no acknowledged write."""
    nodes, servers = start_site(tmp_path, "always")
    stop, errors = threading.Event(), []
    ledgers = [dict() for _ in range(2)]
    threads = [threading.Thread(target=typed_writer,
                                args=(servers[0].port, stop, ledgers[i], errors, f"r{i}"))
               for i in range(2)]
    for t in threads:
        t.start()
    try:
        wait_until(lambda: sum(len(l) for l in ledgers) > 3000, timeout=60,
                   message="writers got going")
        victim = servers[2]
        keys_before = sum(redis.Redis(port=s.port).dbsize() for s in servers[:2])
        victim.proc.kill()
        victim.proc.wait()
        victim.log.close()
        time.sleep(0.5)
        d, c, p = nodes[2]
        servers[2] = Server(d, config=c, port=p)
        count = sum(len(l) for l in ledgers)
        wait_until(lambda: sum(len(l) for l in ledgers) > count + 500, timeout=60,
                   message="writes did not go on")
        wait_until(lambda: all_partitions_backed_up(servers[0]) and
                   status_rows(servers[0])["n3"][3:5] == ["up", "active"], timeout=90,
                   message="the restarted node's copies did not come back in sync")
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=30)
    sent = [replication_info(s) for s in servers[:2]]
    catch_ups = sum(i["catch_ups_sent"] for i in sent)
    changes = sum(i["catch_up_changes_sent"] for i in sent)
    snapshot_keys = sum(i["snapshot_keys_sent"] for i in sent)
    print(f"catch-ups {catch_ups} with {changes} changes; snapshot keys {snapshot_keys}; "
          f"keys in the site ~{keys_before}")
    # Its replica copies (a third of the partitions) came back from logs.
    assert catch_ups >= 271 // 3 // 2, sent
    # What they carried is the changes it missed, far less than the copies.
    assert changes < keys_before / 3, (changes, keys_before)
    assert not lost_writes(servers[0].port, ledgers)
    for s in servers:
        s.stop()


def test_clients_are_answered_loading_while_the_node_loads(tmp_path):
    """As Redis answers -LOADING while it reads its AOF: a client that
    connects before the node loaded its copies gets LOADING, then PONG."""
    import socket
    import subprocess
    from conftest import binary
    config = node_config(fsync="no")
    n = Server(tmp_path, config=config)
    r = redis.Redis(port=n.port)
    pipe = r.pipeline(transaction=False)
    for i in range(100_000):
        pipe.set(f"key:{i}", "v" * 20)
        if i % 10_000 == 9_999:
            pipe.execute()
    pipe.execute()
    assert r.dbsize() == 100_000
    kill9(n)
    log = open(tmp_path / "restart.log", "ab")
    proc = subprocess.Popen([binary(), "server", "--listen", f"127.0.0.1:{n.port}",
                             "--admin-listen", f"127.0.0.1:{free_port()}",
                             "--data-dir", str(tmp_path / "data"), "--config", str(tmp_path / "deltagrid.toml")],
                            stdout=log, stderr=subprocess.STDOUT)
    replies = []
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", n.port), timeout=2) as s:
                    s.sendall(b"PING\r\n")
                    reply = s.recv(128)
            except OSError:
                time.sleep(0.01)
                continue
            replies.append(reply)
            if reply.startswith(b"+PONG"):
                break
        assert replies and replies[-1] == b"+PONG\r\n", replies[-3:]
        assert any(x.startswith(b"-LOADING") for x in replies), replies[:3]
        assert redis.Redis(port=n.port).dbsize() == 100_000
    finally:
        proc.kill()
        proc.wait()
        log.close()
