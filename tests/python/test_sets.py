"""Set commands: Redis 7's replies on the wire and through redis-py (RESP2 and RESP3).
Also run against redis-server (DELTAGRID_TEST_TARGET=redis)."""
import pytest
import redis

from helpers import SYNTAX, WRONGTYPE, arity
from helpers_net import err_bytes

pytestmark = pytest.mark.shared_server


def members(r, key):
    return {m if isinstance(m, bytes) else m.encode() for m in r.smembers(key)}


def b(*xs):
    return {x.encode() for x in xs}


def test_arity_and_wrongtype(conn):
    for args in [("SADD", "s"), ("SREM", "s"), ("SMEMBERS",), ("SISMEMBER", "s"),
                 ("SMISMEMBER", "s"), ("SCARD",), ("SPOP",), ("SRANDMEMBER",),
                 ("SMOVE", "a", "b"), ("SINTER",), ("SINTERSTORE", "d"), ("SUNION",),
                 ("SUNIONSTORE", "d"), ("SDIFF",), ("SDIFFSTORE", "d"), ("SSCAN", "s"),
                 ("SINTERCARD", "1")]:
        assert conn.cmd(*args) == err_bytes(arity(args[0].lower())), args
    conn.cmd("SET", "str", "x")
    for args in [("SADD", "str", "a"), ("SREM", "str", "a"), ("SMEMBERS", "str"),
                 ("SISMEMBER", "str", "a"), ("SCARD", "str"), ("SPOP", "str"),
                 ("SRANDMEMBER", "str"), ("SINTER", "str"), ("SUNION", "str"),
                 ("SDIFF", "str"), ("SSCAN", "str", "0"), ("SMOVE", "str", "d", "a"),
                 ("SINTERCARD", "1", "str")]:
        assert conn.cmd(*args) == err_bytes(WRONGTYPE), args
    conn.cmd("SADD", "src", "a")
    assert conn.cmd("SMOVE", "src", "str", "a") == err_bytes(WRONGTYPE)
    assert conn.cmd("SISMEMBER", "src", "a") == b":1\r\n"


def test_sadd_srem_scard_counts_new_and_removed(r):
    assert r.sadd("s", "a", "b", "a") == 2
    assert r.sadd("s", "b", "c") == 1
    assert r.scard("s") == 3
    assert r.type("s") in (b"set", "set")
    assert r.srem("s", "a", "x", "a") == 1
    assert members(r, "s") == b("b", "c")
    assert r.srem("s", "b", "c") == 2
    assert r.exists("s") == 0
    assert r.srem("nokey", "a") == 0
    assert r.scard("nokey") == 0


def test_sismember_smismember(r):
    r.sadd("s", "a", "b")
    assert r.sismember("s", "a") in (1, True)
    assert r.sismember("s", "z") in (0, False)
    assert [bool(x) for x in r.smismember("s", ["a", "z", "b"])] == [True, False, True]
    assert [bool(x) for x in r.smismember("nokey", ["a"])] == [False]


def test_smembers_is_a_resp3_set(conn):
    conn.cmd("HELLO", "3")
    conn.cmd("SADD", "s", "x")
    assert conn.cmd("SMEMBERS", "s") == b"~1\r\n$1\r\nx\r\n"
    assert conn.cmd("SMEMBERS", "nokey") == b"~0\r\n"
    assert conn.cmd("SINTER", "s", "s") == b"~1\r\n$1\r\nx\r\n"


def test_spop_and_srandmember(r):
    r.sadd("s", *[str(i) for i in range(10)])
    popped = r.spop("s")
    assert popped is not None and r.scard("s") == 9
    assert len(r.spop("s", 4)) == 4 and r.scard("s") == 5
    assert len(r.spop("s", 100)) == 5 and r.exists("s") == 0
    assert r.spop("nokey") is None
    assert r.spop("nokey", 3) in ([], set())
    r.sadd("t", "a", "b", "c")
    assert len(r.srandmember("t", 2)) == 2 and r.scard("t") == 3
    assert len(set(r.srandmember("t", 10))) == 3
    assert len(r.srandmember("t", -7)) == 7
    assert r.srandmember("nokey") is None
    assert r.srandmember("nokey", 5) == []


def test_spop_count_errors(conn):
    conn.cmd("SADD", "s", "a")
    assert conn.cmd("SPOP", "s", "-1") == err_bytes("ERR value is out of range, must be positive")
    assert conn.cmd("SPOP", "s", "x") == err_bytes("ERR value is out of range, must be positive")
    assert conn.cmd("SRANDMEMBER", "s", "-9223372036854775808") == err_bytes(
        "ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807")
    assert conn.cmd("SPOP", "s", "1", "2") == err_bytes(SYNTAX)


