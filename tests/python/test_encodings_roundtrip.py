"""Value encodings round-trip through replication, WAN, backup and restore.

Property test: for several seeds, a random workload over ~30 keys of every
collection type (and strings, counters among them: INCR where partitions
merge with another site; and lists, pushed, popped, trimmed, set and
removed from) runs against site A (three nodes, one replica per
partition), with small encoding thresholds on every node so hashes, sets
and sorted sets cross them both ways (grow past them, shrink back below).
Site A replicates over WAN to site B (both ways linked, so partitions
merge). The test keeps the workload's model client-side and checks:

- every reply of site A against the model;
- each key's TYPE, whole value and TTL presence on its primary at A
  against the model, and on its replica (read with READONLY) and at site B
  against A;
- OBJECT ENCODING on every copy: a live copy (A's primary, its replica,
  site B, which apply the same changes) gives what Redis gives for the
  key's history: a hash or sorted set that once outgrew the thresholds
  stays `hashtable`/`skiplist` when it shrinks back (as in Redis, and as
  `keyspace::value` documents); a set is `intset` while it holds only
  integers (deltagrid computes that one from the members, see
  docs/architecture.md "Small hashes"), else `listpack` until it
  outgrew the thresholds; strings are `int`/`embstr`/`raw` by content;
- a backup of site A restored into a fresh site holds the same data, with
  the encodings a load gives (Redis's RDB load too): by the value's size
  alone, whatever its history.

One seed also kills (kill -9) a node of site A halfway through its
workload: the promoted replicas must hold every acknowledged write with
the same encodings, and every partition gets a new replica from a
snapshot (whole values: encodings by size, like a Redis full sync), which
must hold the same data at once and after the rest of the workload. (That
is how a field removed, then written again, went missing on a new
replica: the snapshot's tombstones, loaded after its entries, removed it;
see keyspace::apply, HashDel.)

Where deltagrid's sets differ from Redis 7.2 (not checked here): Redis
keeps `listpack` for a set of integers that once held a non-integer, and
turns an intset of fewer than set-max-listpack-entries members into a
`listpack` when a non-integer joins it, even if the set was larger
before; deltagrid says `intset` for any all-integer set and keeps a set
that once outgrew the thresholds as `hashtable`.
"""
import json
import os
import random
import signal
import subprocess
import time

import pytest
import redis
from redis.cluster import RedisCluster
from redis.crc import key_slot

from conftest import binary
from helpers import wait_until
from helpers_net import RespConn, RespError
from helpers_wan import BACKUP_ENV, sites, slot_copies, wait_failed_over  # noqa: F401 (sites: a fixture)

pytestmark = pytest.mark.deltagrid_only

ENTRIES = 4   # *-max-listpack-entries
VALUE = 16    # *-max-listpack-value (bytes)
THRESHOLDS = {
    "hash-max-listpack-entries": ENTRIES, "hash-max-listpack-value": VALUE,
    "set-max-listpack-entries": ENTRIES, "set-max-listpack-value": VALUE,
    "zset-max-listpack-entries": ENTRIES, "zset-max-listpack-value": VALUE,
}
INTSET_MAX = 512  # set-max-intset-entries (its default; this test leaves it)
EMBSTR_MAX = 44
N_KEYS = 30
OPS = 400
SEEDS = [1, 2, 3, 4, 5]
KILL_SEED = 3  # this seed's workload kills a primary of site A halfway
TTL = 100_000  # seconds: no TTL runs out while the test runs


# -- the model -------------------------------------------------------------

class Entry:
    """A key in the model: its type, value (bytes; dict; set; dict member ->
    score), whether it has a TTL, and whether its collection outgrew the
    thresholds since it was created (then it stays in the table form):
    `big` on the primary's copy, `rbig` on its replica's (they differ once
    a new replica was made from a snapshot of whole values)."""

    def __init__(self, kind, value):
        self.kind, self.value, self.ttl, self.big, self.rbig = kind, value, False, False, False

    def grow(self):
        self.big = self.rbig = True

    def __repr__(self):
        return f"Entry({self.kind}, {self.value!r}, ttl={self.ttl}, big={self.big}, rbig={self.rbig})"


