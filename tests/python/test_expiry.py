"""Key expiry: lazy (on access) and active (background) expiry, TTL bookkeeping across
commands, and deltagrid's controllable clock (DEBUG CLOCK-ADVANCE, deltagrid only).

No fixed sleeps: every wait polls with a deadline. To know that "enough time has passed"
without touching the keys under test, tests use a *control* key with the same or a shorter
TTL and poll that one instead.

Each test gets a fresh server (DEBUG SET-ACTIVE-EXPIRE changes server-wide state).
"""
import time

import pytest

from helpers import make_client, wait_until


def gone(conn, key):
    return lambda: conn.cmd("EXISTS", key) == b":0\r\n"


def disable_active_expire(conn):
    assert conn.cmd("DEBUG", "SET-ACTIVE-EXPIRE", "0") == b"+OK\r\n"


# ----------------------------------------------------------------- lazy expiry

def test_px_100_key_disappears(conn):
    t0 = time.monotonic()
    assert conn.cmd("SET", "k", "v", "PX", "100") == b"+OK\r\n"
    val = conn.cmd("GET", "k")
    if time.monotonic() - t0 < 0.08:
        assert val == b"$1\r\nv\r\n"
        assert 0 < conn.call("PTTL", "k") <= 100
    wait_until(lambda: conn.cmd("GET", "k") == b"$-1\r\n", timeout=2.0, message="k to expire")
    elapsed = time.monotonic() - t0
    assert elapsed >= 0.09, "key expired before its 100 ms TTL"
    assert conn.cmd("TTL", "k") == b":-2\r\n"
    assert conn.cmd("PTTL", "k") == b":-2\r\n"
    assert conn.cmd("EXISTS", "k") == b":0\r\n"


def test_lazy_expiry_with_active_expiry_disabled(conn):
    disable_active_expire(conn)
    keys = [f"k{i}" for i in range(20)]
    for k in keys:
        conn.cmd("SET", k, "v", "PX", "100")
    conn.cmd("HSET", "h", "f", "v")
    conn.cmd("PEXPIRE", "h", "100")
    conn.cmd("SET", "control", "v", "PX", "100")  # set last: expires last
    conn.cmd("SET", "keep", "v")
    wait_until(gone(conn, "control"), timeout=2.0, message="control key to expire")
    # every expired key is invisible to every kind of read
    assert conn.cmd("GET", "k0") == b"$-1\r\n"
    assert conn.cmd("EXISTS", "k1", "k2") == b":0\r\n"
    assert conn.cmd("TTL", "k3") == b":-2\r\n"
    assert conn.cmd("PTTL", "k4") == b":-2\r\n"
    assert conn.cmd("TYPE", "k5") == b"+none\r\n"
    assert conn.cmd("MGET", "k6", "keep") == b"*2\r\n$-1\r\n$1\r\nv\r\n"
    assert conn.cmd("STRLEN", "k7") == b":0\r\n"
    assert conn.cmd("GETRANGE", "k8", "0", "-1") == b"$0\r\n\r\n"
    assert conn.cmd("HGETALL", "h") == b"*0\r\n"
    assert conn.cmd("HLEN", "h") == b":0\r\n"
    assert conn.cmd("EXPIRETIME", "k9") == b":-2\r\n"
    assert conn.call("KEYS", "*") == [b"keep"]
    cursor, found = b"", []
    while cursor != b"0":
        cursor, page = conn.call("SCAN", cursor or "0")
        found += page
    assert found == [b"keep"]
    for k in keys:
        assert conn.cmd("GET", k) == b"$-1\r\n"
    assert conn.cmd("DBSIZE") == b":1\r\n"


def test_dbsize_counts_expired_keys_until_accessed_when_active_expiry_is_off(conn):
    # With active expiry disabled nothing deletes an expired key except an access to it,
    # and DBSIZE does not look at TTLs (Redis counts the dictionary).
    disable_active_expire(conn)
    for i in range(10):
        conn.cmd("SET", f"k{i}", "v", "PX", "50")
    conn.cmd("SET", "control", "v", "PX", "60")
    wait_until(gone(conn, "control"), timeout=2.0, message="control key to expire")
    assert conn.cmd("DBSIZE") == b":10\r\n"
    for i in range(10):
        assert conn.cmd("GET", f"k{i}") == b"$-1\r\n"
    assert conn.cmd("DBSIZE") == b":0\r\n"


