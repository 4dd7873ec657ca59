"""Compatibility script: redis-py's high-level API over every command family
(strings, hashes, keys, expiry, connection/server), with RESP2 and RESP3, bytes and
decoded replies, including 1000-command pipelines. Checks values *and* Python types,
since a reply of the wrong RESP type turns into the wrong Python type here.
"""
import time
import warnings

import pytest
import redis

from helpers import v, wait_until

# One server for the module, flushed before every test.
pytestmark = pytest.mark.shared_server


def S(r):
    """The Python type redis-py returns for bulk strings with this client."""
    return str if r.decode else bytes


def test_strings_family(r):
    s = S(r)
    assert r.set("greeting", "hello") is True
    got = r.get("greeting")
    assert type(got) is s and got == v(r, "hello")
    assert r.get("nokey") is None
    assert r.set("greeting", "x", nx=True) is None
    assert r.set("greeting", "hi", xx=True, get=True) == v(r, "hello")
    assert r.set("tmp", "v", ex=100, get=True) is None
    assert r.setnx("greeting", "y") is False
    assert r.setex("sx", 100, "v") is True
    assert r.psetex("psx", 100000, "v") is True
    assert r.getset("greeting", "hey") == v(r, "hi")
    assert r.getex("greeting", px=50000) == v(r, "hey")
    assert r.getex("greeting", persist=True) == v(r, "hey")
    assert r.getdel("greeting") == v(r, "hey")
    assert r.mset({"a": 1, "b": "two", "c": b"\x00\xff" if not r.decode else "3"}) is True
    mg = r.mget("a", "nokey", "b")
    assert mg == [v(r, "1"), None, v(r, "two")] and isinstance(mg, list)
    assert r.msetnx({"a": 5, "z": 6}) is False
    assert r.msetnx({"y": 5, "z": 6}) is True
    n = r.incr("counter")
    assert type(n) is int and n == 1
    assert r.incrby("counter", 10) == 11
    assert r.decr("counter") == 10
    assert r.decrby("counter", 20) == -10
    f = r.incrbyfloat("fl", 2.5)
    assert type(f) is float and f == 2.5
    assert r.incrbyfloat("fl", -0.5) == 2.0
    assert r.get("fl") == v(r, "2")
    assert r.append("ap", "abc") == 3
    assert r.strlen("ap") == 3
    assert r.setrange("ap", 5, "z") == 6
    assert r.getrange("ap", 0, 2) == v(r, "abc")
    assert r.getrange("ap", -1, -1) == v(r, "z")
    with pytest.raises(redis.ResponseError, match="^value is not an integer or out of range$"):
        r.incr("ap")
    with pytest.raises(redis.ResponseError, match="^value is not a valid float$"):
        r.incrbyfloat("ap", 1)
    with pytest.raises(redis.ResponseError, match="^invalid expire time in 'set' command$"):
        r.set("k", "v", ex=-1)


