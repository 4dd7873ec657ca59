"""Generic keyspace commands: DEL UNLINK EXISTS TOUCH TYPE EXPIRE* TTL PTTL EXPIRETIME PERSIST
RENAME RENAMENX COPY SCAN KEYS RANDOMKEY. Exact Redis 7.0 replies."""
import os
import time

import pytest
import redis

from helpers import NOT_INT, SYNTAX, arity, invalid_expire, v
from helpers_net import err_bytes, parse_one

# One server for the module, flushed before every test: these tests only touch keys.
pytestmark = pytest.mark.shared_server

NX_XX_GT_LT = "ERR NX and XX, GT or LT options at the same time are not compatible"
GT_LT = "ERR GT and LT options at the same time are not compatible"


def test_arity_errors(conn):
    cases = [
        ("DEL",), ("UNLINK",), ("EXISTS",), ("TOUCH",), ("TYPE",), ("TYPE", "a", "b"),
        ("EXPIRE", "a"), ("PEXPIRE", "a"), ("EXPIREAT", "a"), ("PEXPIREAT", "a"), ("TTL",),
        ("TTL", "a", "b"), ("PTTL",), ("EXPIRETIME",), ("PEXPIRETIME",), ("PERSIST",),
        ("RENAME", "a"), ("RENAME", "a", "b", "c"), ("RENAMENX", "a"), ("SCAN",), ("KEYS",),
        ("KEYS", "a", "b"), ("RANDOMKEY", "x"),
    ]
    for args in cases:
        assert conn.cmd(*args) == err_bytes(arity(args[0].lower())), args


# ---------------------------------------------------------- DEL UNLINK EXISTS

def test_del_counts_removed_keys(conn):
    conn.cmd("MSET", "a", "1", "b", "2", "c", "3")
    conn.cmd("HSET", "h", "f", "v")
    assert conn.cmd("DEL", "a", "a", "b", "nokey") == b":2\r\n"
    assert conn.cmd("DEL", "h") == b":1\r\n"
    assert conn.cmd("DEL", "nokey") == b":0\r\n"
    assert conn.cmd("UNLINK", "c", "c") == b":1\r\n"
    assert conn.cmd("UNLINK", "c") == b":0\r\n"
    assert conn.cmd("DBSIZE") == b":0\r\n"


def test_del_many_keys(conn):
    keys = [f"k{i}" for i in range(500)]
    conn.cmd("MSET", *[x for k in keys for x in (k, "v")])
    assert conn.cmd("DEL", *keys, "extra") == b":500\r\n"
    assert conn.cmd("DBSIZE") == b":0\r\n"


def test_exists_counts_duplicates(conn):
    conn.cmd("SET", "a", "1")
    conn.cmd("HSET", "h", "f", "v")
    assert conn.cmd("EXISTS", "a") == b":1\r\n"
    assert conn.cmd("EXISTS", "a", "a", "a", "nokey") == b":3\r\n"
    assert conn.cmd("EXISTS", "a", "h", "nokey") == b":2\r\n"
    assert conn.cmd("EXISTS", "nokey") == b":0\r\n"


def test_touch(conn):
    conn.cmd("SET", "a", "1")
    conn.cmd("HSET", "h", "f", "v")
    assert conn.cmd("TOUCH", "a", "a", "h", "nokey") == b":3\r\n"
    assert conn.cmd("TOUCH", "nokey") == b":0\r\n"
    assert conn.cmd("EXISTS", "nokey") == b":0\r\n"


# ----------------------------------------------------------------------- TYPE

def test_type_string_hash_none(conn):
    conn.cmd("SET", "s", "v")
    conn.cmd("SET", "n", "123")
    conn.cmd("INCR", "n")
    conn.cmd("HSET", "h", "f", "v")
    assert conn.cmd("TYPE", "s") == b"+string\r\n"
    assert conn.cmd("TYPE", "n") == b"+string\r\n"
    assert conn.cmd("TYPE", "h") == b"+hash\r\n"
    assert conn.cmd("TYPE", "nokey") == b"+none\r\n"
    conn.cmd("HELLO", "3")
    assert conn.cmd("TYPE", "s") == b"+string\r\n"


