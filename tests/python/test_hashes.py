"""Hash commands: exact Redis 7.0 replies, on the wire and through redis-py (RESP2 and RESP3)."""
import pytest
import redis

from helpers import NOT_FLOAT, NOT_INT, SYNTAX, WRONGTYPE, arity, v
from helpers_net import Map, err_bytes

# One server for the module, flushed before every test: these tests only touch keys.
pytestmark = pytest.mark.shared_server


def pairs(flat):
    """[k1, v1, k2, v2] -> {k1: v1, k2: v2}"""
    assert len(flat) % 2 == 0
    return dict(zip(flat[::2], flat[1::2]))


# --------------------------------------------------------------- arity / type

def test_arity_errors(conn):
    cases = [
        ("HSET", "h"), ("HSET", "h", "f"), ("HSET", "h", "f", "v", "g"), ("HSETNX", "h"),
        ("HSETNX", "h", "f"), ("HGET", "h"), ("HMGET", "h"), ("HMSET", "h", "a"),
        ("HMSET", "h", "a", "1", "b"), ("HGETALL",), ("HDEL", "h"), ("HEXISTS", "h"),
        ("HLEN",), ("HKEYS",), ("HVALS",), ("HINCRBY", "h", "f"), ("HINCRBYFLOAT", "h", "f"),
        ("HSTRLEN", "h"), ("HSCAN", "h"), ("HRANDFIELD",),
    ]
    for args in cases:
        assert conn.cmd(*args) == err_bytes(arity(args[0].lower())), args
    assert conn.cmd("EXISTS", "h") == b":0\r\n"


def test_wrongtype(conn):
    conn.cmd("SET", "s", "x")
    cases = [
        ("HSET", "s", "f", "v"), ("HSETNX", "s", "f", "v"), ("HGET", "s", "f"), ("HMGET", "s", "f"),
        ("HMSET", "s", "f", "v"), ("HGETALL", "s"), ("HDEL", "s", "f"), ("HEXISTS", "s", "f"),
        ("HLEN", "s"), ("HKEYS", "s"), ("HVALS", "s"), ("HINCRBY", "s", "f", "1"),
        ("HINCRBYFLOAT", "s", "f", "1"), ("HSTRLEN", "s", "f"), ("HSCAN", "s", "0"),
        ("HRANDFIELD", "s"), ("HRANDFIELD", "s", "2"), ("HRANDFIELD", "s", "-2", "WITHVALUES"),
    ]
    for args in cases:
        assert conn.cmd(*args) == err_bytes(WRONGTYPE), args
    assert conn.cmd("GET", "s") == b"$1\r\nx\r\n"


# ---------------------------------------------------------- HSET HGET HMGET

def test_hset_returns_number_of_new_fields(conn):
    assert conn.cmd("HSET", "h", "f", "v", "g", "w") == b":2\r\n"
    assert conn.cmd("HSET", "h", "f", "v2", "n", "x") == b":1\r\n"
    assert conn.cmd("HSET", "h", "f", "v3") == b":0\r\n"
    # the same field twice in one call: counted once, last value wins
    assert conn.cmd("HSET", "h", "a", "1", "a", "2") == b":1\r\n"
    assert conn.cmd("HGET", "h", "a") == b"$1\r\n2\r\n"
    assert conn.cmd("HGET", "h", "f") == b"$2\r\nv3\r\n"
    assert conn.cmd("HLEN", "h") == b":4\r\n"
    assert conn.cmd("TYPE", "h") == b"+hash\r\n"


def test_hget_missing(conn):
    assert conn.cmd("HGET", "nokey", "f") == b"$-1\r\n"
    conn.cmd("HSET", "h", "f", "v")
    assert conn.cmd("HGET", "h", "nofield") == b"$-1\r\n"
    conn.cmd("HELLO", "3")
    assert conn.cmd("HGET", "h", "nofield") == b"_\r\n"
    assert conn.cmd("HGET", "nokey", "f") == b"_\r\n"


def test_hset_binary_and_empty(conn):
    assert conn.cmd("HSET", "h", b"\x00f\r\n", b"v\x00\r\n", "", "") == b":2\r\n"
    assert conn.cmd("HGET", "h", b"\x00f\r\n") == b"$4\r\nv\x00\r\n\r\n"
    assert conn.cmd("HGET", "h", "") == b"$0\r\n\r\n"
    assert conn.cmd("HSTRLEN", "h", "") == b":0\r\n"
    assert conn.cmd("HEXISTS", "h", "") == b":1\r\n"