class WrongType(Exception):
    pass


class NotInt(Exception):
    pass


def is_int(b):
    """The canonical text of an i64 (what Redis keeps in an intset or as an
    `int` string)."""
    try:
        n = int(b.decode())
    except (ValueError, UnicodeDecodeError):
        return False
    return -2**63 <= n < 2**63 and str(n).encode() == b and len(b) <= 20


def fmt_score(x):
    return repr(float(x))


def zsorted(z):
    return sorted(z.items(), key=lambda mv: (mv[1], mv[0]))


class Model:
    def __init__(self):
        self.keys = {}
        # Collections seen in the table form below the thresholds (they
        # grew past them, then shrank back).
        self.shrank = set()

    def note(self, k):
        e = self.keys.get(k)
        if e is not None and e.big and not loaded_big(e):
            self.shrank.add(k)

    def get(self, k, kind):
        e = self.keys.get(k)
        if e is not None and e.kind != kind:
            raise WrongType
        return e

    def make(self, k, kind, value):
        e = self.keys.get(k)
        if e is None:
            e = self.keys[k] = Entry(kind, value)
        return e

    def drop_if_empty(self, k):
        e = self.keys.get(k)
        if e is not None and e.kind != "string" and not e.value:
            del self.keys[k]

    # Each op returns the reply site A must give (WrongType / NotInt: that error).

    def hset(self, k, pairs):
        self.get(k, "hash")
        e = self.make(k, "hash", {})
        new = 0
        for f, v in pairs:
            if len(f) > VALUE or len(v) > VALUE or (f not in e.value and len(e.value) >= ENTRIES):
                e.grow()
            new += f not in e.value
            e.value[f] = v
        return new

    def hdel(self, k, fields):
        e = self.get(k, "hash")
        if e is None:
            return 0
        n = sum(e.value.pop(f, None) is not None for f in fields)
        self.drop_if_empty(k)
        return n

    def hincrby(self, k, f, by):
        e = self.get(k, "hash")
        held = e.value.get(f, b"0") if e else b"0"
        if not is_int(held):
            raise NotInt
        n = int(held) + by
        self.hset(k, [(f, str(n).encode())])
        return n

    def sadd(self, k, members):
        self.get(k, "set")
        e = self.make(k, "set", set())
        new = 0
        for m in members:
            if m in e.value:
                continue
            if len(m) > VALUE or len(e.value) >= ENTRIES:
                e.grow()
            e.value.add(m)
            new += 1
        return new

    def srem(self, k, members):
        e = self.get(k, "set")
        if e is None:
            return 0
        n = 0
        for m in members:
            if m in e.value:
                e.value.remove(m)
                n += 1
        self.drop_if_empty(k)
        return n

    def spop(self, k, got):
        """SPOP answered `got`: it must have been a member."""
        e = self.get(k, "set")
        if e is None:
            assert got is None, f"SPOP {k!r} of a missing key gave {got!r}"
            return got
        assert got in e.value, f"SPOP {k!r} gave {got!r}, not a member of {sorted(e.value)}"
        e.value.remove(got)
        self.drop_if_empty(k)
        return got

    def zadd(self, k, pairs):
        self.get(k, "zset")
        e = self.make(k, "zset", {})
        new = 0
        for m, s in pairs:
            if m not in e.value:
                if len(m) > VALUE or len(e.value) >= ENTRIES:
                    e.grow()
                new += 1
            e.value[m] = float(s)
        return new

    def zincrby(self, k, by, m):
        e = self.get(k, "zset")
        held = e.value.get(m, 0.0) if e else 0.0
        self.zadd(k, [(m, held + by)])
        return held + by

    def zrem(self, k, members):
        e = self.get(k, "zset")
        if e is None:
            return 0
        n = sum(e.value.pop(m, None) is not None for m in members)
        self.drop_if_empty(k)
        return n

    def zremrangebyrank(self, k, start, stop):
        e = self.get(k, "zset")
        if e is None:
            return 0
        n = len(e.value)
        start, stop = start + n if start < 0 else start, stop + n if stop < 0 else stop
        start, stop = max(start, 0), min(stop, n - 1)
        if start > stop or start >= n:
            return 0
        for m, _ in zsorted(e.value)[start:stop + 1]:
            del e.value[m]
        self.drop_if_empty(k)
        return stop - start + 1

    def zpopmin(self, k, count):
        e = self.get(k, "zset")
        if e is None:
            return []
        out = zsorted(e.value)[:count]
        for m, _ in out:
            del e.value[m]
        self.drop_if_empty(k)
        return out

    def set(self, k, v, ttl):
        e = self.keys[k] = Entry("string", v)
        e.ttl = ttl
        return True

    def incrby(self, k, by):
        e = self.get(k, "string")
        held = e.value if e else b"0"
        if not is_int(held):
            raise NotInt
        n = int(held) + by
        if e is None:
            self.keys[k] = Entry("string", str(n).encode())
        else:
            e.value = str(n).encode()
        return n

    def append(self, k, v):
        e = self.get(k, "string")
        if e is None:
            e = self.keys[k] = Entry("string", b"")
        e.value += v
        return len(e.value)

    def push(self, k, left, vals):
        self.get(k, "list")
        e = self.make(k, "list", [])
        for v in vals:
            if left:
                e.value.insert(0, v)
            else:
                e.value.append(v)
        return len(e.value)

    def pop(self, k, left, count):
        e = self.get(k, "list")
        if e is None:
            return None
        n = min(count, len(e.value))
        if left:
            got, e.value[:n] = e.value[:n], []
        else:
            got = e.value[len(e.value) - n:][::-1]
            del e.value[len(e.value) - n:]
        self.drop_if_empty(k)
        return got

    def lrem(self, k, count, v):
        e = self.get(k, "list")
        if e is None:
            return 0
        hits = [i for i, x in enumerate(e.value) if x == v]
        hits = hits[:count] if count > 0 else hits[::-1][:-count] if count < 0 else hits
        for i in sorted(hits, reverse=True):
            del e.value[i]
        self.drop_if_empty(k)
        return len(hits)

    def lset(self, k, index, v):
        self.get(k, "list").value[index] = v
        return True

    def ltrim(self, k, start, stop):
        e = self.get(k, "list")
        if e is not None:
            n = len(e.value)
            start = max(n + start, 0) if start < 0 else start
            stop = n + stop if stop < 0 else min(stop, n - 1)
            e.value[:] = e.value[start:stop + 1] if start <= stop else []
            self.drop_if_empty(k)
        return True

    def delete(self, k):
        return int(self.keys.pop(k, None) is not None)

    def expire(self, k):
        e = self.keys.get(k)
        if e is None:
            return 0
        e.ttl = True
        return 1

    def persist(self, k):
        e = self.keys.get(k)
        if e is None or not e.ttl:
            return 0
        e.ttl = False
        return 1

    # -- what each copy must hold

    def snapshot(self):
        return {k: (e.kind, norm_value(e.kind, e.value), e.ttl) for k, e in self.keys.items()}

    def encodings(self, copy="primary"):
        """Each key's OBJECT ENCODING on its primary, its replica, or
        (`loaded`) on a copy made from the whole value (a restore)."""
        return {k: encoding_of(e, copy) for k, e in self.keys.items()}

    def snapshot_taken(self, keys):
        """New replicas of `keys` were made from their whole values."""
        for k in keys:
            if k in self.keys:
                self.keys[k].rbig = loaded_big(self.keys[k])


