"""DUMP / RESTORE / RESTORE-ASKING: Redis 7's RDB payloads, their options and
errors. Also run against redis-server (DELTAGRID_TEST_TARGET=redis). The
interop tests (deltagrid only) move payloads both ways between a real
redis-server and deltagrid."""
import shutil
import subprocess
import struct
import time

import pytest

from conftest import free_port
from helpers import NOT_INT, SYNTAX, arity, client
from helpers_net import err_bytes

pytestmark = pytest.mark.shared_server

BUSYKEY = "BUSYKEY Target key name already exists."
BAD_FOOTER = "ERR DUMP payload version or checksum are wrong"
BAD_DATA = "ERR Bad data format"


def crc64(data):
    """Redis's CRC-64 (Jones polynomial, reflected), bit by bit."""
    crc = 0
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x95AC9329AC4BC9B5 if crc & 1 else 0)
    return crc


def sealed(body, version=10):
    """`body` (type byte and object) with an RDB version and its checksum."""
    p = body + struct.pack("<H", version)
    return p + struct.pack("<Q", crc64(p))


def raw(x):
    return x if isinstance(x, bytes) else x.encode()


def round_trip(r, key, read):
    """DUMP key, delete it, RESTORE it: the read gives what it gave before."""
    before = read(key)
    payload = r.dump(key)
    assert isinstance(payload, bytes) and crc64(payload[:-8]) == struct.unpack("<Q", payload[-8:])[0]
    assert r.delete(key) == 1
    assert r.restore(key, 0, payload) in (True, b"OK", "OK")
    assert read(key) == before
    assert r.ttl(key) == -1
    return payload


def test_arity_and_missing_key(conn):
    for args in [("DUMP",), ("DUMP", "a", "b"), ("RESTORE", "k", "0"), ("RESTORE-ASKING", "k", "0")]:
        assert conn.cmd(*args) == err_bytes(arity(args[0].lower())), args
    assert conn.cmd("DUMP", "nokey") == b"$-1\r\n"


def test_strings_round_trip(r):
    r.set("s", "hello")
    p = round_trip(r, "s", r.get)
    assert p[0] == 0 and p[1:7] == b"\x05hello"
    r.set("n", "12345")
    p = round_trip(r, "n", r.get)
    assert p[:4] == b"\x00\xc1\x39\x30"  # integer-encoded, as Redis writes it
    for text in ["-7", "4294967296", "012", "", "x" * 5000, "\x00\xffbin"]:
        r.set("t", text)
        round_trip(r, "t", r.get)
    r.incrby("c", 41)
    r.incr("c")
    round_trip(r, "c", r.get)
    assert raw(r.get("c")) == b"42"
    assert r.incr("c") == 43


def test_hash_round_trip(r):
    r.hset("h", mapping={"f": "v", "n": "1", "long": "y" * 300})
    p = round_trip(r, "h", r.hgetall)
    assert p[0] == 4  # RDB_TYPE_HASH
    r.hset("big", mapping={f"f{i}": f"v{i}" for i in range(600)})
    round_trip(r, "big", r.hgetall)


def test_sets_round_trip(r):
    r.sadd("ints", 3, 1, 2, -70000)
    p = round_trip(r, "ints", r.smembers)
    assert p[0] == 11  # RDB_TYPE_SET_INTSET
    r.sadd("small", "a", "b", "c")
    round_trip(r, "small", r.smembers)
    r.sadd("large", *[f"m{i}" for i in range(1000)])
    p = round_trip(r, "large", r.smembers)
    assert p[0] == 2
    r.sadd("manyints", *range(1000))
    p = round_trip(r, "manyints", r.smembers)
    assert p[0] == 2  # past 512 integers: a plain set


def test_sorted_sets_round_trip(r):
    def read(k):
        return r.zrange(k, 0, -1, withscores=True)
    r.zadd("z", {"a": 1.5, "b": 2, "c": -3.25, "d": float("inf"), "e": float("-inf")})
    round_trip(r, "z", read)
    r.zadd("big", {f"m{i}": i / 7 for i in range(500)})
    round_trip(r, "big", read)
    assert r.zrank("big", "m499") == 499


def test_ttl_absttl_and_past_ttl(r):
    r.set("k", "v")
    p = r.dump("k")
    r.delete("k")
    assert r.restore("k", 5000, p)
    assert 3000 <= r.pttl("k") <= 5000
    # Beyond 32 bits.
    assert r.restore("k", 2569591501, p, replace=True)
    assert 2569591501 - 3000 <= r.pttl("k") <= 2569591501
    at = int(time.time() * 1000) + 3000
    assert r.restore("k", at, p, replace=True, absttl=True)
    assert r.pexpiretime("k") == at
    # A time already past: OK, and the key is gone (REPLACE deleted it).
    assert r.restore("k", int(time.time() * 1000) - 3000, p, replace=True, absttl=True)
    assert r.exists("k") == 0
    assert r.restore("k", 1, p, absttl=True)
    assert r.exists("k") == 0
    # now + ttl overflowing 64 bits wraps into the past in Redis.
    assert r.restore("k", 2 ** 63 - 1, p)
    assert r.exists("k") == 0
    assert r.restore("k", 9 * 10 ** 18, p)
    assert r.pttl("k") > 8 * 10 ** 18
    r.delete("k")
    # TTL 0: no expiry; IDLETIME and FREQ are accepted.
    assert r.restore("k", 0, p, idletime=100)
    assert r.ttl("k") == -1
    assert r.restore("k", 0, p, replace=True, frequency=255)