def test_hsetnx(conn):
    assert conn.cmd("HSETNX", "h", "f", "v") == b":1\r\n"
    assert conn.cmd("HSETNX", "h", "f", "z") == b":0\r\n"
    assert conn.cmd("HGET", "h", "f") == b"$1\r\nv\r\n"
    assert conn.cmd("HSETNX", "h", "g", "z") == b":1\r\n"
    assert conn.cmd("HLEN", "h") == b":2\r\n"


def test_hmget(conn):
    conn.cmd("HSET", "h", "f", "v", "g", "w")
    assert conn.cmd("HMGET", "h", "f", "nope", "g", "f") == (
        b"*4\r\n$1\r\nv\r\n$-1\r\n$1\r\nw\r\n$1\r\nv\r\n")
    assert conn.cmd("HMGET", "nokey", "a", "b") == b"*2\r\n$-1\r\n$-1\r\n"
    conn.cmd("HELLO", "3")
    assert conn.cmd("HMGET", "h", "nope", "f") == b"*2\r\n_\r\n$1\r\nv\r\n"


def test_hmset_replies_ok(conn):
    assert conn.cmd("HMSET", "h", "a", "1", "b", "2") == b"+OK\r\n"
    assert conn.cmd("HMSET", "h", "a", "3") == b"+OK\r\n"
    assert conn.cmd("HMGET", "h", "a", "b") == b"*2\r\n$1\r\n3\r\n$1\r\n2\r\n"


# ------------------------------------------------------------ HGETALL & co.

def test_hgetall_resp2_flat_array(conn):
    conn.cmd("HSET", "h", "a", "1", "b", "2")
    raw = conn.cmd("HGETALL", "h")
    assert raw.startswith(b"*4\r\n")
    assert pairs(conn.call("HGETALL", "h")) == {b"a": b"1", b"b": b"2"}
    assert conn.cmd("HGETALL", "nokey") == b"*0\r\n"


def test_hgetall_resp3_map(conn):
    conn.cmd("HELLO", "3")
    conn.cmd("HSET", "h", "a", "1", "b", "2")
    raw = conn.cmd("HGETALL", "h")
    assert raw.startswith(b"%2\r\n")
    val = conn.call("HGETALL", "h")
    assert isinstance(val, Map)
    assert dict(val) == {b"a": b"1", b"b": b"2"}
    assert conn.cmd("HGETALL", "nokey") == b"%0\r\n"


def test_single_field_exact_bytes(conn):
    conn.cmd("HSET", "h", "field", "value")
    assert conn.cmd("HGETALL", "h") == b"*2\r\n$5\r\nfield\r\n$5\r\nvalue\r\n"
    assert conn.cmd("HKEYS", "h") == b"*1\r\n$5\r\nfield\r\n"
    assert conn.cmd("HVALS", "h") == b"*1\r\n$5\r\nvalue\r\n"
    conn.cmd("HELLO", "3")
    assert conn.cmd("HGETALL", "h") == b"%1\r\n$5\r\nfield\r\n$5\r\nvalue\r\n"
    # HKEYS/HVALS stay arrays in RESP3
    assert conn.cmd("HKEYS", "h") == b"*1\r\n$5\r\nfield\r\n"
    assert conn.cmd("HVALS", "h") == b"*1\r\n$5\r\nvalue\r\n"


def test_hkeys_hvals_hgetall_agree(conn):
    fields = {f"f{i}".encode(): f"v{i}".encode() for i in range(300)}  # beyond listpack size
    args = [x for kv in fields.items() for x in kv]
    assert conn.call("HSET", "h", *args) == 300
    keys = conn.call("HKEYS", "h")
    vals = conn.call("HVALS", "h")
    flat = conn.call("HGETALL", "h")
    assert sorted(keys) == sorted(fields)
    assert dict(zip(keys, vals)) == fields
    assert pairs(flat) == fields
    assert flat[::2] == keys  # same iteration order in all three
    assert conn.cmd("HLEN", "h") == b":300\r\n"


def test_hkeys_hvals_hlen_missing(conn):
    assert conn.cmd("HKEYS", "nokey") == b"*0\r\n"
    assert conn.cmd("HVALS", "nokey") == b"*0\r\n"
    assert conn.cmd("HLEN", "nokey") == b":0\r\n"