def norm_value(kind, v):
    if kind == "string":
        return v
    if kind == "hash":
        return tuple(sorted(v.items()))
    if kind == "set":
        return tuple(sorted(v))
    if kind == "list":
        return tuple(v)
    return tuple(zsorted(v))


def loaded_big(e):
    """Whether a collection made from its whole value takes the table form:
    by its size alone."""
    if e.kind == "string":
        return False
    texts = [x for kv in e.value.items() for x in kv] if e.kind == "hash" else list(e.value)
    return len(e.value) > ENTRIES or any(len(x) > VALUE for x in texts)


def encoding_of(e, copy):
    v = e.value
    if e.kind == "string":
        return "int" if is_int(v) else "embstr" if len(v) <= EMBSTR_MAX else "raw"
    if e.kind == "list":
        # Redis 7.2: one listpack while it would take at most 8 KiB.
        return "listpack" if sum(map(len, v)) + 2 * len(v) + 7 <= 8192 else "quicklist"
    big = {"primary": e.big, "replica": e.rbig, "loaded": loaded_big(e)}[copy]
    if e.kind == "hash":
        return "hashtable" if big else "listpack"
    if e.kind == "set":
        if len(v) <= INTSET_MAX and all(is_int(m) for m in v):
            return "intset"
        return "hashtable" if big else "listpack"
    return "skiplist" if big else "listpack"


