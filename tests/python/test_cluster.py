"""A site of several nodes from config: formation, Redis Cluster routing with
real cluster-aware clients (redis-cli -c, redis-py RedisCluster), CROSSSLOT,
MOVED, and refusal of foreign protocols on cluster_listen."""
import contextlib
import re
import socket
import subprocess
import threading
import time

import pytest
import redis
from redis.cluster import RedisCluster
from redis.crc import key_slot

from conftest import Server, binary, free_port
from helpers import wait_until
from helpers_net import RespConn, http_get

pytestmark = pytest.mark.deltagrid_only


def site_config(i, ports, cluster_ports, backups=1, seed_ports=None, partitions=271,
                hosts=None, admin_ports=None, data_dir=None, replication=None, site_extra=""):
    """Node i's config; `seed_ports` (default: all of `cluster_ports`) may
    leave it out, and then it joins the site the seeds formed. `hosts`
    (indexed like `ports`; default 127.0.0.1 for every node) gives each
    node an address of its own, and then every node is a seed;
    `admin_ports` (indexed alike), `data_dir` and `replication` add those
    settings; `site_extra`, more lines of [site]."""
    assert not (hosts and seed_ports), "seed_ports are on 127.0.0.1"
    host = hosts[i] if hosts else "127.0.0.1"
    seeds = zip(hosts, cluster_ports) if hosts else (("127.0.0.1", p) for p in (seed_ports or cluster_ports))
    seeds = ", ".join(f'"{h}:{p}"' for h, p in seeds)
    admin = f'admin_listen = "{host}:{admin_ports[i]}"\n' if admin_ports else ""
    data = f'data_dir = "{data_dir}"\n' if data_dir else ""
    repl = f'replication = "{replication}"\n' if replication else ""
    # Namespaces of this machine (test_partition): no passwords asked.
    protected = "protected_mode = false\n" if hosts else ""
    return f'''
[node]
{protected}id = "n{i + 1}"
listen = "{host}:{ports[i]}"
{admin}cluster_listen = "{host}:{cluster_ports[i]}"
{data}[site]
id = 1
name = "london"
partitions = {partitions}
seeds = [{seeds}]
backups = {backups}
{repl}{site_extra}'''


@contextlib.contextmanager
def started_site(tmp_path, n=3, backups=1, partitions=271, extra_args=lambda i: (), site_extra=""):
    """`n` nodes started from config files (and `extra_args(i)` flags for
    node i, `site_extra` lines of [site]); yields them once the site
    formed, stops them after."""
    cluster_ports = [free_port() for _ in range(n)]
    ports = [free_port() for _ in range(n)]
    nodes = []
    try:
        for i in range(n):
            d = tmp_path / f"n{i + 1}"
            d.mkdir()
            config = site_config(i, ports, cluster_ports, backups=backups, partitions=partitions,
                                 site_extra=site_extra)
            node = Server(d, extra_args=extra_args(i), config=config, port=ports[i])
            node.cluster_port = cluster_ports[i]
            node.restart_args = (d, config, ports[i])
            nodes.append(node)
        for s in nodes:
            wait_until(lambda s=s: b"cluster_state:ok" in cluster_info(s), timeout=15,
                       message="site did not form")
        yield nodes
    finally:
        for s in nodes:
            s.stop()


@pytest.fixture
def site(tmp_path):
    """Three nodes, one backup per partition."""
    with started_site(tmp_path) as nodes:
        yield nodes


def owner_of(site, slot):
    with RespConn.to(site[0]) as c:
        for first, last, primary, *_ in c.call("CLUSTER", "SLOTS"):
            if first <= slot <= last:
                return next(s for s in site if s.port == primary[1])
    raise AssertionError(f"slot {slot} not covered")


def cluster_info(s):
    with RespConn.to(s) as c:
        return bytes(c.call("CLUSTER", "INFO"))


def test_site_forms_and_every_node_agrees_on_slots(site):
    views = []
    for s in site:
        with RespConn.to(s) as c:
            slots = c.call("CLUSTER", "SLOTS")
            views.append(sorted((r[0], r[1], r[2][1]) for r in slots))
    assert views[0] == views[1] == views[2]
    covered = sum(last - first + 1 for first, last, _ in views[0])
    assert covered == 16384
    assert {port for _, _, port in views[0]} == {s.port for s in site}