def test_busykey_and_replace(r):
    r.set("k", "one")
    one = r.dump("k")
    r.set("k", "two")
    with pytest.raises(Exception, match="BUSYKEY"):
        r.restore("k", 0, one)
    assert raw(r.get("k")) == b"two"
    assert r.restore("k", 0, one, replace=True)
    assert raw(r.get("k")) == b"one"
    # Replacing with another type.
    r.sadd("s", "x")
    assert r.restore("s", 0, one, replace=True)
    assert raw(r.type("s")) == b"string"


def test_option_errors_in_redis_order(conn):
    p = sealed(b"\x00\x01v")
    conn.cmd("SET", "busy", "x")
    cases = [
        (("RESTORE", "k", "0", p, "FOO"), SYNTAX),
        (("RESTORE", "k", "0", p, "IDLETIME"), SYNTAX),
        (("RESTORE", "k", "0", p, "IDLETIME", "1", "FREQ", "1"), SYNTAX),
        (("RESTORE", "k", "0", p, "FREQ", "1", "IDLETIME", "1"), SYNTAX),
        (("RESTORE", "k", "0", p, "IDLETIME", "-1"), "ERR Invalid IDLETIME value, must be >= 0"),
        (("RESTORE", "k", "0", p, "IDLETIME", "x"), NOT_INT),
        (("RESTORE", "k", "0", p, "FREQ", "256"), "ERR Invalid FREQ value, must be >= 0 and <= 255"),
        (("RESTORE", "k", "0", p, "FREQ", "-1"), "ERR Invalid FREQ value, must be >= 0 and <= 255"),
        (("RESTORE", "k", "-1", p), "ERR Invalid TTL value, must be >= 0"),
        (("RESTORE", "k", "abc", p), NOT_INT),
        (("RESTORE", "k", "9223372036854775808", p), NOT_INT),
        # BUSYKEY comes before the TTL and the payload are looked at.
        (("RESTORE", "busy", "-1", b"junk"), BUSYKEY),
        (("RESTORE-ASKING", "busy", "0", p), BUSYKEY),
    ]
    for args, want in cases:
        assert conn.cmd(*args) == err_bytes(want), args
    assert conn.cmd("EXISTS", "k") == b":0\r\n"
    assert conn.cmd("RESTORE-ASKING", "k", "0", p) == b"+OK\r\n"
    assert conn.cmd("GET", "k") == b"$1\r\nv\r\n"


def test_bad_footer_and_bad_data(conn):
    good = sealed(b"\x00\x05hello")
    assert conn.cmd("RESTORE", "ok", "0", good) == b"+OK\r\n"
    bad_crc = good[:-1] + bytes([good[-1] ^ 1])
    for payload in [bad_crc, b"", b"junk", good[:9], sealed(b"\x00\x05hello", 12),
                    sealed(b"\x00\x05hello", 0xFFFF)]:
        assert conn.cmd("RESTORE", "k", "0", payload) == err_bytes(BAD_FOOTER), payload
    for body in [b"\xc8\x00",              # no such type
                 b"\x02\x00",              # an empty set
                 b"\x00\xc3\x02\x05\x20\x00",  # LZF referring before its start
                 b""]:
        assert conn.cmd("RESTORE", "k", "0", sealed(body)) == err_bytes(BAD_DATA), body
    assert conn.cmd("EXISTS", "k") == b":0\r\n"


def test_restores_older_and_packed_encodings(r):
    """Encodings DUMP does not write but Redis does: text scores, listpacks."""
    # RDB_TYPE_ZSET (scores as text), RDB version 9.
    assert r.restore("z", 0, sealed(b"\x03\x02\x01a\x031.5\x01b\xfe", 9))
    assert (r.zscore("z", "a"), r.zscore("z", "b"), r.zcard("z")) == (1.5, float("inf"), 2)
    # RDB_TYPE_HASH_LISTPACK, as redis 7.0 writes HSET h f v.
    lp = b"\x0d\x00\x00\x00\x02\x00\x81f\x02\x81v\x02\xff"
    assert r.restore("h", 0, sealed(b"\x10" + bytes([len(lp)]) + lp))
    assert {raw(k): raw(v) for k, v in r.hgetall("h").items()} == {b"f": b"v"}


# ---- interop with a real redis-server (deltagrid only) ----