@pytest.mark.skipif(os.environ.get("DELTAGRID_TEST_TARGET", "deltagrid") != "redis",
                    reason="lists, sets, sorted sets and streams are not implemented in deltagrid yet")
def test_type_other_data_types(conn):
    # needs the list/set/zset/stream families to exist in the server
    conn.cmd("RPUSH", "l", "x")
    conn.cmd("SADD", "st", "m")
    conn.cmd("ZADD", "z", "1", "m")
    conn.cmd("XADD", "x", "*", "f", "v")
    assert conn.cmd("TYPE", "l") == b"+list\r\n"
    assert conn.cmd("TYPE", "st") == b"+set\r\n"
    assert conn.cmd("TYPE", "z") == b"+zset\r\n"
    assert conn.cmd("TYPE", "x") == b"+stream\r\n"


# ------------------------------------------------------------- TTL & friends

def test_ttl_pttl_no_key_no_ttl(conn):
    assert conn.cmd("TTL", "nokey") == b":-2\r\n"
    assert conn.cmd("PTTL", "nokey") == b":-2\r\n"
    assert conn.cmd("EXPIRETIME", "nokey") == b":-2\r\n"
    assert conn.cmd("PEXPIRETIME", "nokey") == b":-2\r\n"
    conn.cmd("SET", "a", "1")
    conn.cmd("HSET", "h", "f", "v")
    for k in ("a", "h"):
        assert conn.cmd("TTL", k) == b":-1\r\n"
        assert conn.cmd("PTTL", k) == b":-1\r\n"
        assert conn.cmd("EXPIRETIME", k) == b":-1\r\n"
        assert conn.cmd("PEXPIRETIME", k) == b":-1\r\n"


def test_ttl_rounds_to_nearest_second(conn):
    conn.cmd("SET", "a", "1")
    conn.cmd("PEXPIRE", "a", "1700")
    assert conn.cmd("TTL", "a") == b":2\r\n"
    conn.cmd("PEXPIRE", "a", "1300")
    assert conn.cmd("TTL", "a") == b":1\r\n"
    conn.cmd("PEXPIRE", "a", "2400")
    assert conn.cmd("TTL", "a") == b":2\r\n"


def test_expire_and_pexpire(conn):
    conn.cmd("SET", "a", "1")
    assert conn.cmd("EXPIRE", "a", "100") == b":1\r\n"
    assert conn.cmd("TTL", "a") == b":100\r\n"
    assert 99000 <= conn.call("PTTL", "a") <= 100000
    assert conn.cmd("PEXPIRE", "a", "50000") == b":1\r\n"
    assert 49000 <= conn.call("PTTL", "a") <= 50000
    assert conn.cmd("EXPIRE", "nokey", "100") == b":0\r\n"
    assert conn.cmd("PEXPIRE", "nokey", "100") == b":0\r\n"
    assert conn.cmd("EXISTS", "nokey") == b":0\r\n"


def test_expire_non_positive_deletes(conn):
    conn.cmd("MSET", "a", "1", "b", "2", "c", "3")
    assert conn.cmd("EXPIRE", "a", "0") == b":1\r\n"
    assert conn.cmd("EXPIRE", "b", "-5") == b":1\r\n"
    assert conn.cmd("PEXPIRE", "c", "-1") == b":1\r\n"
    assert conn.cmd("EXISTS", "a", "b", "c") == b":0\r\n"
    assert conn.cmd("DBSIZE") == b":0\r\n"


def test_expireat_pexpireat(conn):
    conn.cmd("SET", "a", "1")
    assert conn.cmd("EXPIREAT", "a", "4102444800") == b":1\r\n"
    assert conn.cmd("EXPIRETIME", "a") == b":4102444800\r\n"
    assert conn.cmd("PEXPIRETIME", "a") == b":4102444800000\r\n"
    assert conn.cmd("PEXPIREAT", "a", "4102444800123") == b":1\r\n"
    assert conn.cmd("PEXPIRETIME", "a") == b":4102444800123\r\n"
    assert conn.cmd("EXPIRETIME", "a") == b":4102444800\r\n"  # truncated, not rounded
    now = int(time.time())
    ttl = conn.call("TTL", "a")
    assert abs(ttl - (4102444800 - now)) <= 2
    assert conn.cmd("EXPIREAT", "nokey", "4102444800") == b":0\r\n"