def test_redis_py_cluster_client_reads_and_writes_across_all_nodes(site):
    rc = RedisCluster(host="127.0.0.1", port=site[0].port, decode_responses=True)
    for i in range(600):
        assert rc.set(f"key:{i}", f"v{i}")
    for i in range(600):
        assert rc.get(f"key:{i}") == f"v{i}"
    rc.hset("h{tag}", mapping={"a": "1", "b": "2"})
    assert rc.hgetall("h{tag}") == {"a": "1", "b": "2"}
    per_node = [redis.Redis(port=s.port).dbsize() for s in site]
    # Every key is on its primary and on one backup (backups = 1).
    assert sum(per_node) == 2 * 601 and all(n > 200 for n in per_node), per_node
    # Same slot through a hash tag: multi-key commands work.
    assert rc.mset_nonatomic({"{u}a": "1", "{u}b": "2"}) is not None
    assert rc.mget("{u}a", "{u}b") == ["1", "2"]


def test_pipelined_writes_at_4096_partitions_reach_every_copy(tmp_path):
    """With thousands of partitions the nodes prefetch the next command's
    partition and replication state (Keyspace::prefetch): pipelined
    writes through a cluster client land on every copy, and a kill -9
    of a node loses none of them."""
    with started_site(tmp_path, partitions=4096) as nodes:
        rc = RedisCluster(host="127.0.0.1", port=nodes[0].port, decode_responses=True)
        written = {}
        for batch in range(10):
            pipe = rc.pipeline(transaction=False)
            for i in range(batch * 300, batch * 300 + 300):
                key, value = f"pf:{i}", f"v{i}-" + "x" * (i % 50)
                pipe.set(key, value)
                written[key] = value
            assert pipe.execute() == [True] * 300
        pipe = rc.pipeline(transaction=False)
        for key in written:
            pipe.get(key)
        assert pipe.execute() == list(written.values())
        assert_every_copy_holds([written], nodes[0], nodes)
        rc.close()
        nodes[1].proc.kill()
        nodes[1].proc.wait()
        wait_until(lambda: status_rows(nodes[0])["n2"][4] == "dead", timeout=20, message="n2 never marked dead")
        # The client's slot map must not name the dead node: 4,096
        # partitions take a moment to be promoted elsewhere.
        wait_until(lambda: int(status_rows(nodes[0])["n2"][5]) == 0, timeout=30,
                   message="primaries left on the dead node")
        rc = RedisCluster(host="127.0.0.1", port=nodes[0].port, decode_responses=True)
        wait_until(lambda: rc.get("pf:0") is not None, timeout=20, message="reads did not resume")
        lost = [k for k, v in written.items() if rc.get(k) != v]
        assert not lost, f"{len(lost)} acknowledged writes lost, e.g. {lost[:5]}"
        rc.close()


def test_redis_cli_follows_moved(site):
    for i in range(30):
        out = subprocess.run(["redis-cli", "-c", "-p", str(site[0].port), "SET", f"cli:{i}", str(i)],
                             capture_output=True, text=True, timeout=10)
        assert out.stdout.strip() == "OK", out
    for i in range(30):
        out = subprocess.run(["redis-cli", "-c", "-p", str(site[1].port), "GET", f"cli:{i}"],
                             capture_output=True, text=True, timeout=10)
        assert out.stdout.strip() == str(i), out


def test_moved_and_crossslot_replies(site):
    owner = owner_of(site, 12182)  # CLUSTER KEYSLOT foo
    other = next(s for s in site if s is not owner)
    with RespConn.to(other) as c:
        assert c.call("CLUSTER", "KEYSLOT", "foo") == 12182
        assert c.cmd("GET", "foo") == f"-MOVED 12182 127.0.0.1:{owner.port}\r\n".encode()
        assert c.cmd("MSET", "a", "1", "b", "2") == b"-CROSSSLOT Keys in request don't hash to the same slot\r\n"
    with RespConn.to(owner) as c:
        assert c.cmd("SET", "foo", "bar") == b"+OK\r\n"
        assert c.call("CLUSTER", "COUNTKEYSINSLOT", 12182) == 1
        assert c.call("CLUSTER", "GETKEYSINSLOT", 12182, 10) == [b"foo"]


def test_readonly_and_cluster_commands_shapes(site):
    with RespConn.to(site[0]) as c:
        assert c.call("READONLY") == "OK"
        assert c.call("READWRITE") == "OK"
        myid = c.call("CLUSTER", "MYID")
        assert len(myid) == 40
        nodes = c.call("CLUSTER", "NODES")
        nodes = nodes.decode() if isinstance(nodes, bytes) else str(nodes)
        lines = [l for l in nodes.splitlines() if l]
        assert len(lines) == 3 and sum("myself" in l for l in lines) == 1
        assert any(l.startswith(myid.decode()) and "myself" in l for l in lines)