def test_hdel_hexists(conn):
    conn.cmd("HSET", "h", "a", "1", "b", "2", "c", "3")
    assert conn.cmd("HEXISTS", "h", "a") == b":1\r\n"
    assert conn.cmd("HEXISTS", "h", "z") == b":0\r\n"
    assert conn.cmd("HEXISTS", "nokey", "a") == b":0\r\n"
    assert conn.cmd("HDEL", "h", "a", "b", "nope", "a") == b":2\r\n"
    assert conn.cmd("HEXISTS", "h", "a") == b":0\r\n"
    assert conn.cmd("HDEL", "nokey", "a") == b":0\r\n"
    # deleting the last field removes the key
    assert conn.cmd("HDEL", "h", "c") == b":1\r\n"
    assert conn.cmd("EXISTS", "h") == b":0\r\n"
    assert conn.cmd("TYPE", "h") == b"+none\r\n"


def test_hstrlen(conn):
    conn.cmd("HSET", "h", "f", "hello", "n", "-123")
    assert conn.cmd("HSTRLEN", "h", "f") == b":5\r\n"
    assert conn.cmd("HSTRLEN", "h", "n") == b":4\r\n"
    assert conn.cmd("HSTRLEN", "h", "nope") == b":0\r\n"
    assert conn.cmd("HSTRLEN", "nokey", "f") == b":0\r\n"


# ---------------------------------------------------------- HINCRBY(FLOAT)

def test_hincrby(conn):
    assert conn.cmd("HINCRBY", "h", "n", "5") == b":5\r\n"
    assert conn.cmd("HINCRBY", "h", "n", "-10") == b":-5\r\n"
    assert conn.cmd("HGET", "h", "n") == b"$2\r\n-5\r\n"
    assert conn.cmd("HINCRBY", "h", "m", "0") == b":0\r\n"
    assert conn.cmd("HEXISTS", "h", "m") == b":1\r\n"


def test_hincrby_errors(conn):
    conn.cmd("HSET", "h", "s", "abc", "sp", " 1", "f", "1.5", "big", "9223372036854775807",
             "small", "-9223372036854775808")
    for field in ["s", "sp", "f"]:
        assert conn.cmd("HINCRBY", "h", field, "1") == err_bytes("ERR hash value is not an integer"), field
    assert conn.cmd("HINCRBY", "h", "n", "abc") == err_bytes(NOT_INT)
    assert conn.cmd("HINCRBY", "h", "n", "1.5") == err_bytes(NOT_INT)
    assert conn.cmd("HINCRBY", "h", "big", "1") == err_bytes("ERR increment or decrement would overflow")
    assert conn.cmd("HINCRBY", "h", "small", "-1") == err_bytes("ERR increment or decrement would overflow")
    assert conn.cmd("HGET", "h", "big") == b"$19\r\n9223372036854775807\r\n"
    assert conn.cmd("HEXISTS", "h", "n") == b":0\r\n"


def test_hincrbyfloat(conn):
    assert conn.cmd("HINCRBYFLOAT", "h", "f", "1.5") == b"$3\r\n1.5\r\n"
    conn.cmd("HSET", "h", "g", "10.50", "e", "5.0e3", "i", "3")
    assert conn.cmd("HINCRBYFLOAT", "h", "g", "0.1") == b"$4\r\n10.6\r\n"
    assert conn.cmd("HINCRBYFLOAT", "h", "e", "2.0e2") == b"$4\r\n5200\r\n"
    assert conn.cmd("HINCRBYFLOAT", "h", "i", "1") == b"$1\r\n4\r\n"
    assert conn.cmd("HINCRBYFLOAT", "h", "z", "1e21") == b"$22\r\n1000000000000000000000\r\n"
    assert conn.cmd("HINCRBYFLOAT", "h", "y", "-1.5e-5") == b"$9\r\n-0.000015\r\n"
    assert conn.cmd("HGET", "h", "y") == b"$9\r\n-0.000015\r\n"
    conn.cmd("HELLO", "3")
    # still a bulk string in RESP3, not a double
    assert conn.cmd("HINCRBYFLOAT", "h", "f", "1") == b"$3\r\n2.5\r\n"