def test_expireat_in_the_past_deletes(conn):
    conn.cmd("MSET", "a", "1", "b", "2")
    assert conn.cmd("EXPIREAT", "a", "1") == b":1\r\n"
    assert conn.cmd("PEXPIREAT", "b", "1") == b":1\r\n"
    assert conn.cmd("EXISTS", "a", "b") == b":0\r\n"


def test_expire_nx_xx(conn):
    conn.cmd("SET", "a", "1")
    assert conn.cmd("EXPIRE", "a", "100", "XX") == b":0\r\n"
    assert conn.cmd("TTL", "a") == b":-1\r\n"
    assert conn.cmd("EXPIRE", "a", "100", "NX") == b":1\r\n"
    assert conn.cmd("EXPIRE", "a", "200", "NX") == b":0\r\n"
    assert conn.cmd("TTL", "a") == b":100\r\n"
    assert conn.cmd("EXPIRE", "a", "200", "XX") == b":1\r\n"
    assert conn.cmd("TTL", "a") == b":200\r\n"
    assert conn.cmd("EXPIRE", "nokey", "100", "XX") == b":0\r\n"
    assert conn.cmd("EXPIRE", "nokey", "100", "NX") == b":0\r\n"


def test_expire_gt_lt(conn):
    conn.cmd("SET", "a", "1")
    # a key without TTL counts as infinite TTL: GT never applies, LT always does
    assert conn.cmd("EXPIRE", "a", "100", "GT") == b":0\r\n"
    assert conn.cmd("TTL", "a") == b":-1\r\n"
    assert conn.cmd("EXPIRE", "a", "100", "XX", "GT") == b":0\r\n"
    assert conn.cmd("EXPIRE", "a", "100", "LT") == b":1\r\n"
    assert conn.cmd("TTL", "a") == b":100\r\n"
    assert conn.cmd("EXPIRE", "a", "50", "GT") == b":0\r\n"
    assert conn.cmd("EXPIRE", "a", "500", "GT") == b":1\r\n"
    assert conn.cmd("EXPIRE", "a", "600", "LT") == b":0\r\n"
    assert conn.cmd("EXPIRE", "a", "60", "lt") == b":1\r\n"
    assert conn.cmd("TTL", "a") == b":60\r\n"
    assert conn.cmd("PEXPIRE", "a", "70000", "GT") == b":1\r\n"
    assert conn.cmd("PEXPIREAT", "a", "4102444800000", "GT") == b":1\r\n"
    assert conn.cmd("EXPIREAT", "a", "4102444700", "GT") == b":0\r\n"
    assert conn.cmd("EXPIREAT", "a", "4102444700", "XX", "LT") == b":1\r\n"
    assert conn.cmd("EXPIRETIME", "a") == b":4102444700\r\n"


def test_expire_option_errors(conn):
    conn.cmd("SET", "a", "1")
    for cmd in ("EXPIRE", "PEXPIRE", "EXPIREAT", "PEXPIREAT"):
        assert conn.cmd(cmd, "a", "100", "NX", "XX") == err_bytes(NX_XX_GT_LT), cmd
        assert conn.cmd(cmd, "a", "100", "NX", "GT") == err_bytes(NX_XX_GT_LT), cmd
        assert conn.cmd(cmd, "a", "100", "lt", "nx") == err_bytes(NX_XX_GT_LT), cmd
        assert conn.cmd(cmd, "a", "100", "GT", "LT") == err_bytes(GT_LT), cmd
        assert conn.cmd(cmd, "a", "100", "LT", "GT", "XX") == err_bytes(GT_LT), cmd
        assert conn.cmd(cmd, "a", "100", "FOO") == err_bytes("ERR Unsupported option FOO"), cmd
        assert conn.cmd(cmd, "a", "abc") == err_bytes(NOT_INT), cmd
        assert conn.cmd(cmd, "a", "1.5") == err_bytes(NOT_INT), cmd
    assert conn.cmd("EXPIRE", "a", "100", "bar") == err_bytes("ERR Unsupported option bar")
    assert conn.cmd("TTL", "a") == b":-1\r\n"