def test_foreign_protocol_on_cluster_listen_is_refused_and_logged(site):
    s = site[0]
    with socket.create_connection(("127.0.0.1", s.cluster_port), timeout=5) as sock:
        sock.sendall(b"*1\r\n$4\r\nPING\r\n")
        sock.settimeout(5)
        assert sock.recv(100) == b""  # closed without an answer
    wait_until(lambda: b"refused connection on cluster_listen" in s.log_path.read_bytes(),
               timeout=5, message="refusal not logged")
    # The site is unaffected.
    assert b"cluster_state:ok" in cluster_info(s)


def test_standalone_node_has_cluster_support_disabled(server):
    with RespConn.to(server) as c:
        assert c.cmd("CLUSTER", "SLOTS") == b"-ERR This instance has cluster support disabled\r\n"
        assert c.call("CLUSTER", "KEYSLOT", "foo") == 12182
        assert c.cmd("MSET", "a", "1", "b", "2") == b"+OK\r\n"


def test_backups_hold_every_acknowledged_write(site):
    """backups = 1, replication = sync: once a write is acknowledged, the
    partition's backup serves it to a READONLY connection."""
    rc = RedisCluster(host="127.0.0.1", port=site[0].port, decode_responses=True)
    for i in range(300):
        assert rc.set(f"{{r:{i}}}s", f"v{i}")
        rc.hset(f"{{r:{i}}}h", mapping={"count": i, "payload": "x" * 200})
        rc.hset(f"{{r:{i}}}h", "count", i + 1)  # a field delta
    with RespConn.to(site[0]) as c:
        slots = c.call("CLUSTER", "SLOTS")
    backup_of = {}
    for first, last, primary, *backups in slots:
        assert len(backups) == 1 and backups[0][1] != primary[1]
        backup_of[(first, last)] = next(s for s in site if s.port == backups[0][1])
    for i in range(300):
        for key, want in ((f"{{r:{i}}}s", f"v{i}".encode()), ):
            slot = rc.keyslot(key)
            node = next(n for (f, l), n in backup_of.items() if f <= slot <= l)
            with RespConn.to(node) as b:
                assert b.call("READONLY") == "OK"
                assert b.call("GET", key) == want
                assert b.call("HGET", f"{{r:{i}}}h", "count") == str(i + 1).encode()
                # Without READONLY the backup redirects to the primary.
                assert b.call("READWRITE") == "OK"
                assert b.cmd("GET", key).startswith(b"-MOVED ")


def test_a_dead_backup_leaves_the_in_sync_set_before_writes_are_acknowledged(site):
    """A write whose backup is dead waits until the metadata group has
    removed that backup from the in-sync set, then is acknowledged: never
    acknowledged while a dead in-sync copy is still counted on."""
    victim = site[2]
    with RespConn.to(site[0]) as c:
        slots = c.call("CLUSTER", "SLOTS")
    first, primary = next((f, p) for f, l, p, b in slots if b[1] == victim.port and p[1] != victim.port)
    key = next(f"k{i}" for i in range(1_000_000) if key_slot(f"k{i}".encode()) == first)
    owner = next(s for s in site if s.port == primary[1])
    victim.proc.kill()  # kill -9
    victim.proc.wait()
    with RespConn.to(owner, timeout=15) as c:
        assert c.call("SET", key, "v") == "OK"
        assert c.call("GET", key) == b"v"
    log = owner.log_path.read_bytes() + b"".join(s.log_path.read_bytes() for s in site if s is not victim)
    assert b"marking it dead" in log


def shard_roles(node):
    """CLUSTER SHARDS as [(slot ranges, [(port, role, health)])]."""
    with RespConn.to(node) as c:
        c.call("HELLO", "3")
        shards = c.call("CLUSTER", "SHARDS")
    return [(s[b"slots"], [(n[b"port"], n[b"role"], n[b"health"]) for n in s[b"nodes"]]) for s in shards]