# -- the random workload -------------------------------------------------------

HOME = ["hash", "set", "zset", "string", "list"]


def key_name(seed, i):
    return f"enc{seed}:{HOME[i % len(HOME)]}:{i}".encode()


def short_text(rng):
    return bytes(rng.choice(b"abcdefghij") for _ in range(rng.randrange(1, 7)))


def long_text(rng):
    return b"L" * rng.randrange(VALUE + 1, VALUE + 12)


def a_value(rng):
    r = rng.random()
    if r < 0.1:
        return long_text(rng)
    if r < 0.45:
        return str(rng.randrange(-50, 50)).encode()
    return short_text(rng)


def some(rng, pool, most):
    return rng.sample(pool, rng.randrange(1, most + 1))


FIELDS = [f"f{i}".encode() for i in range(8)] + [b"a-field-name-longer-than-16"]
MEMBERS = [str(i).encode() for i in range(-3, 9)] + [b"a", b"b", b"c", b"d", b"e", b"f",
                                                     b"12345678901234567", b"m" * 20]
ZMEMBERS = [bytes([c]) for c in b"abcdefgh"] + [b"5", b"z" * 20]


def a_score(rng):
    return rng.randrange(-6, 7) / (2 if rng.random() < 0.3 else 1)


def next_op(rng, keys, model):
    """(description args, the model's reply) for one random op; the model is
    updated as site A must be. An op of another type than the key's home
    one, now and then, expects WRONGTYPE (or makes a key of that type)."""
    i = rng.randrange(len(keys))
    k = keys[i]
    kind = HOME[i % len(HOME)] if rng.random() > 0.03 else rng.choice(HOME)
    r = rng.random()
    if r < 0.04:
        return ("DEL", k), lambda: model.delete(k)
    if r < 0.09:
        secs = TTL + rng.randrange(1000)
        return ("EXPIRE", k, secs), lambda: model.expire(k)
    if r < 0.11:
        return ("PERSIST", k), lambda: model.persist(k)
    r = rng.random()
    if kind == "hash":
        if r < 0.45:
            pairs = [(f, a_value(rng)) for f in some(rng, FIELDS, 3)]
            return ("HSET", k, *[x for p in pairs for x in p]), lambda: model.hset(k, pairs)
        if r < 0.8:
            fields = some(rng, FIELDS, 3)
            return ("HDEL", k, *fields), lambda: model.hdel(k, fields)
        f, by = rng.choice(FIELDS), rng.randrange(-5, 6)
        return ("HINCRBY", k, f, by), lambda: model.hincrby(k, f, by)
    if kind == "set":
        if r < 0.45:
            ms = some(rng, MEMBERS, 3)
            return ("SADD", k, *ms), lambda: model.sadd(k, ms)
        if r < 0.8:
            ms = some(rng, MEMBERS, 3)
            return ("SREM", k, *ms), lambda: model.srem(k, ms)
        return ("SPOP", k), None  # the model follows the reply
    if kind == "zset":
        if r < 0.4:
            pairs = [(m, a_score(rng)) for m in some(rng, ZMEMBERS, 3)]
            return ("ZADD", k, *[x for m, s in pairs for x in (s, m)]), lambda: model.zadd(k, pairs)
        if r < 0.55:
            m, by = rng.choice(ZMEMBERS), rng.choice([1, -1, 0.5, 2])
            return ("ZINCRBY", k, by, m), lambda: model.zincrby(k, by, m)
        if r < 0.8:
            ms = some(rng, ZMEMBERS, 2)
            return ("ZREM", k, *ms), lambda: model.zrem(k, ms)
        if r < 0.9:
            start = rng.randrange(-3, 3)
            stop = rng.randrange(-3, 4)
            return ("ZREMRANGEBYRANK", k, start, stop), lambda: model.zremrangebyrank(k, start, stop)
        count = rng.randrange(1, 3)
        return ("ZPOPMIN", k, count), lambda: model.zpopmin(k, count)
    if kind == "list":
        held = model.keys.get(k)
        lst = held.value if held is not None and held.kind == "list" else None
        if r < 0.45 or lst is None:
            left, vals = rng.random() < 0.5, [a_value(rng) for _ in range(rng.randrange(1, 4))]
            return ("LPUSH" if left else "RPUSH", k, *vals), lambda: model.push(k, left, vals)
        if r < 0.7:
            left, count = rng.random() < 0.5, rng.randrange(1, 3)
            return ("LPOP" if left else "RPOP", k, count), lambda: model.pop(k, left, count)
        if r < 0.8:
            count, v = rng.randrange(-2, 3), rng.choice(lst)
            return ("LREM", k, count, v), lambda: model.lrem(k, count, v)
        if r < 0.9:
            i, v = rng.randrange(-len(lst), len(lst)), a_value(rng)
            return ("LSET", k, i, v), lambda: model.lset(k, i, v)
        start, stop = rng.randrange(-3, 2), rng.randrange(-2, 6)
        return ("LTRIM", k, start, stop), lambda: model.ltrim(k, start, stop)
    if r < 0.4:
        v = a_value(rng) if rng.random() < 0.8 else b"S" * rng.randrange(EMBSTR_MAX - 2, EMBSTR_MAX + 8)
        if rng.random() < 0.2:
            return ("SET", k, v, "EX", TTL), lambda: model.set(k, v, True)
        return ("SET", k, v), lambda: model.set(k, v, False)
    if r < 0.75:
        by = rng.randrange(-20, 21)
        return ("INCRBY", k, by), lambda: model.incrby(k, by)
    v = str(rng.randrange(10)).encode() if rng.random() < 0.5 else short_text(rng)
    return ("APPEND", k, v), lambda: model.append(k, v)