def test_write_to_expired_key_starts_fresh(conn):
    disable_active_expire(conn)
    conn.cmd("SET", "n", "41", "PX", "50")
    conn.cmd("SET", "s", "abc", "PX", "50")
    conn.cmd("HSET", "h", "old", "1")
    conn.cmd("PEXPIRE", "h", "50")
    conn.cmd("SET", "x", "v", "PX", "50")
    conn.cmd("SET", "y", "v", "PX", "50")
    conn.cmd("SET", "z", "v", "PX", "50")
    conn.cmd("SET", "control", "v", "PX", "60")
    wait_until(gone(conn, "control"), timeout=2.0, message="control key to expire")
    assert conn.cmd("INCR", "n") == b":1\r\n"
    assert conn.cmd("TTL", "n") == b":-1\r\n"
    assert conn.cmd("APPEND", "s", "de") == b":2\r\n"
    assert conn.cmd("HSET", "h", "new", "2") == b":1\r\n"
    assert conn.cmd("HGETALL", "h") == b"*2\r\n$3\r\nnew\r\n$1\r\n2\r\n"
    assert conn.cmd("TTL", "h") == b":-1\r\n"
    assert conn.cmd("SETNX", "x", "fresh") == b":1\r\n"
    assert conn.cmd("SET", "y", "v2", "NX") == b"+OK\r\n"
    assert conn.cmd("EXPIRE", "z", "100") == b":0\r\n"
    assert conn.cmd("RENAME", "z", "w") == b"-ERR no such key\r\n"
    assert conn.cmd("PERSIST", "z") == b":0\r\n"


def test_hash_key_expiry(conn):
    conn.cmd("HSET", "h", "a", "1", "b", "2")
    assert conn.cmd("PEXPIRE", "h", "100") == b":1\r\n"
    assert 0 < conn.call("PTTL", "h") <= 100
    wait_until(lambda: conn.cmd("HGETALL", "h") == b"*0\r\n", timeout=2.0, message="hash to expire")
    assert conn.cmd("HLEN", "h") == b":0\r\n"
    assert conn.cmd("HGET", "h", "a") == b"$-1\r\n"
    assert conn.cmd("EXISTS", "h") == b":0\r\n"
    assert conn.cmd("TYPE", "h") == b"+none\r\n"
    assert conn.cmd("TTL", "h") == b":-2\r\n"


def test_hash_modifications_keep_ttl(conn):
    conn.cmd("HSET", "h", "a", "1")
    conn.cmd("EXPIRE", "h", "100")
    conn.cmd("HSET", "h", "b", "2")
    conn.cmd("HDEL", "h", "a")
    conn.cmd("HINCRBY", "h", "n", "1")
    assert 99 <= conn.call("TTL", "h") <= 100


# ---------------------------------------------------------------- active expiry

def test_active_expiry_without_access(conn):
    for i in range(200):
        conn.cmd("SET", f"key:{i}", "v", "PX", str(100 + i))  # 100..299 ms
    conn.cmd("SET", "keep", "v")
    assert conn.call("DBSIZE") == 201
    # only DBSIZE (which never expires keys itself) is sent: the server must clean up alone
    wait_until(lambda: conn.cmd("DBSIZE") == b":1\r\n", timeout=5.0,
               message="active expiry to remove 200 keys")
    assert conn.cmd("GET", "keep") == b"$1\r\nv\r\n"


def test_active_expiry_of_hash_keys(conn):
    for i in range(50):
        conn.cmd("HSET", f"h{i}", "f", "v")
        conn.cmd("PEXPIRE", f"h{i}", "100")
    wait_until(lambda: conn.cmd("DBSIZE") == b":0\r\n", timeout=5.0,
               message="active expiry to remove 50 hashes")


def test_active_expiry_reenabled(conn):
    disable_active_expire(conn)
    for i in range(30):
        conn.cmd("SET", f"k{i}", "v", "PX", "50")
    conn.cmd("SET", "control", "v", "PX", "60")
    wait_until(gone(conn, "control"), timeout=2.0, message="control key to expire")
    assert conn.cmd("DBSIZE") == b":30\r\n"
    assert conn.cmd("DEBUG", "SET-ACTIVE-EXPIRE", "1") == b"+OK\r\n"
    wait_until(lambda: conn.cmd("DBSIZE") == b":0\r\n", timeout=5.0,
               message="active expiry to catch up after being re-enabled")