def test_wait_cluster_shards_and_nodes_show_replicas_and_failed_members(site):
    """WAIT answers at once with the in-sync replicas holding the
    connection's last write; CLUSTER SHARDS lists each slot range's master
    and its replica; a member declared dead is `fail` in CLUSTER NODES."""
    owner = owner_of(site, 12182)  # foo
    with RespConn.to(owner) as c:
        assert c.call("WAIT", 1, 0) == 1            # no write yet: every replica holds "nothing"
        assert c.call("SET", "foo", "1") == "OK"
        t = time.monotonic()
        assert c.call("WAIT", 2, 5000) == 1         # one replica per partition, no waiting
        assert time.monotonic() - t < 1
        c.send_raw(b"SET foo 2\r\nWAIT 1 0\r\n")  # pipelined: counted before the ack, sent after
        assert [c.read(), c.read()] == ["OK", 1]
    ports = {s.port for s in site}
    shards = shard_roles(site[0])
    assert sum(slots[i + 1] - slots[i] + 1 for slots, _ in shards for i in range(0, len(slots), 2)) == 16384
    for slots, nodes in shards:
        assert sorted(r for _, r, _ in nodes) == [b"master", b"replica"], nodes
        assert {h for _, _, h in nodes} == {b"online"} and {p for p, _, _ in nodes} <= ports
    victim = site[2]
    victim.proc.kill()
    victim.proc.wait()
    wait_until(lambda: status_rows(site[0])["n3"][4] == "dead", timeout=20, message="n3 never marked dead")

    def line_of_victim():
        with RespConn.to(site[0]) as c:
            text = c.call("CLUSTER", "NODES")
        text = text.decode() if isinstance(text, bytes) else str(text)
        return next(l for l in text.splitlines() if f":{victim.port}@" in l)
    wait_until(lambda: "fail" in line_of_victim().split()[2].split(","), timeout=10,
               message="the dead member is not marked fail")
    assert "disconnected" in line_of_victim()


def write_ledger(port, stop, ledger, errors, prefix):
    """Writes unique keys until `stop`; records every acknowledged write."""
    rc = RedisCluster(host="127.0.0.1", port=port, decode_responses=True,
                      socket_timeout=8)
    i = 0
    while not stop.is_set():
        key, value = f"{prefix}:{i}", f"v{i}"
        try:
            if rc.set(key, value):
                ledger[key] = value
        except Exception as e:  # outcome unknown: not in the ledger
            errors.append(repr(e))
            time.sleep(0.05)
        i += 1


@contextlib.contextmanager
def ledger_writers(ports, n, prefix):
    """`n` write_ledger threads (thread i writing through ports[i % len])
    while the block runs; yields their ledgers."""
    stop = threading.Event()
    ledgers = [dict() for _ in range(n)]
    errors = []
    threads = [threading.Thread(target=write_ledger,
                                args=(ports[i % len(ports)], stop, ledgers[i], errors, f"{prefix}{i}"))
               for i in range(n)]
    for t in threads:
        t.start()
    try:
        yield ledgers
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=30)


def assert_no_acknowledged_write_lost(ledgers, port):
    """Every write in `ledgers` (from write_ledger) reads back through a
    cluster client connected to `port`."""
    acked = {k: v for l in ledgers for k, v in l.items()}
    rc = RedisCluster(host="127.0.0.1", port=port, decode_responses=True)
    missing = [k for k, v in acked.items() if rc.get(k) != v]
    assert not missing, f"{len(missing)} of {len(acked)} acknowledged writes lost, e.g. {missing[:5]}"


def test_failover_after_kill_9_loses_no_acknowledged_write(site):
    alive = [s for s in site if s is not site[1]]
    with ledger_writers([s.port for s in alive], 4, "t") as ledgers:
        wait_until(lambda: sum(len(l) for l in ledgers) > 400, timeout=20, message="writers got going")
        site[1].proc.kill()  # kill -9 a node: primary of a third, backup of a third
        site[1].proc.wait()
        killed_at = sum(len(l) for l in ledgers)
        # Writes succeed again on every slot range within a few seconds.
        wait_until(lambda: sum(len(l) for l in ledgers) > killed_at + 400, timeout=30,
                   message="writes did not resume after the kill")
    assert_no_acknowledged_write_lost(ledgers, alive[0].port)
    # Every slot range now has a live primary.
    with RespConn.to(alive[0]) as c:
        primaries = {p[1] for _, _, p, *_ in c.call("CLUSTER", "SLOTS")}
    assert site[1].port not in primaries


def write_typed_ledger(port, stop, ledger, errors, prefix, kind):
    """Like write_ledger for another type: SADD of unique members to 16
    sets, ZADD of unique members to 16 sorted sets, or INCR of 16 counters.
    The ledger holds what was acknowledged: (key, member) -> score, or
    key -> [acknowledged, attempted] increments."""
    rc = RedisCluster(host="127.0.0.1", port=port, decode_responses=True, socket_timeout=8)
    i = 0
    while not stop.is_set():
        key = f"{prefix}:{kind}:{{{i % 16}}}"
        try:
            if kind == "set":
                if rc.sadd(key, f"m{i}") == 1:
                    ledger[(key, f"m{i}")] = None
            elif kind == "zset":
                if rc.zadd(key, {f"m{i}": i}) == 1:
                    ledger[(key, f"m{i}")] = float(i)
            else:
                counts = ledger.setdefault(key, [0, 0])
                counts[1] += 1
                rc.incr(key)
                counts[0] += 1
        except Exception as e:  # outcome unknown: not acknowledged
            errors.append(repr(e))
            time.sleep(0.05)
        i += 1