def test_smove(r):
    r.sadd("a", "x", "y")
    r.sadd("b", "y")
    assert r.smove("a", "b", "x") in (1, True)
    assert members(r, "a") == b("y") and members(r, "b") == b("x", "y")
    assert r.smove("a", "b", "y") in (1, True)
    assert r.exists("a") == 0
    assert r.smove("a", "b", "y") in (0, False)
    assert r.smove("b", "b", "x") in (1, True)
    assert r.smove("b", "new", "x") in (1, True) and members(r, "new") == b("x")


def test_algebra_and_store(r):
    r.sadd("a", "1", "2", "3", "x")
    r.sadd("b", "2", "3", "4")
    r.sadd("c", "3", "9")
    assert members_of(r.sinter("a", "b", "c")) == b("3")
    assert members_of(r.sinter("a", "nokey")) == set()
    assert members_of(r.sunion("a", "b", "nokey")) == b("1", "2", "3", "x", "4")
    assert members_of(r.sdiff("a", "b", "c")) == b("1", "x")
    assert r.sinterstore("d", "a", "b") == 2 and members(r, "d") == b("2", "3")
    assert r.sunionstore("d", "c", "nokey") == 2 and members(r, "d") == b("3", "9")
    assert r.sdiffstore("d", "a", "a") == 0 and r.exists("d") == 0
    r.set("d", "string")
    assert r.sinterstore("d", "a", "c") == 1 and r.type("d") in (b"set", "set")
    assert r.sintercard(3, ["a", "b", "c"]) == 1
    assert r.sintercard(2, ["a", "b"], limit=1) == 1
    assert r.sintercard(2, ["a", "b"], limit=0) == 2


def members_of(xs):
    return {m if isinstance(m, bytes) else m.encode() for m in xs}


def test_sintercard_errors(conn):
    assert conn.cmd("SINTERCARD", "0", "a") == err_bytes("ERR numkeys should be greater than 0")
    assert conn.cmd("SINTERCARD", "3", "a", "b") == err_bytes(
        "ERR Number of keys can't be greater than number of args")
    assert conn.cmd("SINTERCARD", "1", "a", "LIMIT", "-1") == err_bytes("ERR LIMIT can't be negative")
    assert conn.cmd("SINTERCARD", "1", "a", "FOO", "1") == err_bytes(SYNTAX)


def test_sscan_returns_every_member_once(r):
    r.sadd("small", *[str(i) for i in range(20)])
    cursor, page = r.sscan("small", 0, count=5)
    assert cursor == 0 and len(page) == 20
    many = [f"member:{i}" for i in range(1000)]
    r.sadd("big", *many)
    seen, cursor = [], None
    while cursor != 0:
        cursor, page = r.sscan("big", cursor or 0, count=50)
        seen.extend(page)
    assert members_of(seen) == {m.encode() for m in many}
    assert len(seen) == 1000
    cursor, page = r.sscan("big", 0, match="member:99*", count=10000)
    assert members_of(page) == {f"member:{i}".encode() for i in [99] + list(range(990, 1000))}


def test_encodings_as_redis_72(r):
    r.sadd("ints", "1", "2", "-3")
    r.sadd("words", "a", "b")
    r.sadd("big", *[f"m{i}" for i in range(200)])
    enc = {k: r.object("encoding", k) for k in ("ints", "words", "big")}
    enc = {k: v.decode() if isinstance(v, bytes) else v for k, v in enc.items()}
    assert enc["ints"] == "intset" and enc["big"] == "hashtable"
    # 7.0 keeps small non-integer sets in a hashtable, 7.2 in a listpack
    assert enc["words"] in ("listpack", "hashtable")


def test_keyspace_commands_work_on_sets(r):
    r.sadd("s", "a", "b")
    assert r.copy("s", "t") in (1, True)
    assert members(r, "t") == b("a", "b")
    r.rename("t", "u")
    assert members(r, "u") == b("a", "b")
    r.expire("u", 100)
    assert 0 < r.ttl("u") <= 100
    assert r.sadd("u", "c") == 1 and r.ttl("u") > 0
    assert [k for k in r.scan_iter(_type="set")] and all(
        r.type(k) in (b"set", "set") for k in r.scan_iter(_type="set"))
    assert r.delete("s", "u") == 2