def test_keyspace_info_expires_count(conn):
    conn.cmd("SET", "a", "1", "EX", "1000")
    conn.cmd("SET", "b", "1", "PX", "1000000")
    conn.cmd("SET", "c", "1")
    info = conn.call("INFO", "keyspace").decode()
    line = [ln for ln in info.split("\r\n") if ln.startswith("db0:")][0]
    fields = dict(kv.split("=") for kv in line[4:].split(","))
    assert fields["keys"] == "3" and fields["expires"] == "2"
    assert int(fields["avg_ttl"]) >= 0


# ------------------------------------------------------- TTL preservation rules

def test_set_without_keepttl_clears_ttl_and_key_survives(conn):
    conn.cmd("SET", "k", "v", "PX", "100")
    conn.cmd("SET", "kt", "v", "PX", "100")
    conn.cmd("SET", "control", "v", "PX", "150")
    assert conn.cmd("SET", "k", "v2") == b"+OK\r\n"
    assert conn.cmd("TTL", "k") == b":-1\r\n"
    assert conn.cmd("SET", "kt", "v2", "KEEPTTL") == b"+OK\r\n"
    assert 0 < conn.call("PTTL", "kt") <= 100
    wait_until(gone(conn, "control"), timeout=2.0, message="control key to expire")
    assert conn.cmd("GET", "k") == b"$2\r\nv2\r\n"
    assert conn.cmd("GET", "kt") == b"$-1\r\n"


def test_getex_persist_removes_ttl_and_key_survives(conn):
    conn.cmd("SET", "k", "v", "PX", "100")
    conn.cmd("SET", "control", "v", "PX", "150")
    assert conn.cmd("GETEX", "k", "PERSIST") == b"$1\r\nv\r\n"
    assert conn.cmd("TTL", "k") == b":-1\r\n"
    wait_until(gone(conn, "control"), timeout=2.0, message="control key to expire")
    assert conn.cmd("GET", "k") == b"$1\r\nv\r\n"


def test_getex_sets_ttl_that_expires(conn):
    conn.cmd("SET", "k", "v")
    assert conn.cmd("GETEX", "k", "PX", "100") == b"$1\r\nv\r\n"
    assert 0 < conn.call("PTTL", "k") <= 100
    wait_until(gone(conn, "k"), timeout=2.0, message="k to expire")


def test_persist_and_overwrites_survive_expiry_time(conn):
    for k in ("p", "gs", "ms", "sx"):
        conn.cmd("SET", k, "v", "PX", "100")
    conn.cmd("SET", "control", "v", "PX", "150")
    assert conn.cmd("PERSIST", "p") == b":1\r\n"
    assert conn.cmd("GETSET", "gs", "v2") == b"$1\r\nv\r\n"
    assert conn.cmd("MSET", "ms", "v2") == b"+OK\r\n"
    assert conn.cmd("SETEX", "sx", "1000", "v2") == b"+OK\r\n"
    wait_until(gone(conn, "control"), timeout=2.0, message="control key to expire")
    assert conn.cmd("EXISTS", "p", "gs", "ms", "sx") == b":4\r\n"


def test_value_updates_keep_ttl_and_still_expire(conn):
    for k in ("i", "a", "r", "f"):
        conn.cmd("SET", k, "1", "PX", "150")
    assert conn.cmd("INCR", "i") == b":2\r\n"
    assert conn.cmd("APPEND", "a", "x") == b":2\r\n"
    assert conn.cmd("SETRANGE", "r", "0", "z") == b":1\r\n"
    assert conn.cmd("INCRBYFLOAT", "f", "0.5") == b"$3\r\n1.5\r\n"
    for k in ("i", "a", "r", "f"):
        assert 0 < conn.call("PTTL", k) <= 150, k
    wait_until(lambda: conn.cmd("EXISTS", "i", "a", "r", "f") == b":0\r\n", timeout=2.0,
               message="updated keys to expire")


def test_rename_carries_ttl_and_expires(conn):
    conn.cmd("SET", "src", "v", "PX", "100")
    assert conn.cmd("RENAME", "src", "dst") == b"+OK\r\n"
    assert 0 < conn.call("PTTL", "dst") <= 100
    wait_until(gone(conn, "dst"), timeout=2.0, message="renamed key to expire")