def test_failover_after_kill_9_loses_no_acknowledged_set_sorted_set_or_counter_write(site):
    alive = [s for s in site if s is not site[1]]
    stop, errors = threading.Event(), []
    ledgers = {kind: {} for kind in ("set", "zset", "counter")}
    threads = [threading.Thread(target=write_typed_ledger,
                                args=(alive[i % 2].port, stop, ledgers[kind], errors, f"w{i}", kind))
               for i, kind in enumerate(ledgers)]
    for t in threads:
        t.start()
    try:
        total = lambda: sum(len(l) for l in ledgers.values())
        wait_until(lambda: total() > 200, timeout=20, message="writers got going")
        site[1].proc.kill()  # kill -9: primary of a third of the slots
        site[1].proc.wait()
        killed_at = len(ledgers["set"]) + len(ledgers["zset"])
        wait_until(lambda: len(ledgers["set"]) + len(ledgers["zset"]) > killed_at + 200, timeout=30,
                   message="writes did not resume after the kill")
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=30)
    rc = RedisCluster(host="127.0.0.1", port=alive[0].port, decode_responses=True)
    lost = [km for km in ledgers["set"] if not rc.sismember(*km)]
    assert not lost, f"{len(lost)} of {len(ledgers['set'])} acknowledged SADDs lost, e.g. {lost[:5]}"
    lost = [km for km, score in ledgers["zset"].items() if rc.zscore(*km) != score]
    assert not lost, f"{len(lost)} of {len(ledgers['zset'])} acknowledged ZADDs lost, e.g. {lost[:5]}"
    for key, (acked, attempted) in ledgers["counter"].items():
        value = int(rc.get(key) or 0)
        # Every acknowledged increment is there; one whose reply was lost
        # in the failover may be too.
        assert acked <= value <= attempted, (key, acked, value, attempted)