def test_expire_overflow_is_invalid_expire_time(conn):
    conn.cmd("SET", "a", "1")
    assert conn.cmd("EXPIRE", "a", "9223372036854775807") == invalid_expire("expire")
    assert conn.cmd("EXPIRE", "a", "9223372036854775") == invalid_expire("expire")
    assert conn.cmd("EXPIRE", "a", "-9223372036854775808") == invalid_expire("expire")
    assert conn.cmd("PEXPIRE", "a", "9223372036854775807") == invalid_expire("pexpire")
    assert conn.cmd("EXPIREAT", "a", "9223372036854775807") == invalid_expire("expireat")
    assert conn.cmd("TTL", "a") == b":-1\r\n"
    assert conn.cmd("EXPIRE", "a", "9223372036854") == b":1\r\n"


def test_persist(conn):
    conn.cmd("SET", "a", "1", "EX", "100")
    assert conn.cmd("PERSIST", "a") == b":1\r\n"
    assert conn.cmd("TTL", "a") == b":-1\r\n"
    assert conn.cmd("PERSIST", "a") == b":0\r\n"
    assert conn.cmd("PERSIST", "nokey") == b":0\r\n"
    conn.cmd("HSET", "h", "f", "v")
    conn.cmd("EXPIRE", "h", "100")
    assert conn.cmd("PERSIST", "h") == b":1\r\n"
    assert conn.cmd("TTL", "h") == b":-1\r\n"


# --------------------------------------------------------- RENAME RENAMENX

def test_rename(conn):
    conn.cmd("SET", "a", "1", "EX", "100")
    assert conn.cmd("RENAME", "a", "b") == b"+OK\r\n"
    assert conn.cmd("EXISTS", "a") == b":0\r\n"
    assert conn.cmd("GET", "b") == b"$1\r\n1\r\n"
    assert 99 <= conn.call("TTL", "b") <= 100  # TTL travels with the value


def test_rename_overwrites_destination_and_its_ttl(conn):
    conn.cmd("SET", "src", "1")
    conn.cmd("HSET", "dst", "f", "v")
    conn.cmd("EXPIRE", "dst", "100")
    assert conn.cmd("RENAME", "src", "dst") == b"+OK\r\n"
    assert conn.cmd("TYPE", "dst") == b"+string\r\n"
    assert conn.cmd("TTL", "dst") == b":-1\r\n"
    conn.cmd("HSET", "h", "f", "v")
    assert conn.cmd("RENAME", "h", "dst") == b"+OK\r\n"
    assert conn.cmd("TYPE", "dst") == b"+hash\r\n"


def test_rename_errors_and_same_name(conn):
    assert conn.cmd("RENAME", "nokey", "b") == err_bytes("ERR no such key")
    assert conn.cmd("RENAME", "nokey", "nokey") == err_bytes("ERR no such key")
    assert conn.cmd("RENAMENX", "nokey", "b") == err_bytes("ERR no such key")
    conn.cmd("SET", "a", "1")
    assert conn.cmd("RENAME", "a", "a") == b"+OK\r\n"
    assert conn.cmd("GET", "a") == b"$1\r\n1\r\n"
    assert conn.cmd("RENAMENX", "a", "a") == b":0\r\n"


def test_renamenx(conn):
    conn.cmd("MSET", "a", "1", "c", "2")
    assert conn.cmd("RENAMENX", "a", "c") == b":0\r\n"
    assert conn.cmd("GET", "a") == b"$1\r\n1\r\n"
    assert conn.cmd("RENAMENX", "a", "d") == b":1\r\n"
    assert conn.cmd("EXISTS", "a") == b":0\r\n"
    assert conn.cmd("GET", "d") == b"$1\r\n1\r\n"


# ----------------------------------------------------------------------- COPY

def test_copy_string_with_and_without_expiry(conn):
    conn.cmd("SET", "src", "foobar", "EX", "100")
    assert conn.cmd("COPY", "src", "dst") == b":1\r\n"
    assert conn.cmd("GET", "dst") == b"$6\r\nfoobar\r\n"
    assert 99 <= conn.call("TTL", "dst") <= 100  # the expiry is copied
    conn.cmd("SET", "plain", "x")
    assert conn.cmd("COPY", "plain", "dst2") == b":1\r\n"
    assert conn.cmd("TTL", "dst2") == b":-1\r\n"
    # The copy is independent of its source.
    conn.cmd("APPEND", "dst", "!")
    assert conn.cmd("GET", "src") == b"$6\r\nfoobar\r\n"
    assert conn.cmd("DBSIZE") == b":4\r\n"