@pytest.fixture
def real_redis(tmp_path):
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server not installed")
    port = free_port()
    log = open(tmp_path / "redis.log", "wb")
    proc = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1",
                             "--save", "", "--appendonly", "no"],
                            stdout=log, stderr=subprocess.STDOUT)

    class Addr:
        host = "127.0.0.1"

    Addr.port = port
    c = client(Addr)
    deadline = time.monotonic() + 10
    while True:
        try:
            c.ping()
            break
        except Exception:
            if time.monotonic() > deadline or proc.poll() is not None:
                raise
            time.sleep(0.05)
    yield c
    c.close()
    proc.terminate()
    proc.wait(timeout=10)
    log.close()


def fill(c):
    """Keys of every type, in every encoding Redis picks for them."""
    c.set("str", "hello")
    c.set("int", "12345")
    c.set("wideint", "123456789012345")
    c.set("lzf", "a" * 1000)  # LZF-compressed in the payload
    c.set("bin", bytes(range(256)) * 4)
    c.hset("h_lp", mapping={"f": "v", "n": "7"})  # listpack
    c.hset("h_lp_lzf", mapping={f"field{i}": "x" * 10 for i in range(100)})  # listpack, compressed blob
    c.hset("h_ht", mapping={f"f{i}": f"v{i}" for i in range(300)})  # hashtable
    c.hset("h_long", mapping={"f": "z" * 200})  # hashtable (long value)
    c.sadd("s_int", 1, 2, 3, -70000, 2 ** 40)  # intset
    c.sadd("s_small", "a", "b", "c")  # hashtable (listpack in 7.2)
    c.sadd("s_big", *[f"m{i}" for i in range(600)])
    c.sadd("s_bigint", *range(700))  # past the intset limit
    c.zadd("z_lp", {"a": 1.5, "b": 2, "c": -1e300, "d": float("inf")})  # listpack
    c.zadd("z_sl", {f"m{i}": i * 1.25 for i in range(300)})  # skiplist
    c.zadd("z_long", {"x" * 100: 1})  # skiplist (long member)
    c.rpush("l_small", "a", 1, "b", -2 ** 40)  # one packed node
    c.rpush("l_big", *[f"e{i}" * 20 for i in range(1000)])  # many nodes
    c.rpush("l_plain", "p" * 10000, "q")  # a plain node (large element)


def snapshot(c):
    out = {}
    for k in sorted(raw(k) for k in c.keys("*")):
        t = raw(c.type(k))
        if t == b"string":
            out[k] = c.get(k)
        elif t == b"hash":
            out[k] = c.hgetall(k)
        elif t == b"set":
            out[k] = set(c.smembers(k))
        elif t == b"zset":
            out[k] = c.zrange(k, 0, -1, withscores=True)
        elif t == b"list":
            out[k] = c.lrange(k, 0, -1)
        else:
            out[k] = t
    return out


@pytest.mark.deltagrid_only
def test_interop_redis_to_deltagrid_and_back(real_redis, server):
    dg = client(server)
    fill(real_redis)
    assert raw(real_redis.object("encoding", "h_lp")) == b"listpack"
    assert raw(real_redis.object("encoding", "z_sl")) == b"skiplist"
    assert raw(real_redis.object("encoding", "s_int")) == b"intset"
    want = snapshot(real_redis)
    assert b"\x00\xc3" == real_redis.dump("lzf")[:2]  # compressed, as the test means
    for k in want:
        assert dg.restore(k, 0, real_redis.dump(k)), k
    assert snapshot(dg) == want
    # And back: deltagrid's payloads restore in Redis under new names.
    dg.incrby("counter", 5)
    dg.incr("counter")
    for k in list(want) + [b"counter"]:
        assert real_redis.restore(b"back:" + k, 0, dg.dump(k)), k
    back = {k[len(b"back:"):]: v for k, v in snapshot(real_redis).items() if k.startswith(b"back:")}
    assert back == snapshot(dg)
    assert real_redis.get("back:counter") == b"6"
    # A TTL travels as RESTORE's argument.
    dg.set("ttl", "x", px=100000)
    assert real_redis.restore("ttl", dg.pttl("ttl"), dg.dump("ttl"))
    assert 90000 <= real_redis.pttl("ttl") <= 100000
    dg.close()


def test_function_payloads_move_between_redis_and_deltagrid(real_redis, server):
    dg = client(server)
    code = "#!lua name=movelib\nredis.register_function('moved', function() return 'here' end)"
    real_redis.function_load(code)
    assert dg.function_restore(real_redis.function_dump(), "REPLACE")
    assert raw(dg.fcall("moved", 0)) == b"here"
    dg.function_load(code.replace("movelib", "backlib").replace("moved", "back"))
    real_redis.function_flush()
    assert real_redis.function_restore(dg.function_dump())
    assert raw(real_redis.fcall("back", 0)) == b"here"
    assert raw(real_redis.fcall("moved", 0)) == b"here"
    dg.function_flush()