def test_hincrbyfloat_errors(conn):
    conn.cmd("HSET", "h", "s", "abc", "sp", " 1", "n", "1")
    assert conn.cmd("HINCRBYFLOAT", "h", "s", "1") == err_bytes("ERR hash value is not a float")
    assert conn.cmd("HINCRBYFLOAT", "h", "sp", "1") == err_bytes("ERR hash value is not a float")
    assert conn.cmd("HINCRBYFLOAT", "h", "n", "abc") == err_bytes(NOT_FLOAT)
    assert conn.cmd("HINCRBYFLOAT", "h", "n", "nan") == err_bytes(NOT_FLOAT)
    # note: differs from INCRBYFLOAT's "increment would produce NaN or Infinity"
    assert conn.cmd("HINCRBYFLOAT", "h", "n", "inf") == err_bytes("ERR value is NaN or Infinity")
    assert conn.cmd("HGET", "h", "n") == b"$1\r\n1\r\n"


# ------------------------------------------------------------------- HSCAN

def hscan_all(conn, key, *opts):
    """Iterate HSCAN to cursor 0; return (all pairs seen as list, number of calls)."""
    cursor = b"0"
    seen = []
    calls = 0
    while True:
        reply = conn.call("HSCAN", key, cursor, *opts)
        calls += 1
        assert isinstance(reply, list) and len(reply) == 2
        cursor, items = reply
        assert isinstance(cursor, bytes) and cursor.isdigit()
        assert isinstance(items, list) and len(items) % 2 == 0
        seen.extend(zip(items[::2], items[1::2]))
        if cursor == b"0":
            return seen, calls
        assert calls < 10000


def test_hscan_small_hash(conn):
    conn.cmd("HSET", "h", "a", "1", "b", "2")
    reply = conn.call("HSCAN", "h", "0")
    assert reply[0] == b"0"
    assert pairs(reply[1]) == {b"a": b"1", b"b": b"2"}
    assert conn.cmd("HSCAN", "nokey", "0") == b"*2\r\n$1\r\n0\r\n*0\r\n"


@pytest.mark.parametrize("n", [11, 100, 128, 129, 200])
def test_hscan_returns_every_field_whatever_count(conn, n):
    """A hash with more fields than COUNT: every field comes back over the
    iteration (an 11-field hash scanned with the default COUNT of 10 once
    came back empty)."""
    fields = {f"f{i}".encode(): str(i).encode() for i in range(n)}
    conn.call("HSET", "h", *[x for kv in fields.items() for x in kv])
    for opts in [(), ("COUNT", "10"), ("COUNT", "1")]:
        seen, _ = hscan_all(conn, "h", *opts)
        assert dict(seen) == fields, (n, opts)


def test_hscan_full_iteration_large_hash(conn):
    fields = {f"field:{i}".encode(): str(i).encode() for i in range(1000)}
    conn.call("HSET", "h", *[x for kv in fields.items() for x in kv])
    seen, calls = hscan_all(conn, "h", "COUNT", "50")
    assert dict(seen) == fields
    # Redis answers a 1000-field (hashtable-encoded) hash page by page, about COUNT at a time;
    # this also makes sure cursor continuation is really exercised
    assert calls > 1
    seen, _ = hscan_all(conn, "h")
    assert dict(seen) == fields


def test_hscan_match(conn):
    fields = {f"f{i}".encode(): b"x" for i in range(300)}
    conn.call("HSET", "h", *[x for kv in fields.items() for x in kv])
    seen, _ = hscan_all(conn, "h", "MATCH", "f1*", "COUNT", "20")
    expected = {k for k in fields if k.startswith(b"f1")}
    assert {k for k, _ in seen} == expected
    seen, _ = hscan_all(conn, "h", "MATCH", "f?", "COUNT", "1000")
    assert {k for k, _ in seen} == {f"f{i}".encode() for i in range(10)}
    seen, _ = hscan_all(conn, "h", "MATCH", "nomatch*")
    assert seen == []


def test_hscan_match_small_hash(conn):
    conn.cmd("HSET", "h", "one", "1", "two", "2", "three", "3")
    reply = conn.call("HSCAN", "h", "0", "MATCH", "t*", "COUNT", "10")
    assert reply[0] == b"0"
    assert pairs(reply[1]) == {b"two": b"2", b"three": b"3"}


def test_hscan_resp3_shape_is_still_flat_array(conn):
    conn.cmd("HELLO", "3")
    conn.cmd("HSET", "h", "a", "1")
    assert conn.cmd("HSCAN", "h", "0") == b"*2\r\n$1\r\n0\r\n*2\r\n$1\r\na\r\n$1\r\n1\r\n"


