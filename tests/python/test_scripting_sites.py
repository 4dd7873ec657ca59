"""Lua scripts and functions in a site of several nodes, with real
processes on loopback.

- Script writes (strings, hashes, INCRBY counters, sets, sorted sets on
  keys of one hash tag, sent with redis-py's RedisCluster: `eval` and
  `register_script`, i.e. EVALSHA then SCRIPT LOAD + EVALSHA) reach the
  partition's synchronous replica and, over WAN, a second site; a kill -9
  of the slot's primary while a writer runs scripts loses none of the
  acknowledged ones (read on the promoted replica), a script's writes are
  all there or none (each script writes a field naming itself), and the
  writes made after the failover reach the other site too.
- Routing: EVAL's declared keys route like any keyed command (CROSSSLOT,
  MOVED; redis-cli -c follows the MOVED), and a redis.call on a key of
  another node's slot fails with "Script attempted to access a non local
  key in a cluster node". Scripts are per node: EVALSHA answers NOSCRIPT
  on a node the script was not loaded on.
- FUNCTION LOAD on every node (functions are per node as in Redis
  Cluster), then FCALL / FCALL_RO through RedisCluster on a key of each
  node; the function's write reaches the key's replica.
"""
import subprocess
import threading
import time

import pytest
import redis
from redis.cluster import RedisCluster
from redis.crc import key_slot

from helpers import wait_until
from helpers_net import RespConn, RespError
from helpers_wan import digest, sites, slot_copies, wait_converged, wait_failed_over  # noqa: F401 (sites: a fixture)
from test_cluster import started_site
from test_encodings_roundtrip import read_copy as read_with_encodings

pytestmark = pytest.mark.deltagrid_only

TAG = "{scr}"
HASH, COUNTER, SET, ZSET, LAST = (f"{TAG}h".encode(), f"{TAG}n".encode(), f"{TAG}set".encode(),
                                  f"{TAG}z".encode(), f"{TAG}last".encode())
NONLOCAL = "Script attempted to access a non local key in a cluster node"

# Script i: a string key of its own, a field of the hash, INCRBY i on the
# counter, a set member, a sorted-set member, and the last i written. A
# script that already ran (a client's retry) changes nothing.
WRITE = """
if redis.call('HEXISTS', KEYS[2], 'f' .. ARGV[1]) == 1 then
  return redis.call('GET', KEYS[3])
end
redis.call('SET', KEYS[1], 'v' .. ARGV[1])
redis.call('HSET', KEYS[2], 'f' .. ARGV[1], ARGV[1])
local n = redis.call('INCRBY', KEYS[3], ARGV[1])
redis.call('SADD', KEYS[4], 'm' .. ARGV[1])
redis.call('ZADD', KEYS[5], ARGV[1], 'z' .. ARGV[1])
redis.call('SET', KEYS[6], ARGV[1])
return n
"""

# Undoes script i: deletes its string, hash field, members, and takes i
# off the counter.
UNDO = """
redis.call('DEL', KEYS[1])
redis.call('HDEL', KEYS[2], 'f' .. ARGV[1])
local n = redis.call('DECRBY', KEYS[3], ARGV[1])
redis.call('SREM', KEYS[4], 'm' .. ARGV[1])
redis.call('ZREM', KEYS[5], 'z' .. ARGV[1])
return n
"""


def skey(i):
    return f"{TAG}s:{i}".encode()


def script_keys(i):
    return [skey(i), HASH, COUNTER, SET, ZSET, LAST]


def expected(applied, last, strings_of):
    """The digest (helpers_wan.digest) site A must have once scripts
    `applied` (and no other) took effect, `last` the last i written;
    `strings_of`: every i whose string key may exist."""
    want = {}
    for i in strings_of:
        if i in applied:
            want[skey(i)] = ("string", f"v{i}".encode(), -1)
    if applied:
        want[HASH] = ("hash", tuple(sorted((f"f{i}".encode(), str(i).encode()) for i in applied)), -1)
        want[SET] = ("set", tuple(sorted(f"m{i}".encode() for i in applied)), -1)
        want[ZSET] = ("zset", tuple(sorted((f"z{i}".encode(), float(i)) for i in applied)), -1)
    want[COUNTER] = ("string", str(sum(applied)).encode(), -1)
    want[LAST] = ("string", str(last).encode(), -1)
    return want