def test_copy_hash(conn):
    conn.cmd("HSET", "h", "a", "1", "b", "2")
    assert conn.cmd("COPY", "h", "h2") == b":1\r\n"
    assert conn.call("HGETALL", "h2") == [b"a", b"1", b"b", b"2"]
    conn.cmd("HDEL", "h", "a")
    assert conn.cmd("HLEN", "h2") == b":2\r\n"


def test_copy_existing_destination_needs_replace(conn):
    conn.cmd("SET", "src", "new")
    conn.cmd("HSET", "dst", "f", "v")
    conn.cmd("EXPIRE", "dst", "100")
    assert conn.cmd("COPY", "src", "dst") == b":0\r\n"
    assert conn.cmd("TYPE", "dst") == b"+hash\r\n"
    assert conn.cmd("COPY", "src", "dst", "REPLACE") == b":1\r\n"
    assert conn.cmd("GET", "dst") == b"$3\r\nnew\r\n"
    assert conn.cmd("TTL", "dst") == b":-1\r\n"  # the source's (none), not the old one
    assert conn.cmd("COPY", "src", "dst", "replace", "DB", "0") == b":1\r\n"


def test_copy_missing_source(conn):
    assert conn.cmd("COPY", "nokey", "dst") == b":0\r\n"
    assert conn.cmd("EXISTS", "dst") == b":0\r\n"
    conn.cmd("SET", "dst", "1")
    assert conn.cmd("COPY", "nokey", "dst", "REPLACE") == b":0\r\n"
    assert conn.cmd("GET", "dst") == b"$1\r\n1\r\n"


def test_copy_errors(conn):
    conn.cmd("SET", "a", "1")
    assert conn.cmd("COPY", "a") == err_bytes(arity("copy"))
    assert conn.cmd("COPY", "a", "a") == err_bytes("ERR source and destination objects are the same")
    assert conn.cmd("COPY", "a", "a", "DB", "0") == err_bytes(
        "ERR source and destination objects are the same")
    assert conn.cmd("COPY", "a", "b", "NOPE") == err_bytes(SYNTAX)
    assert conn.cmd("COPY", "a", "b", "DB") == err_bytes(SYNTAX)
    assert conn.cmd("COPY", "a", "b", "DB", "notanumber") == err_bytes(NOT_INT)
    assert conn.cmd("COPY", "a", "b", "DB", "4294967296") == err_bytes(
        "ERR value is out of range, value must between -2147483648 and 2147483647")
    for db in ("16", "-1"):
        assert conn.cmd("COPY", "a", "b", "DB", db) == err_bytes("ERR DB index is out of range")
    # Options are checked before the keys are looked at.
    assert conn.cmd("COPY", "nokey", "nokey", "NOPE") == err_bytes(SYNTAX)
    assert conn.cmd("EXISTS", "b") == b":0\r\n"


@pytest.mark.deltagrid_only
def test_copy_to_another_db_is_out_of_range(conn):
    # Redis has 16 databases by default; deltagrid has one, as Redis with
    # `databases 1`.
    conn.cmd("SET", "a", "1")
    assert conn.cmd("COPY", "a", "b", "DB", "1") == err_bytes("ERR DB index is out of range")


# ----------------------------------------------------------------------- SCAN

def scan_all(conn, *opts, between_pages=None):
    cursor = b"0"
    seen = []
    calls = 0
    while True:
        raw = conn.cmd("SCAN", cursor, *opts)
        assert raw.startswith(b"*2\r\n$")  # cursor is a bulk string
        cursor, keys = parse_one(raw)
        assert cursor.isdigit() and isinstance(keys, list)
        seen.extend(keys)
        calls += 1
        if cursor == b"0":
            return seen, calls
        assert calls < 100000
        if between_pages:
            between_pages(calls)


def test_scan_empty_db(conn):
    assert conn.cmd("SCAN", "0") == b"*2\r\n$1\r\n0\r\n*0\r\n"