def norm_reply(cmd, reply):
    if cmd == "ZPOPMIN":
        if reply and not isinstance(reply[0], (list, tuple)):
            reply = list(zip(reply[0::2], reply[1::2]))
        return [(m, float(s)) for m, s in reply]
    if cmd == "ZINCRBY":
        return float(reply)
    if isinstance(reply, bool):
        return int(reply)
    if cmd in ("SET", "LSET", "LTRIM"):
        return reply in (True, b"OK")
    return reply


def run_op(rc, seed, step, args, apply, model, history):
    cmd = args[0]
    history.append(args)
    try:
        got = rc.execute_command(*args)
        err = None
    except redis.ResponseError as e:
        got, err = None, str(e)
    if apply is None:  # SPOP: the model follows the member popped
        held = model.keys.get(args[1])
        if held is not None and held.kind != "set":
            assert err and "WRONGTYPE" in err, f"seed {seed} op {step} {args!r}: {err or got!r}, not WRONGTYPE"
            return
        assert err is None, f"seed {seed} op {step} {args!r}: {err}"
        model.spop(args[1], got)
        return
    try:
        want, want_err = apply(), None
    except WrongType:
        want, want_err = None, "WRONGTYPE"
    except NotInt:
        want, want_err = None, "not an integer"
    if want_err or err:
        assert err is not None and want_err is not None and want_err in err, (
            f"seed {seed} op {step} {args!r}: site A answered {err or got!r}, the model expects "
            f"{want_err or want!r}; last ops: {history[-8:]}")
        return
    assert norm_reply(cmd, got) == norm_reply(cmd, want), (
        f"seed {seed} op {step} {args!r}: site A answered {got!r}, the model expects {want!r} "
        f"(key now {model.keys.get(args[1])!r}); last ops: {history[-8:]}")