def show_diff(want, got):
    keys = sorted(k for k in set(want) | set(got) if want.get(k) != got.get(k))
    return "\n".join(f"  {k!r}:\n    expected {want.get(k, '<missing>')!r}\n    got      {got.get(k, '<missing>')!r}"
                     for k in keys[:10]) + (f"\n  ... {len(keys)} keys differ" if len(keys) > 10 else "")


def read_copy(node, keys, readonly):
    """{key: (type, value, -1)} of `keys` as `node` holds them (a replica:
    read with READONLY), in digest()'s form (a sorted set's members sorted);
    missing keys left out."""
    data, _ = read_with_encodings(node, keys, readonly)
    return {k: (t, tuple(sorted(v)) if t == "zset" else v, -1) for k, (t, v, _) in data.items()}


class Writer(threading.Thread):
    """Runs script i = start, start+1, ... through a RedisCluster client
    (eval for even i, the registered script for odd i) until stopped;
    records which were attempted and which acknowledged."""

    def __init__(self, port, start):
        super().__init__(daemon=True)
        self.port, self.i = port, start
        self.attempted, self.acked, self.errors = set(), [], []
        self.stop_flag = threading.Event()

    def run(self):
        rc = RedisCluster(host="127.0.0.1", port=self.port, socket_timeout=3, socket_connect_timeout=1)
        write = rc.register_script(WRITE)
        try:
            while not self.stop_flag.is_set():
                i = self.i
                self.attempted.add(i)
                try:
                    if i % 2 == 0:
                        rc.eval(WRITE, 6, *script_keys(i), i)
                    else:
                        write(keys=script_keys(i), args=[i])
                except Exception as e:  # redis-py's cluster errors are not all RedisErrors
                    # Not acknowledged: the same i is sent again (the
                    # script is idempotent), after a pause so a dead
                    # primary is not hammered.
                    self.errors.append(repr(e))
                    self.stop_flag.wait(0.05)
                    continue
                self.acked.append(i)
                self.i += 1
        finally:
            rc.close()