def test_scan_returns_every_key(conn):
    keys = {f"key:{i}".encode() for i in range(2000)}
    conn.cmd("MSET", *[x for k in sorted(keys) for x in (k, b"v")])
    seen, calls = scan_all(conn, "COUNT", "25")
    assert set(seen) == keys
    assert calls > 1
    seen, _ = scan_all(conn)
    assert set(seen) == keys
    seen, calls = scan_all(conn, "COUNT", "100000")
    assert set(seen) == keys


def test_scan_match(conn):
    conn.cmd("MSET", *[x for i in range(500) for x in (f"user:{i}", "v", f"item:{i}", "v")])
    seen, _ = scan_all(conn, "MATCH", "user:1*", "COUNT", "50")
    assert set(seen) == {f"user:{i}".encode() for i in range(500) if str(i).startswith("1")}
    seen, _ = scan_all(conn, "MATCH", "item:?")
    assert set(seen) == {f"item:{i}".encode() for i in range(10)}
    seen, _ = scan_all(conn, "MATCH", "nothing*", "COUNT", "7")
    assert seen == []


def test_scan_type_filter(conn):
    conn.cmd("MSET", *[x for i in range(200) for x in (f"s{i}", "v")])
    for i in range(100):
        conn.cmd("HSET", f"h{i}", "f", "v")
    seen, _ = scan_all(conn, "TYPE", "hash", "COUNT", "30")
    assert set(seen) == {f"h{i}".encode() for i in range(100)}
    seen, _ = scan_all(conn, "TYPE", "string")
    assert set(seen) == {f"s{i}".encode() for i in range(200)}
    seen, _ = scan_all(conn, "type", "STRING", "MATCH", "s1?")
    assert set(seen) == {f"s{i}".encode() for i in range(10, 20)}
    seen, _ = scan_all(conn, "TYPE", "list")
    assert seen == []


def test_scan_unknown_type_is_empty_not_error(conn):
    # Redis 7.0: an unknown type name simply matches nothing
    conn.cmd("SET", "a", "1")
    assert conn.cmd("SCAN", "0", "TYPE", "nosuchtype") == b"*2\r\n$1\r\n0\r\n*0\r\n"


def test_scan_errors(conn):
    assert conn.cmd("SCAN", "abc") == err_bytes("ERR invalid cursor")
    assert conn.cmd("SCAN", "18446744073709551616") == err_bytes("ERR invalid cursor")
    for opts in [("COUNT", "0"), ("COUNT", "-5"), ("MATCH",), ("TYPE",), ("COUNT",), ("FOO",),
                 ("FOO", "bar")]:
        assert conn.cmd("SCAN", "0", *opts) == err_bytes(SYNTAX), opts
    assert conn.cmd("SCAN", "0", "COUNT", "x") == err_bytes(NOT_INT)


def test_scan_with_concurrent_modification(conn):
    stable = {f"stable:{i}".encode() for i in range(1500)}
    victims = [f"victim:{i}".encode() for i in range(1500)]
    conn.cmd("MSET", *[x for k in sorted(stable) for x in (k, b"v")])
    conn.cmd("MSET", *[x for k in victims for x in (k, b"v")])
    added = []

    def mutate(page):
        # delete some keys present at the start and add new ones (which also grows the table)
        dels = victims[(page - 1) * 40:page * 40]
        if dels:
            conn.cmd("DEL", *dels)
        new = [f"new:{page}:{j}".encode() for j in range(60)]
        added.extend(new)
        conn.cmd("MSET", *[x for k in new for x in (k, b"v")])

    seen, calls = scan_all(conn, "COUNT", "50", between_pages=mutate)
    assert calls > 5
    seen = set(seen)
    missing = stable - seen
    assert not missing, f"{len(missing)} keys present throughout were never returned"
    # nothing that never existed comes back
    assert seen <= stable | set(victims) | set(added)


# ----------------------------------------------------------------------- KEYS

GLOB_KEYS = ["a", "b", "c", "d", "ab", "abc", "a*", "a?", "a[", "x\\y", "hello", "hallo", "hxllo",
             "[", "!"]