# -- reading the copies ----------------------------------------------------------

def read_copy(node, keys, readonly):
    """{key: (type, value, has TTL)} and {key: encoding} as `node` holds
    them (a replica read with READONLY); missing keys left out."""
    data, enc = {}, {}
    with RespConn.to(node, timeout=20) as c:
        if readonly:
            assert c.call("READONLY") == "OK"
        for k in keys:
            t = c.call("TYPE", k)
            assert not isinstance(t, RespError), f"TYPE {k!r} on node {node.port}: {t}"
            if t == "none":
                continue
            if t == "string":
                v = c.call("GET", k)
            elif t == "hash":
                flat = c.call("HGETALL", k)
                v = tuple(sorted(zip(flat[0::2], flat[1::2])))
            elif t == "set":
                v = tuple(sorted(c.call("SMEMBERS", k)))
            elif t == "list":
                v = tuple(c.call("LRANGE", k, 0, -1))
            elif t == "zset":
                flat = c.call("ZRANGE", k, 0, -1, "WITHSCORES")
                v = tuple((m, float(s)) for m, s in zip(flat[0::2], flat[1::2]))
            else:
                raise AssertionError(f"{k!r} has type {t} on node {node.port}")
            pttl = c.call("PTTL", k)
            e = c.call("OBJECT", "ENCODING", k)
            for x in (v, pttl, e):
                assert not isinstance(x, RespError), f"reading {k!r} on node {node.port}: {x}"
            if e is None or v is None or v == () or pttl == -2:
                continue  # gone between the reads (a copy still converging): left out
            data[k] = (t, v, pttl > 0)
            enc[k] = e.decode()
    return data, enc


def read_site(nodes, keys):
    """Site's copies: ({key: (type, value, ttl)} from each key's primary,
    its encodings there, [(replica port, data, encodings)] of the keys each
    replica holds a copy of)."""
    table = slot_copies(nodes)
    by_primary, by_replica = {}, {}
    for k in keys:
        primary, replicas = table[key_slot(k)]
        assert primary is not None, f"slot {key_slot(k)} of {k!r} has no live primary"
        by_primary.setdefault(primary.port, (primary, []))[1].append(k)
        for r in replicas:
            by_replica.setdefault(r.port, (r, []))[1].append(k)
    data, enc = {}, {}
    for node, ks in by_primary.values():
        d, e = read_copy(node, ks, readonly=False)
        data.update(d)
        enc.update(e)
    replicas = [(node.port, *read_copy(node, ks, readonly=True)) for node, ks in by_replica.values()]
    return data, enc, replicas, by_replica