def test_script_writes_reach_the_replica_and_the_other_site_and_survive_failover(sites):
    t0 = time.monotonic()
    a = sites(1, "a", size=3, backups=1)
    b = sites(2, "b")
    a.target(b)
    b.target(a)  # a site takes changes only from sites it targets
    a.start()
    b.start()

    slot = key_slot(HASH)
    primary, backups = slot_copies(a.live)[slot]
    assert len(backups) == 1, f"slot {slot} has backups {backups} (backups = 1)"
    backup = backups[0]
    entry = next(n for n in a.live if n is not primary)

    # Phase 1: scripts through RedisCluster, checked reply by reply; every
    # fifth one undoes an earlier one.
    rc = RedisCluster(host="127.0.0.1", port=entry.port, socket_timeout=10)
    write = rc.register_script(WRITE)
    undo = rc.register_script(UNDO)
    applied, n1 = set(), 60
    for i in range(1, n1 + 1):
        if i % 2 == 0:
            got = rc.eval(WRITE, 6, *script_keys(i), i)
        else:
            got = write(keys=script_keys(i), args=[i])
        applied.add(i)
        assert int(got) == sum(applied), f"script {i} answered {got!r}, expected the counter {sum(applied)}"
        if i % 5 == 0:
            j = i - 3
            if j % 2:
                got = undo(keys=script_keys(j), args=[j])
            else:
                got = rc.eval(UNDO, 6, *script_keys(j), j)
            applied.discard(j)
            assert int(got) == sum(applied), f"undo of {j} answered {got!r}, expected {sum(applied)}"
    want = expected(applied, n1, range(1, n1 + 1))
    assert {k.decode(): v for k, v in digest(a).items()} == {k.decode(): v for k, v in want.items()}, \
        "site A's primary after the scripts:\n" + show_diff(want, digest(a))
    # The synchronous replica holds every acknowledged script write.
    on_backup = read_copy(backup, list(want), readonly=True)
    assert on_backup == want, f"replica {backup.port} of slot {slot}:\n" + show_diff(want, on_backup)
    # ... and so does site B, over WAN.
    got_b = wait_converged([a, b], timeout=20, min_keys=len(want))
    assert got_b == want, "site B:\n" + show_diff(want, got_b)
    rc.close()

    # Phase 2: a writer runs scripts while the slot's primary is killed.
    writer = Writer(entry.port, n1 + 1)
    writer.start()
    try:
        wait_until(lambda: len(writer.acked) >= 50, timeout=20, interval=0.02,
                   message=f"50 scripts acknowledged before the kill (errors: {writer.errors[-3:]})")
        victim = primary.port
        a.kill_node(a.nodes.index(primary))
        killed_at = len(writer.acked)
        wait_failed_over(entry.port, victim)
        # Scripts run on the new primary too.
        wait_until(lambda: len(writer.acked) >= killed_at + 30, timeout=20, interval=0.02,
                   message=f"30 scripts acknowledged after the failover (errors: {writer.errors[-3:]})")
    finally:
        writer.stop_flag.set()
        writer.join(timeout=15)
    assert not writer.is_alive(), "the writer did not stop"

    new_primary, _ = slot_copies(a.live)[slot]
    assert new_primary is backup, (f"slot {slot}: new primary {new_primary and new_primary.port}, "
                                   f"expected its replica {backup.port}")
    # Which scripts took effect: those whose hash field is there. Every
    # acknowledged one must be; none but those attempted; and each one
    # wholly (its string, members, its share of the counter).
    later = list(range(n1 + 1, writer.i + 1))
    on_new = read_copy(new_primary, [skey(i) for i in later] + [HASH, COUNTER, SET, ZSET, LAST], readonly=False)
    fields = {int(f[1:]) for f, _ in on_new[HASH][1]}
    took = fields - set(range(1, n1 + 1))
    lost = sorted(set(writer.acked) - took)
    assert not lost, (f"{len(lost)} acknowledged scripts missing on the new primary {new_primary.port} "
                      f"after kill -9 of {victim}: {lost[:20]} (acknowledged {len(writer.acked)}, "
                      f"{killed_at} before the kill)")
    assert took <= writer.attempted, f"scripts never sent took effect: {sorted(took - writer.attempted)}"
    final = applied | took
    want = expected(final, max(took), list(range(1, writer.i + 1)))
    want_here = {k: v for k, v in want.items() if k in {skey(i) for i in later} | {HASH, COUNTER, SET, ZSET, LAST}}
    assert on_new == want_here, ("new primary after the failover (a script applied in part, or a write "
                                 "lost?):\n" + show_diff(want_here, on_new))

    # Phase 3: site B gets what the new primary holds, the scripts run
    # after the failover included.
    got_b = wait_converged([a, b], timeout=30, min_keys=len(want))
    assert got_b == want, "site B after the failover:\n" + show_diff(want, got_b)
    print(f"{len(writer.acked)} scripts in phase 2 ({killed_at} before the kill), "
          f"{len(writer.errors)} errors, {time.monotonic() - t0:.1f} s")


# -- routing and functions on a site of three nodes -------------------------------


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    with started_site(tmp_path_factory.mktemp("site")) as nodes:
        yield nodes


def owners(nodes):
    return {slot: copies[0] for slot, copies in slot_copies(nodes).items()}


def key_on(nodes, node, prefix, avoid_slots=()):
    """A key (bytes) whose slot `node` is primary for."""
    table = owners(nodes)
    for i in range(10_000):
        k = f"{prefix}{i}".encode()
        if table[key_slot(k)] is node and key_slot(k) not in avoid_slots:
            return k
    raise AssertionError(f"no key for node {node.port}")