def test_hashes_family(r):
    s = S(r)
    assert r.hset("h", "f1", "v1") == 1
    assert r.hset("h", mapping={"f2": "v2", "f3": 3}) == 2
    assert r.hset("h", items=["f4", "v4"]) == 1
    assert r.hsetnx("h", "f1", "x") in (0, False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        assert r.hmset("h2", {"a": "1"}) is True
    got = r.hget("h", "f1")
    assert type(got) is s and got == v(r, "v1")
    assert r.hget("h", "nofield") is None
    assert r.hmget("h", ["f1", "nofield", "f3"]) == [v(r, "v1"), None, v(r, "3")]
    all_ = r.hgetall("h")
    assert type(all_) is dict
    assert all_ == v(r, {"f1": "v1", "f2": "v2", "f3": "3", "f4": "v4"})
    assert r.hgetall("nokey") == {}
    assert r.hlen("h") == 4
    assert sorted(r.hkeys("h")) == v(r, ["f1", "f2", "f3", "f4"])
    assert sorted(r.hvals("h")) == v(r, ["3", "v1", "v2", "v4"])
    assert r.hexists("h", "f1") is True
    assert r.hexists("h", "zz") is False
    assert r.hstrlen("h", "f1") == 2
    assert r.hincrby("h", "n", 3) == 3
    hf = r.hincrbyfloat("h", "x", 0.25)
    assert type(hf) is float and hf == 0.25
    assert r.hdel("h", "n", "x", "nofield") == 2
    cursor, page = r.hscan("h", 0, count=100)
    assert type(cursor) is int and type(page) is dict
    big = {f"field{i}": str(i) for i in range(400)}
    r.hset("big", mapping=big)
    assert dict(r.hscan_iter("big", count=25)) == v(r, big)
    assert dict(r.hscan_iter("big", match="field1*")) == v(r, {k: x for k, x in big.items()
                                                              if k.startswith("field1")})
    one = r.hrandfield("h")
    assert type(one) is s
    few = r.hrandfield("h", 2)
    assert type(few) is list and len(few) == 2 and len(set(few)) == 2
    rep = r.hrandfield("h", -10)
    assert len(rep) == 10
    wv = r.hrandfield("h", 2, withvalues=True)
    flat = [x for pair in wv for x in pair] if r.proto == 3 else wv
    assert len(flat) == 4
    for k, val in zip(flat[::2], flat[1::2]):
        assert all_[k] == val
    r.set("str", "x")
    with pytest.raises(redis.ResponseError, match="^WRONGTYPE Operation against a key holding"):
        r.hget("str", "f")


def test_keys_family(r):
    r.mset({"k1": "a", "k2": "b", "k3": "c", "other": "d"})
    r.hset("hk", "f", "v")
    assert r.exists("k1") == 1
    assert r.exists("k1", "k1", "nokey") == 2
    assert r.touch("k1", "k2", "nokey") == 2
    t = r.type("hk")
    assert type(t) is S(r) and t == v(r, "hash")
    assert r.type("k1") == v(r, "string")
    assert r.type("nokey") == v(r, "none")
    assert sorted(r.keys("k?")) == v(r, ["k1", "k2", "k3"])
    assert sorted(r.keys("[ko]*")) == v(r, ["k1", "k2", "k3", "other"])
    assert sorted(r.keys("k[1-2]")) == v(r, ["k1", "k2"])
    assert sorted(r.keys("*")) == v(r, ["hk", "k1", "k2", "k3", "other"])
    assert r.randomkey() in v(r, ["hk", "k1", "k2", "k3", "other"])
    cursor, keys = r.scan(0, count=1000)
    assert type(cursor) is int and cursor == 0
    assert sorted(keys) == v(r, ["hk", "k1", "k2", "k3", "other"])
    assert sorted(r.scan_iter(match="k*", count=1)) == v(r, ["k1", "k2", "k3"])
    assert list(r.scan_iter(_type="HASH")) == v(r, ["hk"])
    assert r.rename("k3", "k4") is True
    assert r.renamenx("k4", "k1") is False
    assert r.renamenx("k4", "k5") is True
    with pytest.raises(redis.ResponseError, match="^no such key$"):
        r.rename("nokey", "x")
    assert r.delete("k1", "nokey") == 1
    assert r.unlink("k2", "k5") == 2
    assert r.dbsize() == 2
    r.flushdb()
    assert r.randomkey() is None
    assert r.keys() == []


def test_expiry_family(r):
    r.set("e", "v")
    assert r.ttl("e") == -1 and r.pttl("e") == -1
    assert r.ttl("nokey") == -2 and r.pttl("nokey") == -2
    assert r.expire("e", 100) is True
    assert r.expire("nokey", 100) is False
    assert r.expire("e", 50, gt=True) is False
    assert r.expire("e", 50, lt=True) is True
    assert r.expire("e", 10, nx=True) is False
    assert r.expire("e", 60, xx=True) is True
    ttl = r.ttl("e")
    assert type(ttl) is int and 59 <= ttl <= 60
    assert r.pexpire("e", 70000) is True
    assert 69000 <= r.pttl("e") <= 70000
    assert r.expireat("e", 4102444800) is True
    et = r.expiretime("e")
    assert type(et) is int and et == 4102444800
    assert r.pexpireat("e", 4102444800123) is True
    assert r.pexpiretime("e") == 4102444800123
    assert r.persist("e") is True
    assert r.persist("e") is False
    assert r.ttl("e") == -1
    with pytest.raises(redis.ResponseError,
                       match="^NX and XX, GT or LT options at the same time are not compatible$"):
        r.execute_command("EXPIRE", "e", 10, "NX", "XX")
    r.set("short", "v", px=100)
    r.hset("hshort", "f", "v")
    r.pexpire("hshort", 100)
    wait_until(lambda: r.exists("short", "hshort") == 0, timeout=2.0, message="short keys to expire")
    assert r.get("short") is None and r.hgetall("hshort") == {}


def test_connection_family(r):
    s = S(r)
    assert r.ping() is True
    e = r.echo("hello")
    assert type(e) is s and e == v(r, "hello")
    cid = r.client_id()
    assert type(cid) is int and cid > 0
    assert r.client_setname("compat") is True
    # redis-py itself decodes CLIENT GETNAME under RESP2 (a client-side quirk)
    assert r.client_getname() == ("compat" if r.proto == 2 or r.decode else b"compat")
    info = r.client_info()
    assert type(info) is dict and info["name"] == "compat" and int(info["id"]) == cid
    assert info["resp"] == str(r.proto)
    clients = r.client_list()
    assert type(clients) is list and any(c["name"] == "compat" for c in clients)
    hello = r.execute_command("HELLO", r.proto)
    if r.proto == 3:
        assert type(hello) is dict
        assert hello[v(r, "proto")] == 3 and hello[v(r, "id")] == cid
    else:
        assert type(hello) is list and len(hello) == 14
        assert hello[5] == 2
    ts = r.time()
    assert type(ts) is tuple and all(type(x) is int for x in ts)
    assert abs(ts[0] - time.time()) < 5
    r.set("x", "1")
    assert r.dbsize() == 1
    inf = r.info()
    assert type(inf) is dict and "redis_version" in inf and "used_memory" in inf
    assert r.info("keyspace") == {"db0": {"keys": 1, "expires": 0, "avg_ttl": 0}}
    cfg = r.config_get("maxmemory")
    assert cfg == {"maxmemory": "0"}
    assert set(r.config_get("appendonly")) == {"appendonly"}
    entries = r.config_get("*max-*-entries*")
    assert type(entries) is dict and entries
    n = r.command_count()
    assert type(n) is int and n > 0
    table = r.command()
    assert type(table) is dict and table["set"]["arity"] == -3
    assert r.select(0) is True
    assert r.flushall() is True
    assert r.flushdb() is True
    assert r.dbsize() == 0
    with pytest.raises(redis.ResponseError, match="^unknown command 'NOPE', with args beginning with: 'x' $"):
        r.execute_command("NOPE", "x")


def test_pipeline_1000_mixed_commands(r):
    p = r.pipeline(transaction=False)
    expected = []
    for i in range(125):
        k = f"key:{i}"
        p.set(k, i); expected.append(True)
        p.get(k); expected.append(v(r, str(i)))
        p.incr(k); expected.append(i + 1)
        p.hset(f"hash:{i}", mapping={"a": i, "b": "x"}); expected.append(2)
        p.hget(f"hash:{i}", "a"); expected.append(v(r, str(i)))
        p.expire(k, 1000); expected.append(True)
        p.exists(k, f"hash:{i}", "nokey"); expected.append(2)
        p.get("nokey"); expected.append(None)
    assert len(p) == 1000
    results = p.execute()
    assert len(results) == 1000
    assert results == expected
    for got, exp in zip(results, expected):
        assert type(got) is type(exp)
    assert r.dbsize() == 250


def test_pipeline_1000_reads_of_many_types(r):
    r.set("s", "v")
    r.hset("h", mapping={"f": "1"})
    r.set("n", 10)
    p = r.pipeline(transaction=False)
    for _ in range(200):
        p.get("s")
        p.hgetall("h")
        p.ttl("s")
        p.type("h")
        p.incrbyfloat("n", 0.5)
    results = p.execute()
    assert len(results) == 1000
    for i in range(200):
        g, hg, ttl, typ, fl = results[i * 5:i * 5 + 5]
        assert g == v(r, "v")
        assert hg == v(r, {"f": "1"}) and type(hg) is dict
        assert ttl == -1
        assert typ == v(r, "hash")
        assert type(fl) is float and fl == 10 + 0.5 * (i + 1)


def test_pipeline_errors_in_the_middle(r):
    r.hset("h", "f", "v")
    p = r.pipeline(transaction=False)
    p.set("a", "1")
    p.incr("h")  # WRONGTYPE
    p.get("a")
    p.execute_command("NOSUCHCMD")
    p.incr("a")
    results = p.execute(raise_on_error=False)
    assert results[0] is True
    assert isinstance(results[1], redis.ResponseError) and str(results[1]).startswith("WRONGTYPE")
    assert results[2] == v(r, "1")
    assert isinstance(results[3], redis.ResponseError)
    assert str(results[3]) == "unknown command 'NOSUCHCMD', with args beginning with: "
    assert results[4] == 2
    p = r.pipeline(transaction=False)
    p.get("a")
    p.incr("h")
    with pytest.raises(redis.ResponseError):
        p.execute()


def test_large_values_and_binary(r):
    big = "x" * (512 * 1024)
    assert r.set("big", big) is True
    assert r.get("big") == v(r, big)
    assert r.strlen("big") == len(big)
    if not r.decode:
        blob = bytes(range(256)) * 100
        r.set("blob", blob)
        assert r.get("blob") == blob
        r.hset("hb", blob[:10], blob)
        assert r.hget("hb", blob[:10]) == blob