def cluster_status(node):
    out = subprocess.run([binary(), "cluster", "status", "--admin", f"127.0.0.1:{node.admin_port}"],
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_cluster_status_and_metrics_follow_a_failover(site):
    text = cluster_status(site[0])
    assert "formed: true" in text
    rows = [l.split() for l in text.splitlines() if re.match(r"n\d", l)]
    assert len(rows) == 3 and all(r[3] == "up" and r[4] == "active" for r in rows), text
    assert sum(int(r[5]) for r in rows) == 271  # every partition has one primary
    from prometheus_client.parser import text_string_to_metric_families
    metrics = {f.name: f for f in text_string_to_metric_families(http_get("127.0.0.1", site[0].admin_port, "/metrics")[2].decode())}
    assert sum(s.value for s in metrics["deltagrid_partitions_primary"].samples) == 271
    site[2].proc.kill()
    site[2].proc.wait()
    wait_until(lambda: " dead " in cluster_status(site[0]) and "down" in cluster_status(site[0]), timeout=20,
               message="status never showed the dead member")
    # The failover commits right after the member is marked dead.
    wait_until(lambda: int(status_rows(site[0])["n3"][5]) == 0, timeout=20,
               message="primaries left on the dead node")
    info = redis.Redis(port=site[0].port).info("replication")
    assert info["primary_changes"] > 0 and info["partition_table_epoch"] > 1


def restart(node):
    """Starts a killed node again with its config and data directory."""
    d, config, port = node.restart_args
    again = Server(d, config=config, port=port)
    again.cluster_port, again.restart_args = node.cluster_port, node.restart_args
    return again


def status_rows(node):
    text = cluster_status(node)
    return {l.split()[0].rstrip("*"): l.split() for l in text.splitlines() if re.match(r"n\d", l)}


def all_partitions_backed_up(node, backups=1):
    rows = status_rows(node)
    live = [r for r in rows.values() if r[4] == "active"]
    return sum(int(r[7]) for r in live) == 271 * backups  # in-sync backups per partition


def kill_and_await_failover(victim, name, observer, written, more):
    """kill -9 `victim` (member `name`); returns once `observer` lists it
    dead and the writers (`written()` acknowledged so far) went `more`
    writes further."""
    victim.proc.kill()
    victim.proc.wait()
    wait_until(lambda: status_rows(observer)[name][4] == "dead", timeout=20, message=f"{name} never marked dead")
    at = written()
    wait_until(lambda: written() > at + more, timeout=30, message=f"writes did not resume after {name} was killed")


def test_backups_are_rebuilt_and_a_second_failure_loses_nothing(site):
    """kill -9 a node; its partitions fail over and every partition gets a
    new in-sync backup (snapshot + catch-up); the node restarts and is
    active again; then a second node is killed: still no acknowledged
    write lost, with writers running throughout."""
    n1, n2, n3 = site
    restarted = None
    try:
        with ledger_writers([n3.port], 3, "s") as ledgers:
            wait_until(lambda: sum(len(l) for l in ledgers) > 300, timeout=20, message="writers got going")
            n2.proc.kill()
            n2.proc.wait()
            wait_until(lambda: status_rows(n3)["n2"][4] == "dead", timeout=20, message="n2 never marked dead")
            wait_until(lambda: all_partitions_backed_up(n3), timeout=30,
                       message="backups were not rebuilt after the first failure")
            restarted = restart(n2)
            wait_until(lambda: status_rows(n3)["n2"][3:5] == ["up", "active"], timeout=30,
                       message="the restarted node did not become active again")
            count = sum(len(l) for l in ledgers)
            n1.proc.kill()
            n1.proc.wait()
            wait_until(lambda: status_rows(n3)["n1"][4] == "dead", timeout=20, message="n1 never marked dead")
            wait_until(lambda: sum(len(l) for l in ledgers) > count + 300, timeout=30,
                       message="writes did not resume after the second failure")
            wait_until(lambda: all_partitions_backed_up(n3), timeout=30,
                       message="backups were not rebuilt after the second failure")
    finally:
        if restarted is not None:
            site.append(restarted)  # stopped by the fixture
    assert_no_acknowledged_write_lost(ledgers, n3.port)


def test_a_node_restarted_before_it_is_detected_gives_up_its_copies(site):
    """kill -9 and restart at once, faster than failure detection: the
    restarted process has no data, so it must not serve its old partitions;
    it has them failed over and comes back active. No acknowledged write lost."""
    victim = site[1]
    with ledger_writers([site[0].port], 1, "q") as ledgers:
        ledger = ledgers[0]
        wait_until(lambda: len(ledger) > 200, timeout=20, message="writer got going")
        victim.proc.kill()
        victim.proc.wait()
        site[1] = restart(victim)
        wait_until(lambda: b"giving up this node's copies" in site[1].log_path.read_bytes(), timeout=30,
                   message="the restarted node did not give up its copies")
        # Back as an active member; migration then gives it its share again
        # (snapshots first, then fenced handovers).
        wait_until(lambda: status_rows(site[0])["n2"][3:5] == ["up", "active"], timeout=30,
                   message="the restarted node did not come back")
        count = len(ledger)
        wait_until(lambda: len(ledger) > count + 200, timeout=30, message="writes did not continue")
    assert_no_acknowledged_write_lost(ledgers, site[0].port)


def test_a_primary_cut_off_from_the_majority_stops_acknowledging(site):
    """Fault injection in the transport (DEBUG CLUSTER-ISOLATE): the cut-off
    primary cannot get its backups' acks and never answers +OK; once its
    lease runs out it serves nothing (CLUSTERDOWN); the majority fails its
    partitions over and keeps taking writes."""
    n1, n2, n3 = site
    with RespConn.to(n2) as c:
        slots = c.call("CLUSTER", "SLOTS")
    first = next(f for f, l, p, *b in slots if p[1] == n1.port)
    key = next(f"cut{i}" for i in range(1_000_000) if key_slot(f"cut{i}".encode()) == first)
    # And a key n1 holds a backup of, written at its primary.
    backed, owner = next((f, p[1]) for f, l, p, *b in slots if any(r[1] == n1.port for r in b))
    backed_key = next(f"bk{i}" for i in range(1_000_000) if key_slot(f"bk{i}".encode()) == backed)
    with RespConn("127.0.0.1", owner) as c:
        assert c.call("SET", backed_key, "copied") == "OK"
    with RespConn.to(n1) as c:
        assert c.call("SET", key, "before") == "OK"
        assert c.call("DEBUG", "CLUSTER-ISOLATE", 1) == "OK"
    with socket.create_connection(("127.0.0.1", n1.port), timeout=15) as sock:
        sock.sendall(b"*3\r\n$3\r\nSET\r\n$" + str(len(key)).encode() + b"\r\n" + key.encode() + b"\r\n$5\r\nafter\r\n")
        reply = sock.recv(1000)  # closed unanswered (b"") or an error; never +OK
        assert not reply.startswith(b"+OK"), "a primary cut off from its site acknowledged a write"
    # Its lease runs out: reads and writes of its partitions get CLUSTERDOWN,
    # and it says the cluster has failed (as Redis Cluster's minority side).
    def refused_down():
        with RespConn.to(n1) as c:
            return c.cmd("GET", key).startswith(b"-CLUSTERDOWN")
    wait_until(refused_down, timeout=5, message="the cut-off primary kept serving reads")
    # READONLY reads of its backup copies stay available (possibly stale).
    with RespConn.to(n1) as c:
        assert c.call("READONLY") == "OK"
        assert c.call("GET", backed_key) == b"copied"
    with RespConn.to(n1) as c:
        assert c.cmd("SET", key, "again").startswith(b"-CLUSTERDOWN")
        assert b"lease:0" in bytes(c.call("INFO", "replication"))
    assert b"cluster_state:fail" in cluster_info(n1)
    assert b"deltagrid_lease_held 0" in http_get("127.0.0.1", n1.admin_port, "/metrics")[2]
    wait_until(lambda: status_rows(n2)["n1"][4] == "dead", timeout=20, message="the majority never declared n1 dead")
    rc = RedisCluster(host="127.0.0.1", port=n2.port, decode_responses=True)
    wait_until(lambda: rc.set(key, "majority"), timeout=20, message="the majority did not take writes")
    assert rc.get(key) == "majority"
    assert b"cluster_state:ok" in cluster_info(n2)
    # Linked again, n1 learns it was replaced before serving anything: MOVED.
    with RespConn.to(n1) as c:
        assert c.call("DEBUG", "CLUSTER-ISOLATE", 0) == "OK"
    def moved():
        with RespConn.to(n1) as c:
            return c.cmd("GET", key).startswith(b"-MOVED")
    wait_until(moved, timeout=20, message="n1 never learned that its partition moved")


def test_a_backup_cut_off_briefly_catches_up_and_a_failover_to_it_loses_nothing(site):
    """DEBUG CLUSTER-ISOLATE on a backup for less than failure detection
    takes (1.5 s) under write load: the batches in flight on its links are
    lost. Its primaries send them again when the links are back (and a
    backup that still finds a gap in a partition's seqs asks for a
    snapshot); writes go on, every partition has an in-sync backup again;
    then its primary is killed (-9) and its copies take over: every
    acknowledged write is there."""
    n1, n2, n3 = site
    with ledger_writers([n2.port], 3, "b") as ledgers:
        written = lambda: sum(len(l) for l in ledgers)
        wait_until(lambda: written() > 300, timeout=20, message="writers got going")
        with RespConn.to(n3) as c:
            assert c.call("DEBUG", "CLUSTER-ISOLATE", 1) == "OK"
            time.sleep(0.5)  # the cut: shorter than failure detection
            assert c.call("DEBUG", "CLUSTER-ISOLATE", 0) == "OK"
        assert status_rows(n1)["n3"][4] == "active", "the cut was long enough to declare n3 dead"
        at = written()
        wait_until(lambda: written() > at + 600, timeout=30, message="writes did not go on after the cut")
        wait_until(lambda: all_partitions_backed_up(n1), timeout=30,
                   message="the cut-off backup's copies never got back in sync")
        # Every partition takes writes again (a backup stuck on a gap
        # would hold its partitions' writes until they time out).
        one_per_partition = {}
        for i in range(100_000):
            one_per_partition.setdefault(key_slot(f"p{i}".encode()) * 271 // 16384, f"p{i}")
            if len(one_per_partition) == 271:
                break
        pending = set(one_per_partition.values())
        every = RedisCluster(host="127.0.0.1", port=n2.port, decode_responses=True, socket_timeout=8)

        def write_each():
            for k in list(pending):
                try:
                    if every.set(k, "x"):
                        pending.discard(k)
                except Exception:  # a partition still catching up: next round
                    pass
            return not pending
        try:
            wait_until(write_each, timeout=60, message="every partition taking writes again")
        finally:
            assert not pending, f"{len(pending)} partitions never took a write again, e.g. {sorted(pending)[:5]}"
        kill_and_await_failover(n1, "n1", n2, written, 300)
    assert_no_acknowledged_write_lost(ledgers, n2.port)


def test_with_two_backups_two_failures_in_a_row_lose_nothing(tmp_path):
    """Five nodes, `backups = 2`, writers throughout. kill -9 of one node:
    an in-sync backup of each of its partitions is promoted, and the
    other backup, which may hold a last change of the dead primary that
    the promoted one never got, reloads from the new primary rather than
    stay in sync on a history the new primary rewrites. Once every
    partition has two in-sync backups again, a second node is killed:
    every acknowledged write is still there."""
    with started_site(tmp_path, n=5, backups=2) as site:
        n1, n2, n3, n4, n5 = site
        with ledger_writers([n4.port, n5.port], 4, "w") as ledgers:
            written = lambda: sum(len(l) for l in ledgers)
            wait_until(lambda: all_partitions_backed_up(n5, backups=2), timeout=30,
                       message="the site never had two in-sync backups per partition")
            wait_until(lambda: written() > 400, timeout=20, message="writers got going")
            for victim, name in ((n1, "n1"), (n2, "n2")):
                kill_and_await_failover(victim, name, n5, written, 400)
                wait_until(lambda: all_partitions_backed_up(n5, backups=2), timeout=60,
                           message=f"two in-sync backups per partition were not rebuilt after {name} was killed")
        assert_no_acknowledged_write_lost(ledgers, n5.port)


def assert_every_copy_holds(ledgers, node, nodes):
    """Every write acknowledged so far reads back from the primary and from
    every backup (READONLY) of its slot, as CLUSTER SLOTS on `node` lists
    them: in-sync copies hold the same history, whichever gets promoted."""
    acked = {k: v for l in ledgers for k, v in list(l.items())}
    by_port = {n.port: n for n in nodes}
    with RespConn.to(node) as c:
        slots = c.call("CLUSTER", "SLOTS")
    ranges = [(first, last, [p[1]] + [r[1] for r in rs]) for first, last, p, *rs in slots]
    conns = {}
    try:
        for port in {port for *_, ports in ranges for port in ports}:
            conns[port] = RespConn.to(by_port[port])
            assert conns[port].call("READONLY") == "OK"
        missing = []
        for key, value in acked.items():
            slot = key_slot(key.encode())
            ports = next(ports for first, last, ports in ranges if first <= slot <= last)
            missing += [(key, port, got) for port in ports if (got := conns[port].call("GET", key)) != value.encode()]
        assert not missing, f"{len(missing)} copies lack acknowledged writes, e.g. {missing[:5]}"
    finally:
        for c in conns.values():
            c.close()


def slot_owners(node):
    """{first slot of each range: (primary port, replica ports)} per CLUSTER SLOTS."""
    with RespConn.to(node) as c:
        return {first: (p[1], {r[1] for r in rs}) for first, last, p, *rs in c.call("CLUSTER", "SLOTS")}


def test_a_backup_holding_changes_the_promoted_one_lacks_reloads_and_nothing_is_lost(tmp_path):
    """Five nodes, `backups = 2`. n1 holds back its batches to n2 (DEBUG
    CLUSTER-HOLD): writes to n1's partitions backed up by n2 wait, while
    their other backup already has them. kill -9 of n1: where n2 is
    promoted, its next changes reuse seqs the other backup holds with the
    dead primary's unacknowledged writes; that backup must reload rather
    than acknowledge them as held. Then n2 is killed and those backups
    take over: every acknowledged write is there."""
    with started_site(tmp_path, n=5, backups=2) as site:
        n1, n2, n3, n4, n5 = site
        with ledger_writers([n3.port, n4.port, n5.port], 8, "h") as ledgers:
            written = lambda: sum(len(l) for l in ledgers)
            wait_until(lambda: all_partitions_backed_up(n5, backups=2), timeout=30,
                       message="the site never had two in-sync backups per partition")
            wait_until(lambda: written() > 400, timeout=20, message="writers got going")
            before = slot_owners(n5)
            with RespConn.to(n1) as c:
                assert c.cmd("DEBUG", "CLUSTER-HOLD", "n9", 1).startswith(b"-ERR no member named n9")
                assert c.call("DEBUG", "CLUSTER-HOLD", "n2", 1) == "OK"
            wait_until(lambda: int(status_rows(n1)["n2"][8]) > 0, timeout=10,
                       message="nothing queued for n2 while held")
            time.sleep(0.3)  # writers pile up on the held partitions
            kill_and_await_failover(n1, "n1", n5, written, 400)
            wait_until(lambda: all_partitions_backed_up(n5, backups=2), timeout=60,
                       message="two in-sync backups per partition were not rebuilt after n1 was killed")
            after = slot_owners(n5)
            held = [f for f, (p, rs) in before.items() if p == n1.port and n2.port in rs]
            assert any(after[f][0] == n2.port for f in held), "n2 was promoted for none of the held partitions"
            assert_every_copy_holds(ledgers, n5, site)
            kill_and_await_failover(n2, "n2", n5, written, 400)
        assert_no_acknowledged_write_lost(ledgers, n5.port)