SET_SCRIPT = "return redis.call('SET', KEYS[1], ARGV[1])"


def test_eval_keys_route_like_any_keyed_command(site):
    n0, n1 = site[0], site[1]
    k0 = key_on(site, n0, "r0:")
    k1 = key_on(site, n1, "r1:")
    k0b = key_on(site, n0, "r0b:", avoid_slots={key_slot(k0)})

    with RespConn.to(n0) as c:
        # Two slots, even both of this node: CROSSSLOT, on any node.
        for pair in ((k0, k0b), (k0, k1)):
            assert c.cmd("EVAL", SET_SCRIPT, 2, *pair, "x") == \
                b"-CROSSSLOT Keys in request don't hash to the same slot\r\n", pair
        # A key of another node: MOVED to it, and nothing written.
        assert c.cmd("EVAL", SET_SCRIPT, 1, k1, "x") == \
            f"-MOVED {key_slot(k1)} 127.0.0.1:{n1.port}\r\n".encode()
        assert c.cmd("EVAL_RO", "return redis.call('GET', KEYS[1])", 1, k1) == \
            f"-MOVED {key_slot(k1)} 127.0.0.1:{n1.port}\r\n".encode()
        sha = c.call("SCRIPT", "LOAD", SET_SCRIPT)
        assert c.cmd("EVALSHA", sha, 1, k1, "x") == f"-MOVED {key_slot(k1)} 127.0.0.1:{n1.port}\r\n".encode()
    with RespConn.to(n1) as c:
        assert c.call("GET", k1) is None
        # Scripts are per node: loaded on n0, not here.
        assert c.call("SCRIPT", "EXISTS", sha) == [0]
        assert c.cmd("EVALSHA", sha, 1, k1, "x") == b"-NOSCRIPT No matching script. Please use EVAL.\r\n"

    # redis-cli -c sent to the wrong node follows the MOVED.
    out = subprocess.run(["redis-cli", "-c", "-p", str(n0.port), "EVAL", SET_SCRIPT, "1", k1.decode(), "via-cli"],
                         capture_output=True, text=True, timeout=10)
    assert out.stdout.strip() == "OK", out
    with RespConn.to(n1) as c:
        assert c.call("GET", k1) == b"via-cli"
    # RedisCluster sends it to the owner.
    rc = RedisCluster(host="127.0.0.1", port=n0.port, socket_timeout=10)
    try:
        assert rc.eval(SET_SCRIPT, 1, k1, "via-rc") in (b"OK", True)
        assert rc.eval("return redis.call('GET', KEYS[1])", 1, k1) == b"via-rc"
    finally:
        rc.close()


def test_redis_call_on_a_key_of_another_node_is_refused(site):
    n0, n1 = site[0], site[1]
    k0 = key_on(site, n0, "nl0:")
    k1 = key_on(site, n1, "nl1:")
    with RespConn.to(n0) as c:
        cases = [
            # declared local key, then a write to another node's key
            ("redis.call('SET', KEYS[1], 'here'); return redis.call('SET', ARGV[1], 'there')", 1, k0, k1),
            # a read
            ("return redis.call('GET', ARGV[1])", 1, k0, k1),
            # no key declared: the script runs wherever it is sent
            ("return redis.call('SET', ARGV[1], 'there')", 0, k1),
            # pcall gives the error as a table; returned, it is the reply
            ("return redis.pcall('GET', ARGV[1])", 1, k0, k1),
        ]
        for body, numkeys, *rest in cases:
            got = c.call("EVAL", body, numkeys, *rest)
            assert isinstance(got, RespError) and NONLOCAL in str(got), (body, got)
        # The local write of the first case stays (no rollback, as in Redis).
        assert c.call("GET", k0) == b"here"
    with RespConn.to(n1) as c:
        assert c.call("GET", k1) is None, "a refused script wrote on the key's owner"
    # Through RedisCluster too: it routes by the declared key, the script errs.
    rc = RedisCluster(host="127.0.0.1", port=n1.port, socket_timeout=10)
    try:
        with pytest.raises(redis.ResponseError, match=NONLOCAL):
            rc.eval("return redis.call('GET', ARGV[1])", 1, k0, k1)
    finally:
        rc.close()