@pytest.mark.parametrize("pattern,expected", [
    ("*", GLOB_KEYS),
    ("?", ["a", "b", "c", "d", "[", "!"]),
    ("a?", ["ab", "a*", "a?", "a["]),
    ("a*", ["a", "ab", "abc", "a*", "a?", "a["]),
    ("[a-c]", ["a", "b", "c"]),
    ("[c-a]", ["a", "b", "c"]),  # reversed ranges are accepted
    ("[^a]", ["b", "c", "d", "[", "!"]),
    ("[!a]", ["a", "!"]),  # '!' is NOT negation in Redis globs, only '^' is
    ("h[ae]llo", ["hello", "hallo"]),
    ("h[^e]llo", ["hallo", "hxllo"]),
    ("h?llo", ["hello", "hallo", "hxllo"]),
    ("h*llo", ["hello", "hallo", "hxllo"]),
    ("a\\*", ["a*"]),
    ("a\\?", ["a?"]),
    ("a\\[", ["a["]),
    ("\\[", ["["]),
    ("x\\\\y", ["x\\y"]),
    ("\\a", ["a"]),
    ("*llo", ["hello", "hallo", "hxllo"]),
    ("nomatch", []),
    ("[", []),
    ("a[", []),
    ("abc", ["abc"]),
])
def test_keys_glob(conn, pattern, expected):
    conn.cmd("MSET", *[x for k in GLOB_KEYS for x in (k, "v")])
    got = conn.call("KEYS", pattern)
    assert isinstance(got, list)
    assert sorted(got) == sorted(k.encode() for k in expected)


def test_keys_exact_wire(conn):
    assert conn.cmd("KEYS", "*") == b"*0\r\n"
    conn.cmd("SET", "only", "1")
    assert conn.cmd("KEYS", "*") == b"*1\r\n$4\r\nonly\r\n"
    conn.cmd("HELLO", "3")
    assert conn.cmd("KEYS", "*") == b"*1\r\n$4\r\nonly\r\n"


def test_keys_binary_and_case_sensitivity(conn):
    conn.cmd("MSET", b"bin\x00key", "v", "Key", "v", "key", "v")
    assert sorted(conn.call("KEYS", "*key")) == [b"bin\x00key", b"key"]
    assert conn.call("KEYS", "K*") == [b"Key"]


# ------------------------------------------------------------------ RANDOMKEY

def test_randomkey(conn):
    assert conn.cmd("RANDOMKEY") == b"$-1\r\n"
    conn.cmd("MSET", "a", "1", "b", "2", "c", "3")
    seen = set()
    for _ in range(200):
        k = conn.call("RANDOMKEY")
        assert k in (b"a", b"b", b"c")
        seen.add(k)
    assert len(seen) > 1
    conn.cmd("FLUSHALL")
    conn.cmd("HELLO", "3")
    assert conn.cmd("RANDOMKEY") == b"_\r\n"


# -------------------------------------------------------------- via redis-py

def test_redis_py_key_commands(r):
    r.mset({"a": "1", "b": "2"})
    r.hset("h", "f", "v")
    assert r.exists("a", "a", "zz") == 2
    assert r.touch("a", "zz") == 1
    assert r.type("h") == v(r, "hash")
    assert r.type("zz") == v(r, "none")
    assert r.expire("a", 100) is True
    assert r.expire("zz", 100) is False
    assert r.expire("a", 200, nx=True) is False
    assert r.expire("a", 200, gt=True) is True
    assert r.ttl("a") == 200
    assert 199000 <= r.pttl("a") <= 200000
    assert r.ttl("b") == -1
    assert r.ttl("zz") == -2
    assert r.expireat("b", 4102444800) is True
    assert r.expiretime("b") == 4102444800
    assert r.pexpiretime("b") == 4102444800000
    assert r.persist("b") is True
    assert r.persist("b") is False
    assert r.rename("a", "a2") is True
    assert r.renamenx("a2", "b") is False
    with pytest.raises(redis.ResponseError, match="^no such key$"):
        r.rename("zz", "q")
    assert sorted(r.keys("*")) == v(r, ["a2", "b", "h"])
    assert r.randomkey() in v(r, ["a2", "b", "h"])
    assert sorted(r.scan_iter(count=2)) == v(r, ["a2", "b", "h"])
    assert list(r.scan_iter(_type="hash")) == v(r, ["h"])
    cursor, keys = r.scan(0, match="a*")
    assert isinstance(cursor, int)
    assert r.delete("a2", "b", "zz") == 2
    assert r.unlink("h") == 1
    assert r.randomkey() is None
    assert r.keys() == []