def test_pttl_decreases(conn):
    conn.cmd("SET", "k", "v", "PX", "5000")
    first = conn.call("PTTL", "k")
    assert 0 < first <= 5000
    wait_until(lambda: conn.call("PTTL", "k") < first - 20, timeout=2.0, message="PTTL to decrease")


# ------------------------------------------- controllable clock (deltagrid only)

def clock_advance(conn, ms):
    assert conn.cmd("DEBUG", "CLOCK-ADVANCE", str(ms)) == b"+OK\r\n"


@pytest.mark.deltagrid_only
def test_clock_advance_expires_immediately(conn):
    assert conn.cmd("SET", "k", "v", "EX", "100") == b"+OK\r\n"
    clock_advance(conn, 101000)
    assert conn.cmd("GET", "k") == b"$-1\r\n"
    assert conn.cmd("TTL", "k") == b":-2\r\n"
    assert conn.cmd("EXISTS", "k") == b":0\r\n"


@pytest.mark.deltagrid_only
def test_clock_advance_partial(conn):
    conn.cmd("SET", "k", "v", "EX", "100")
    clock_advance(conn, 50000)
    assert 49 <= conn.call("TTL", "k") <= 50
    assert 49000 <= conn.call("PTTL", "k") <= 50000
    assert conn.cmd("GET", "k") == b"$1\r\nv\r\n"
    clock_advance(conn, 49000)
    assert conn.cmd("GET", "k") == b"$1\r\nv\r\n"
    assert 0 < conn.call("PTTL", "k") <= 1000
    clock_advance(conn, 1001)
    assert conn.cmd("GET", "k") == b"$-1\r\n"


@pytest.mark.deltagrid_only
def test_clock_advance_hash_and_ttl_relative_to_new_clock(conn):
    conn.cmd("HSET", "h", "f", "v")
    conn.cmd("EXPIRE", "h", "10")
    conn.cmd("SET", "persistent", "v")
    clock_advance(conn, 10001)
    assert conn.cmd("HGETALL", "h") == b"*0\r\n"
    assert conn.cmd("TTL", "h") == b":-2\r\n"
    assert conn.cmd("GET", "persistent") == b"$1\r\nv\r\n"
    # new TTLs count from the advanced clock
    conn.cmd("SET", "k", "v", "EX", "10")
    assert conn.cmd("TTL", "k") == b":10\r\n"
    clock_advance(conn, 9000)
    assert conn.cmd("TTL", "k") == b":1\r\n"


@pytest.mark.deltagrid_only
def test_clock_advance_with_active_expiry(conn):
    for i in range(200):
        conn.cmd("SET", f"k{i}", "v", "EX", "100")
    conn.cmd("SET", "keep", "v")
    clock_advance(conn, 101000)
    wait_until(lambda: conn.cmd("DBSIZE") == b":1\r\n", timeout=5.0,
               message="active expiry after clock advance")


@pytest.mark.deltagrid_only
def test_clock_advance_lazy_only(conn):
    disable_active_expire(conn)
    conn.cmd("SET", "k", "v", "EX", "100")
    conn.cmd("SET", "getex", "v", "EX", "100")
    assert conn.cmd("GETEX", "getex", "PERSIST") == b"$1\r\nv\r\n"
    clock_advance(conn, 200000)
    assert conn.cmd("DBSIZE") == b":2\r\n"
    assert conn.cmd("GET", "k") == b"$-1\r\n"
    assert conn.cmd("GET", "getex") == b"$1\r\nv\r\n"
    assert conn.cmd("DBSIZE") == b":1\r\n"


# -------------------------------------------------------------- via redis-py

@pytest.mark.parametrize("protocol", [2, 3])
def test_redis_py_expiry(server, protocol):
    r = make_client(server, protocol, True)
    try:
        r.set("k", "v", px=100)
        r.hset("h", mapping={"a": "1"})
        r.pexpire("h", 100)
        wait_until(lambda: r.get("k") is None and r.hgetall("h") == {}, timeout=2.0,
                   message="keys to expire")
        assert r.ttl("k") == -2
        assert r.exists("k", "h") == 0
    finally:
        r.close()