def test_command_info_tells_clients_script_keys_are_movable(site):
    """Cluster clients find EVAL's and FCALL's keys with COMMAND GETKEYS
    when COMMAND INFO flags the command `movablekeys` (redis-py's
    RedisCluster does so for FCALL); Redis 7.2 says first/last/step 0 0 0
    and `movablekeys` for all of these (checked against redis-server 7.2)."""
    with RespConn.to(site[0]) as c:
        for name in ("eval", "evalsha", "eval_ro", "evalsha_ro", "fcall", "fcall_ro"):
            info = c.call("COMMAND", "INFO", name)[0]
            flags = [str(f) for f in info[2]]
            assert "movablekeys" in flags and info[3:6] == [0, 0, 0], (
                f"COMMAND INFO {name}: flags {flags}, first/last/step {info[3:6]}; Redis: movablekeys, 0 0 0")
            assert c.call("COMMAND", "GETKEYS", name, "x", 2, "{t}a", "{t}b", "arg") == [b"{t}a", b"{t}b"], name


LIB = """#!lua name=sitelib
redis.register_function('put', function(keys, args)
  redis.call('SET', keys[1], args[1])
  return redis.call('HINCRBY', keys[2], 'calls', 1)
end)
redis.register_function{function_name='fetch', callback=function(keys)
  return redis.call('GET', keys[1])
end, flags={'no-writes'}}
"""


def test_functions_loaded_on_every_node_are_called_through_redis_cluster(site):
    # Not loaded yet: FCALL answers "Function not found" on the key's owner.
    tag = key_on(site, site[0], "fn-none").decode()
    with RespConn.to(site[0]) as c:
        assert c.call("FCALL", "put", 2, f"{{{tag}}}v", f"{{{tag}}}c", "x") == RespError("ERR Function not found")
    for n in site:
        with RespConn.to(n) as c:
            assert c.call("FUNCTION", "LOAD", "REPLACE", LIB) == b"sitelib", n.port
    try:
        table = slot_copies(site)
        rc = RedisCluster(host="127.0.0.1", port=site[0].port, socket_timeout=10)
        try:
            for idx, n in enumerate(site):
                tag = key_on(site, n, "fn").decode()
                key, counter = f"{{{tag}}}v".encode(), f"{{{tag}}}c".encode()
                assert table[key_slot(key)][0] is n
                for round_ in (1, 2):
                    got = rc.fcall("put", 2, key, counter, f"val{idx}-{round_}")
                    assert got == round_, (n.port, got)
                assert rc.fcall_ro("fetch", 1, key) == f"val{idx}-2".encode()
                # The function ran on the owner, and its writes reached the
                # slot's synchronous replica.
                with RespConn.to(n) as c:
                    assert c.call("GET", key) == f"val{idx}-2".encode()
                backup = table[key_slot(key)][1][0]
                with RespConn.to(backup) as c:
                    assert c.call("READONLY") == "OK"
                    assert c.call("GET", key) == f"val{idx}-2".encode(), f"replica {backup.port}"
                    assert c.call("HGET", counter, "calls") == b"2", f"replica {backup.port}"
                # Sent to another node with a plain connection: MOVED.
                other = next(o for o in site if o is not n)
                with RespConn.to(other) as c:
                    assert c.cmd("FCALL", "fetch", 1, key) == \
                        f"-MOVED {key_slot(key)} 127.0.0.1:{n.port}\r\n".encode()
        finally:
            rc.close()
    finally:
        for n in site:
            with RespConn.to(n) as c:
                c.call("FUNCTION", "FLUSH")