class Run:
    """A seed's run: its number and the ops sent so far (for messages)."""

    def __init__(self, seed):
        self.seed, self.history = seed, []

    def __str__(self):
        return f"seed {self.seed}"

    def ops_on(self, key, n=10):
        ops = [(i, args) for i, args in enumerate(self.history) if key in args[1:2]]
        return "\n".join(f"      op {i}: {args!r}" for i, args in ops[-n:])


def diff(name_a, a, name_b, b, run):
    """A readable message naming the keys on which two {key: ...} differ,
    with the last ops on each (None when equal)."""
    keys = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
    if not keys:
        return None
    lines = [f"{run}: {len(keys)} keys differ between {name_a} and {name_b}:"]
    for k in keys[:12]:
        lines.append(f"  {k!r}:\n    {name_a}: {a.get(k, '<missing>')!r}\n    {name_b}: {b.get(k, '<missing>')!r}")
        lines.append(f"    last ops on it:\n{run.ops_on(k)}")
    return "\n".join(lines)


def assert_same(name_a, a, name_b, b, run):
    msg = diff(name_a, a, name_b, b, run)
    if msg:
        pytest.fail(msg, pytrace=False)


def only(d, keys):
    return {k: v for k, v in d.items() if k in keys}


def check_site(nodes, keys, want, want_enc, replica_enc, name, run):
    """Every copy of site `nodes`: primaries against `want`/`want_enc`,
    each replica against its primary and `replica_enc`."""
    data, enc, replicas, by_replica = read_site(nodes, keys)
    assert_same("the model", want, f"{name} (primaries)", data, run)
    assert_same("expected encodings", want_enc, f"{name} encodings (primaries)", enc, run)
    assert replicas, f"{name} has no replica copies"
    for port, rdata, renc in replicas:
        held = set(by_replica[port][1])
        assert_same(f"{name} primaries", only(data, held), f"{name} replica {port}", rdata, run)
        assert_same("expected encodings", only(replica_enc, held), f"{name} replica {port} encodings", renc, run)
    return data, enc


# -- sites, backup and restore ------------------------------------------------------

def set_thresholds(nodes):
    for n in nodes:
        with RespConn.to(n) as c:
            for name, v in THRESHOLDS.items():
                assert c.call("CONFIG", "SET", name, v) == "OK", name
            for name, v in THRESHOLDS.items():
                assert c.call("CONFIG", "GET", name) == [name.encode(), str(v).encode()]


def deltagrid(*args):
    p = subprocess.run([binary(), *args], capture_output=True, text=True, timeout=120,
                       env={**os.environ, "RUST_BACKTRACE": "0", **BACKUP_ENV})
    assert p.returncode == 0, f"deltagrid {' '.join(args)} exited {p.returncode}:\n{p.stdout}\n{p.stderr}"
    return p


def backup_and_restore(src, dst, url, tmp_path):
    deltagrid("backup", "create", "--admin", f"127.0.0.1:{src.admin_port}", "--to", url)
    summary = tmp_path / "restore.json"
    deltagrid("backup", "restore", "--admin", f"127.0.0.1:{dst.admin_port}", "--from", url,
              "--json", str(summary))
    return json.loads(summary.read_text())


def cluster_status_rows(node):
    """`deltagrid cluster status`: {member id: its row's columns}."""
    p = deltagrid("cluster", "status", "--admin", f"127.0.0.1:{node.admin_port}")
    return {l.split()[0].rstrip("*"): l.split() for l in p.stdout.splitlines()
            if l.split() and l.split()[0].rstrip("*").startswith("a-n")}