def test_hscan_errors(conn):
    conn.cmd("HSET", "h", "a", "1")
    assert conn.cmd("HSCAN", "h", "abc") == err_bytes("ERR invalid cursor")
    assert conn.cmd("HSCAN", "h", "18446744073709551616") == err_bytes("ERR invalid cursor")
    for opts in [("MATCH",), ("COUNT",), ("COUNT", "0"), ("COUNT", "-1"), ("FOO", "1"),
                 ("COUNT", "10", "MATCH")]:
        assert conn.cmd("HSCAN", "h", "0", *opts) == err_bytes(SYNTAX), opts
    assert conn.cmd("HSCAN", "h", "0", "COUNT", "abc") == err_bytes(NOT_INT)


# -------------------------------------------------------------- HRANDFIELD

def test_hrandfield_no_count(conn):
    assert conn.cmd("HRANDFIELD", "nokey") == b"$-1\r\n"
    conn.cmd("HSET", "h", "a", "1", "b", "2", "c", "3")
    for _ in range(20):
        assert conn.call("HRANDFIELD", "h") in (b"a", b"b", b"c")
    conn.cmd("HELLO", "3")
    assert conn.cmd("HRANDFIELD", "nokey") == b"_\r\n"


def test_hrandfield_positive_count_distinct(conn):
    fields = {f"f{i}".encode(): str(i).encode() for i in range(10)}
    conn.call("HSET", "h", *[x for kv in fields.items() for x in kv])
    for count in (1, 5, 9, 10):
        got = conn.call("HRANDFIELD", "h", count)
        assert isinstance(got, list), got
        assert len(got) == count and len(set(got)) == count
        assert set(got) <= set(fields)
    # larger than the hash: the whole hash, each field once
    for count in (11, 1000, 9223372036854775807):
        got = conn.call("HRANDFIELD", "h", count)
        assert isinstance(got, list), (count, got)
        assert sorted(got) == sorted(fields)


def test_hrandfield_negative_count_allows_repeats(conn):
    conn.cmd("HSET", "h", "a", "1")
    assert conn.cmd("HRANDFIELD", "h", "-3") == b"*3\r\n$1\r\na\r\n$1\r\na\r\n$1\r\na\r\n"
    conn.cmd("HSET", "h", "b", "2", "c", "3")
    got = conn.call("HRANDFIELD", "h", "-100")
    assert len(got) == 100
    assert set(got) <= {b"a", b"b", b"c"}
    assert len(set(got)) > 1


def test_hrandfield_withvalues_resp2(conn):
    fields = {b"a": b"1", b"b": b"2", b"c": b"3"}
    conn.call("HSET", "h", *[x for kv in fields.items() for x in kv])
    got = conn.call("HRANDFIELD", "h", "2", "WITHVALUES")
    assert len(got) == 4  # flat: field, value, field, value
    for k, val in zip(got[::2], got[1::2]):
        assert fields[k] == val
    got = conn.call("HRANDFIELD", "h", "-7", "withvalues")
    assert len(got) == 14
    for k, val in zip(got[::2], got[1::2]):
        assert fields[k] == val
    conn.cmd("HSET", "one", "f", "v")
    assert conn.cmd("HRANDFIELD", "one", "1", "WITHVALUES") == b"*2\r\n$1\r\nf\r\n$1\r\nv\r\n"
    assert conn.cmd("HRANDFIELD", "one", "-2", "WITHVALUES") == (
        b"*4\r\n$1\r\nf\r\n$1\r\nv\r\n$1\r\nf\r\n$1\r\nv\r\n")


def test_hrandfield_withvalues_resp3_nested_pairs(conn):
    conn.cmd("HELLO", "3")
    conn.cmd("HSET", "one", "f", "v")
    assert conn.cmd("HRANDFIELD", "one", "1", "WITHVALUES") == b"*1\r\n*2\r\n$1\r\nf\r\n$1\r\nv\r\n"
    assert conn.cmd("HRANDFIELD", "one", "-2", "WITHVALUES") == (
        b"*2\r\n*2\r\n$1\r\nf\r\n$1\r\nv\r\n*2\r\n$1\r\nf\r\n$1\r\nv\r\n")
    # without WITHVALUES it stays a flat array
    assert conn.cmd("HRANDFIELD", "one", "1") == b"*1\r\n$1\r\nf\r\n"


def test_hrandfield_zero_and_missing(conn):
    conn.cmd("HSET", "h", "a", "1")
    assert conn.cmd("HRANDFIELD", "h", "0") == b"*0\r\n"
    assert conn.cmd("HRANDFIELD", "h", "0", "WITHVALUES") == b"*0\r\n"
    for args in [("5",), ("-5",), ("5", "WITHVALUES"), ("0",)]:
        assert conn.cmd("HRANDFIELD", "nokey", *args) == b"*0\r\n", args