def kill_a_primary(a, rc, keys, model):
    """kill -9 of a node of site A (not the one the client started on);
    waits until its partitions have new primaries and every partition a
    new in-sync replica (made from a snapshot: the model's replica copies
    of those keys take the encodings of whole values). Returns a new
    client."""
    before = {k: {c.port for c in [p, *rs]} for k, (p, rs) in
              ((k, slot_copies(a.live)[key_slot(k)]) for k in keys)}
    victim = 2
    port = a.nodes[victim].port
    a.kill_node(victim)
    wait_failed_over(a.ports[0], port)

    def backed_up():
        rows = cluster_status_rows(a.live[0])
        return sum(int(r[7]) for r in rows.values() if r[4] == "active") == 271
    wait_until(backed_up, timeout=60, interval=0.2, message="every partition has an in-sync replica again")
    table = slot_copies(a.live)
    fresh = [k for k in keys if any(r.port not in before[k] for r in table[key_slot(k)][1])]
    model.snapshot_taken(fresh)
    rc.close()
    return RedisCluster(host="127.0.0.1", port=a.ports[0], socket_timeout=20)


def stop_all(*ss):
    """Stops every node of the sites at once (each may take a while)."""
    for s in ss:
        for n in s.live:
            if n.proc.poll() is None:
                n.proc.send_signal(signal.SIGINT)
    for s in ss:
        s.stop()


# -- the test ---------------------------------------------------------------------

@pytest.mark.parametrize("seed", SEEDS)
def test_encodings_round_trip_through_replication_wan_backup_and_restore(sites, tmp_path, seed):
    t0 = time.monotonic()
    a = sites(1, "a", size=3, backups=1)
    b = sites(2, "b")
    r = sites(3, "r", size=3, backups=1)
    try:
        a.target(b)
        b.target(a)
        a.start()
        b.start()
        set_thresholds(a.live + b.live)

        rng = random.Random(seed)
        keys = [key_name(seed, i) for i in range(N_KEYS)]
        model = Model()
        run = Run(seed)
        history = run.history
        rc = RedisCluster(host="127.0.0.1", port=a.ports[0], socket_timeout=20)
        for step in range(OPS):
            if seed == KILL_SEED and step == OPS // 2:
                rc = kill_a_primary(a, rc, keys, model)
                check_site(a.live, keys, model.snapshot(), model.encodings(), model.encodings("replica"),
                           "site A after the failover", run)
            args, apply = next_op(rng, keys, model)
            run_op(rc, seed, step, args, apply, model, history)
            model.note(args[1])
        rc.close()
        kinds = {e.kind for e in model.keys.values()}
        assert kinds == set(HOME), f"seed {seed}: the workload left only {kinds}"

        # Site A: primaries against the model, replicas against the primaries.
        want = model.snapshot()
        want_enc = model.encodings()
        a_data, a_enc = check_site(a.live, keys, want, want_enc, model.encodings("replica"), "site A", run)
        shrunk = [k for k, e in model.keys.items() if e.big and not loaded_big(e)]
        assert model.shrank, f"seed {seed}: no collection shrank back below the thresholds"

        # Site B, once the WAN delivered everything: the same data and encodings.
        last = {}

        def b_converged():
            last["data"], last["enc"] = read_copy(b.live[0], keys, readonly=False)
            return last["data"] == a_data
        deadline = time.monotonic() + 60
        while not b_converged():
            if time.monotonic() > deadline:
                pytest.fail(diff("site A", a_data, "site B", last["data"], run) + "\n(after 60 s)", pytrace=False)
            time.sleep(0.1)
        assert_same("site A encodings", a_enc, "site B encodings", last["enc"], run)

        # A backup of site A restored into a fresh site: the same data, the
        # encodings of values loaded whole.
        r.start()
        set_thresholds(r.live)
        summary = backup_and_restore(a.live[0], r.live[0], f"file://{tmp_path}/store", tmp_path)
        assert summary["keys_applied"] == len(want), summary
        loaded = model.encodings("loaded")
        check_site(r.live, keys, want, loaded, loaded, "restored site", run)
        print(f"seed {seed}: {len(want)} keys, {len(model.shrank)} shrank back ({len(shrunk)} at the end), {time.monotonic() - t0:.1f} s")
    finally:
        stop_all(a, b, r)