def test_hrandfield_errors(conn):
    conn.cmd("HSET", "h", "a", "1")
    assert conn.cmd("HRANDFIELD", "h", "abc") == err_bytes(NOT_INT)
    assert conn.cmd("HRANDFIELD", "h", "abc", "WITHVALUESX") == err_bytes(NOT_INT)
    assert conn.cmd("HRANDFIELD", "h", "9223372036854775808") == err_bytes(NOT_INT)
    assert conn.cmd("HRANDFIELD", "h", "1", "WITHVALUESX") == err_bytes(SYNTAX)
    assert conn.cmd("HRANDFIELD", "h", "1", "WITHVALUES", "x") == err_bytes(SYNTAX)
    assert conn.cmd("HRANDFIELD", "h", "-9223372036854775808", "WITHVALUES") == err_bytes(
        "ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807")
    # WITHVALUES additionally caps |count| at LONG_MAX/2 (checked before the key lookup)
    assert conn.cmd("HRANDFIELD", "h", "-4611686018427387904", "WITHVALUES") == err_bytes(
        "ERR value is out of range")
    assert conn.cmd("HRANDFIELD", "h", "4611686018427387904", "WITHVALUES") == err_bytes(
        "ERR value is out of range")
    assert conn.cmd("HRANDFIELD", "nokey", "-4611686018427387904", "WITHVALUES") == err_bytes(
        "ERR value is out of range")


# -------------------------------------------------------------- via redis-py

def test_redis_py_hash_roundtrip(r):
    assert r.hset("h", mapping={"a": "1", "b": "2"}) == 2
    assert r.hset("h", "c", "3") == 1
    assert r.hget("h", "a") == v(r, "1")
    assert r.hget("h", "zz") is None
    assert r.hgetall("h") == v(r, {"a": "1", "b": "2", "c": "3"})
    assert r.hgetall("nokey") == {}
    assert r.hmget("h", ["a", "zz"]) == [v(r, "1"), None]
    assert sorted(r.hkeys("h")) == v(r, ["a", "b", "c"])
    assert sorted(r.hvals("h")) == v(r, ["1", "2", "3"])
    assert r.hlen("h") == 3
    assert r.hexists("h", "a") is True
    assert r.hexists("h", "zz") is False
    assert r.hsetnx("h", "a", "x") in (0, False)
    assert r.hdel("h", "a", "zz") == 1
    assert r.hstrlen("h", "b") == 1
    assert r.hincrby("h", "n", 5) == 5
    f = r.hincrbyfloat("h", "f", 1.25)
    assert isinstance(f, float) and f == 1.25


def test_redis_py_hscan_iter(r):
    fields = {f"k{i}": str(i) for i in range(500)}
    r.hset("h", mapping=fields)
    got = dict(r.hscan_iter("h", count=37))
    assert got == v(r, fields)
    got = dict(r.hscan_iter("h", match="k4*"))
    assert got == v(r, {k: val for k, val in fields.items() if k.startswith("k4")})
    cursor, page = r.hscan("nokey", 0)
    assert cursor == 0 and page == {}


def test_redis_py_hrandfield_shapes(r):
    r.hset("h", mapping={"a": "1", "b": "2"})
    one = r.hrandfield("h")
    assert one in v(r, ["a", "b"])
    many = r.hrandfield("h", 2)
    assert sorted(many) == v(r, ["a", "b"])
    wv = r.hrandfield("h", 2, withvalues=True)
    if r.proto == 3:
        assert sorted(map(tuple, wv)) == v(r, [("a", "1"), ("b", "2")])
    else:
        assert sorted(zip(wv[::2], wv[1::2])) == v(r, [("a", "1"), ("b", "2")])
    assert r.hrandfield("nokey") is None
    assert r.hrandfield("nokey", 3) == []


def test_redis_py_hash_errors(r):
    r.hset("h", "s", "abc")
    with pytest.raises(redis.ResponseError, match="^hash value is not an integer$"):
        r.hincrby("h", "s", 1)
    with pytest.raises(redis.ResponseError, match="^hash value is not a float$"):
        r.hincrbyfloat("h", "s", 1.0)
    r.set("str", "x")
    with pytest.raises(redis.ResponseError, match="^WRONGTYPE"):
        r.hgetall("str")
