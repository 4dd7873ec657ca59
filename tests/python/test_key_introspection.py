"""Introspection of keys and replies: OBJECT ENCODING|REFCOUNT|HELP, MEMORY
USAGE|MALLOC-STATS|HELP, and the DEBUG subcommands Redis's own test suite uses
(PROTOCOL, OBJECT, PAUSE-CRON, HELP). Exact Redis 7.0 replies; where
deltagrid's answer legitimately differs (MEMORY USAGE numbers, subcommands it
leaves out) the test is deltagrid_only or asserts a range.
"""
import re
import time

import pytest

from helpers import NOT_INT, SYNTAX, arity, wait_until
from helpers_net import bulk, err_bytes


def help_lines(conn, cmd):
    """The lines of `<cmd> HELP`, checked for Redis's header and footer."""
    lines = conn.call(cmd, "HELP")
    assert lines[0] == f"{cmd} <subcommand> [<arg> [value] [opt] ...]. Subcommands are:"
    assert lines[-2:] == ["HELP", "    Prints this help."]
    return lines[1:-2]


# --------------------------------------------------------------------- OBJECT

@pytest.mark.shared_server
def test_object_encoding_of_strings(conn):
    cases = {
        "123": "int",
        "-9223372036854775808": "int",
        "9223372036854775808": "embstr",  # over i64
        "007": "embstr",                  # not the canonical form
        "-0": "embstr",
        "+1": "embstr",
        "foo": "embstr",
        "x" * 44: "embstr",
        "x" * 45: "raw",
        "1" * 100: "raw",
    }
    for value, encoding in cases.items():
        conn.cmd("SET", "k", value)
        assert conn.cmd("OBJECT", "ENCODING", "k") == bulk(encoding), value
    assert conn.cmd("OBJECT", "ENCODING", "missing") == b"$-1\r\n"
    conn.cmd("HELLO", "3")
    assert conn.cmd("object", "encoding", "missing") == b"_\r\n"


def test_object_encoding_of_hashes_follows_the_listpack_limits(conn):
    # 128 is Redis 7.2's default (7.0's was 512).
    assert conn.cmd("CONFIG", "SET", "hash-max-listpack-entries", "128") == b"+OK\r\n"
    conn.cmd("HSET", "small", "f", "v")
    assert conn.cmd("OBJECT", "ENCODING", "small") == bulk("listpack")
    conn.cmd("HSET", "long", "f", "v" * 65)   # over hash-max-listpack-value (64)
    assert conn.cmd("OBJECT", "ENCODING", "long") == bulk("hashtable")
    conn.cmd("HSET", "many", *[x for i in range(129) for x in (f"f{i}", "v")])  # over 128
    assert conn.cmd("OBJECT", "ENCODING", "many") == bulk("hashtable")


def test_a_hash_grown_past_the_listpack_limits_keeps_every_field(conn):
    assert conn.cmd("CONFIG", "SET", "hash-max-listpack-entries", "128") == b"+OK\r\n"
    for i in range(129):
        conn.call("HSET", "grown", f"f{i}", f"v{i}")
        if i == 127:
            assert conn.cmd("OBJECT", "ENCODING", "grown") == bulk("listpack")
    assert conn.cmd("OBJECT", "ENCODING", "grown") == bulk("hashtable")
    fields = conn.call("HGETALL", "grown")
    assert dict(zip(fields[::2], fields[1::2])) == {
        f"f{i}".encode(): f"v{i}".encode() for i in range(129)}
    # Shrunk, it stays a table (as in Redis).
    conn.call("HDEL", "grown", *[f"f{i}" for i in range(100)])
    assert conn.cmd("OBJECT", "ENCODING", "grown") == bulk("hashtable")
    # A value past hash-max-listpack-value turns a packed hash into a table.
    conn.call("HSET", "wide", "a", "1", "b", "2")
    conn.call("HSET", "wide", "b", "x" * 65)
    assert conn.cmd("OBJECT", "ENCODING", "wide") == bulk("hashtable")
    assert conn.call("HMGET", "wide", "a", "b") == [b"1", b"x" * 65]


def test_object_encoding_after_config_set(conn):
    assert conn.cmd("CONFIG", "SET", "hash-max-listpack-entries", "0") == b"+OK\r\n"
    conn.cmd("HSET", "h", "f", "v")
    assert conn.cmd("OBJECT", "ENCODING", "h") == bulk("hashtable")


@pytest.mark.deltagrid_only  # Redis 7.0 has no set listpack (7.2 does)
def test_a_set_is_packed_up_to_the_set_listpack_limits(conn):
    assert conn.cmd("CONFIG", "SET", "set-max-listpack-entries", "3") == b"+OK\r\n"
    assert conn.call("CONFIG", "GET", "set-max-listpack-entries") == [
        b"set-max-listpack-entries", b"3"]
    conn.call("SADD", "s", "a", "b", "c")
    assert conn.cmd("OBJECT", "ENCODING", "s") == bulk("listpack")
    conn.call("SADD", "s", "d")
    assert conn.cmd("OBJECT", "ENCODING", "s") == bulk("hashtable")
    assert sorted(conn.call("SMEMBERS", "s")) == [b"a", b"b", b"c", b"d"]
    assert conn.cmd("CONFIG", "SET", "set-max-listpack-entries", "128") == b"+OK\r\n"
    assert conn.cmd("CONFIG", "SET", "set-max-listpack-value", "4") == b"+OK\r\n"
    conn.call("SADD", "w", "abcd")
    assert conn.cmd("OBJECT", "ENCODING", "w") == bulk("listpack")
    conn.call("SADD", "w", "abcde")
    assert conn.cmd("OBJECT", "ENCODING", "w") == bulk("hashtable")
    assert conn.cmd("CONFIG", "SET", "set-max-listpack-value", "64") == b"+OK\r\n"
    # Integers only: an intset, whatever the form.
    conn.call("SADD", "i", "1", "2")
    assert conn.cmd("OBJECT", "ENCODING", "i") == bulk("intset")


@pytest.mark.shared_server
def test_object_refcount_of_shared_integers(conn):
    shared = b":2147483647\r\n"
    conn.cmd("SET", "foo", "-1")
    conn.cmd("INCR", "foo")
    assert conn.cmd("OBJECT", "REFCOUNT", "foo") == shared   # 0
    conn.cmd("SET", "foo", "9998")
    conn.cmd("INCR", "foo")
    assert conn.cmd("OBJECT", "REFCOUNT", "foo") == shared   # 9999
    conn.cmd("INCR", "foo")
    assert conn.cmd("OBJECT", "REFCOUNT", "foo") == b":1\r\n"  # 10000
    for value in ("-1", "bar", "0123"):
        conn.cmd("SET", "foo", value)
        assert conn.cmd("OBJECT", "REFCOUNT", "foo") == b":1\r\n", value
    conn.cmd("HSET", "h", "f", "1")
    assert conn.cmd("OBJECT", "REFCOUNT", "h") == b":1\r\n"
    assert conn.cmd("OBJECT", "REFCOUNT", "missing") == b"$-1\r\n"


@pytest.mark.shared_server
def test_object_errors_and_help(conn):
    assert conn.cmd("OBJECT") == err_bytes(arity("object"))
    assert conn.cmd("OBJECT", "ENCODING") == err_bytes(arity("object|encoding"))
    assert conn.cmd("OBJECT", "REFCOUNT", "a", "b") == err_bytes(arity("object|refcount"))
    assert conn.cmd("OBJECT", "NOPE", "k") == err_bytes(
        "ERR unknown subcommand 'NOPE'. Try OBJECT HELP.")
    lines = help_lines(conn, "OBJECT")
    assert "ENCODING <key>" in lines and "REFCOUNT <key>" in lines


@pytest.mark.shared_server
def test_object_idletime_and_freq_by_the_policy(conn):
    conn.cmd("SET", "k", "v")
    # No LFU policy (the default, noeviction): idle time, no counter.
    assert conn.call("OBJECT", "IDLETIME", "k") == 0
    assert str(conn.call("OBJECT", "FREQ", "k")).startswith("ERR An LFU maxmemory policy is not selected")
    lines = help_lines(conn, "OBJECT")
    assert "FREQ <key>" in lines and "IDLETIME <key>" in lines and "REFCOUNT <key>" in lines


# --------------------------------------------------------------------- MEMORY

@pytest.mark.shared_server
def test_memory_usage_counts_the_key_and_its_value(conn):
    assert conn.cmd("MEMORY", "USAGE", "missing") == b"$-1\r\n"
    # One hash tag: deltagrid counts each key's share of its partition's
    # map, the same for keys of one partition.
    conn.cmd("SET", "{usage}small", "x" * 10)
    conn.cmd("SET", "{usage}large", "x" * 1010)
    small = conn.call("MEMORY", "USAGE", "{usage}small")
    large = conn.call("MEMORY", "USAGE", "{usage}large")
    assert isinstance(small, int) and small > 10
    assert large - small >= 950  # 1,000 bytes more, in the allocator's rounding
    conn.cmd("HSET", "h", *[x for i in range(50) for x in (f"field:{i}", "v" * 20)])
    assert conn.call("MEMORY", "USAGE", "h") > 50 * 20
    # SAMPLES is accepted (0: all).
    assert conn.call("MEMORY", "usage", "h", "SAMPLES", "0") > 50 * 20
    assert conn.call("MEMORY", "USAGE", "h", "samples", "5", "SAMPLES", "1") > 50 * 20
    conn.cmd("HELLO", "3")
    assert conn.cmd("MEMORY", "USAGE", "missing") == b"_\r\n"


@pytest.mark.shared_server
def test_memory_usage_errors(conn):
    conn.cmd("SET", "k", "v")
    assert conn.cmd("MEMORY") == err_bytes(arity("memory"))
    assert conn.cmd("MEMORY", "USAGE") == err_bytes(arity("memory|usage"))
    assert conn.cmd("MEMORY", "USAGE", "k", "SAMPLES") == err_bytes(SYNTAX)
    assert conn.cmd("MEMORY", "USAGE", "k", "NOPE", "1") == err_bytes(SYNTAX)
    assert conn.cmd("MEMORY", "USAGE", "k", "SAMPLES", "x") == err_bytes(NOT_INT)
    assert conn.cmd("MEMORY", "USAGE", "k", "SAMPLES", "-1") == err_bytes(SYNTAX)
    # The options are checked before the key is looked up.
    assert conn.cmd("MEMORY", "USAGE", "missing", "SAMPLES", "-1") == err_bytes(SYNTAX)
    assert conn.cmd("MEMORY", "NOPE") == err_bytes(
        "ERR unknown subcommand 'NOPE'. Try MEMORY HELP.")
    lines = help_lines(conn, "MEMORY")
    assert "USAGE <key> [SAMPLES <count>]" in lines and "MALLOC-STATS" in lines
    assert isinstance(conn.call("MEMORY", "MALLOC-STATS"), bytes)
    assert conn.cmd("MEMORY", "PURGE") == b"+OK\r\n"


@pytest.mark.shared_server
def test_memory_stats_and_doctor(conn):
    conn.cmd("FLUSHALL")
    conn.cmd("MSET", *[x for i in range(1_000) for x in (f"k{i}", "v" * 100)])
    flat = conn.call("MEMORY", "STATS")
    stats = dict(zip(flat[0::2], flat[1::2]))
    assert stats[b"keys.count"] == 1_000
    assert stats[b"total.allocated"] > stats[b"startup.allocated"] > 0
    assert stats[b"peak.allocated"] >= stats[b"total.allocated"]
    assert 0 < stats[b"dataset.bytes"] < stats[b"total.allocated"]
    assert 100 <= stats[b"keys.bytes-per-key"] < 10_000
    assert float(stats[b"fragmentation"]) > 0
    conn.cmd("HELLO", "3")
    assert conn.call("MEMORY", "STATS")["keys.count".encode()] == 1_000
    doctor = conn.call("MEMORY", "DOCTOR")
    assert isinstance(doctor, bytes) and b"Sam" in doctor, doctor
    assert conn.cmd("MEMORY", "STATS", "x").startswith(b"-ERR")
    conn.cmd("HELLO", "2")


@pytest.mark.deltagrid_only
@pytest.mark.shared_server
def test_memory_usage_estimates_deltagrid_structures(conn):
    # One hash tag: one partition, whose map every key shares alike (its
    # share is the map's bytes over its keys), so the keys differ only by
    # what each owns. Heap blocks count as glibc's chunks (request + 8,
    # rounded up to 16, at least 32).
    long_key = "{mu}" + "k" * 19
    for key, value, *ttl in [("{mu}k", "v"), ("{mu}kk", "v"), (long_key, "v"),
                             ("{mu}big", "x" * 10000), ("{mu}ttl", "v", "EX", "100")]:
        conn.cmd("SET", key, value, *ttl)
    one = conn.call("MEMORY", "USAGE", "{mu}k")
    assert 64 <= one <= 1024                      # its map share (a value up to 30 bytes is inline)
    assert conn.call("MEMORY", "USAGE", "{mu}kk") == one      # up to 22 bytes a key is inline
    assert conn.call("MEMORY", "USAGE", long_key) == one + 32  # a longer one: a 32-byte chunk
    assert conn.call("MEMORY", "USAGE", "{mu}big") == one + 10016  # a long value: its chunk
    assert conn.call("MEMORY", "USAGE", "{mu}ttl") > one + 2   # its expiry index element
    # A small hash is packed: per field two length bytes, one version for all.
    conn.cmd("HSET", "h", *[x for i in range(100) for x in (f"f{i:03}", "v" * 20)])
    payload = 100 * (4 + 20)
    assert payload + 100 * 2 <= conn.call("MEMORY", "USAGE", "h") <= payload + 100 * 2 + 512
    # Past hash-max-listpack-entries (128) it is a table: a slot per field.
    conn.cmd("HSET", "big_h", *[x for i in range(200) for x in (f"f{i:03}", "v" * 20)])
    payload = 200 * (4 + 20)
    assert payload + 200 * 50 <= conn.call("MEMORY", "USAGE", "big_h") <= payload + 200 * 400
    # Nothing to sample: the hash keeps its size.
    assert conn.call("MEMORY", "USAGE", "h", "SAMPLES", "1") == conn.call("MEMORY", "USAGE", "h")


@pytest.mark.deltagrid_only
@pytest.mark.shared_server
def test_memory_malloc_stats_as_redis_without_jemalloc(conn):
    # The system allocator, as Redis built without jemalloc answers.
    assert conn.cmd("MEMORY", "MALLOC-STATS") == bulk(
        "Stats not supported for the current allocator")


# ------------------------------------------------------------ DEBUG PROTOCOL

PROTOCOL = {
    # type: (RESP2 bytes, RESP3 bytes)
    "string": (b"$11\r\nHello World\r\n",) * 2,
    "integer": (b":12345\r\n",) * 2,
    "double": (b"$5\r\n3.141\r\n", b",3.141\r\n"),
    "bignum": (b"$37\r\n1234567999999999999999999999999999999\r\n",
               b"(1234567999999999999999999999999999999\r\n"),
    "null": (b"$-1\r\n", b"_\r\n"),
    "array": (b"*3\r\n:0\r\n:1\r\n:2\r\n",) * 2,
    "set": (b"*3\r\n:0\r\n:1\r\n:2\r\n", b"~3\r\n:0\r\n:1\r\n:2\r\n"),
    "map": (b"*6\r\n:0\r\n:0\r\n:1\r\n:1\r\n:2\r\n:0\r\n",
            b"%3\r\n:0\r\n#f\r\n:1\r\n#t\r\n:2\r\n#f\r\n"),
    "true": (b":1\r\n", b"#t\r\n"),
    "false": (b":0\r\n", b"#f\r\n"),
    "verbatim": (b"$25\r\nThis is a verbatim\nstring\r\n",
                 b"=29\r\ntxt:This is a verbatim\nstring\r\n"),
}


@pytest.mark.shared_server
@pytest.mark.parametrize("proto", [2, 3])
def test_debug_protocol_types(conn, proto):
    conn.cmd("HELLO", str(proto))
    for name, replies in PROTOCOL.items():
        assert conn.cmd("DEBUG", "PROTOCOL", name) == replies[proto - 2], name
    assert conn.cmd("debug", "protocol", "BIGNUM") == PROTOCOL["bignum"][proto - 2]


@pytest.mark.shared_server
def test_debug_protocol_attribute_precedes_its_reply(conn):
    reply = b"$39\r\nSome real reply following the attribute\r\n"
    assert conn.cmd("DEBUG", "PROTOCOL", "attrib") == reply   # RESP2: no attribute
    conn.cmd("HELLO", "3")
    assert conn.cmd("DEBUG", "PROTOCOL", "attrib") == (
        b"|1\r\n$14\r\nkey-popularity\r\n*2\r\n$7\r\nkey:123\r\n:90\r\n" + reply)


@pytest.mark.shared_server
def test_debug_protocol_push(conn):
    assert conn.cmd("DEBUG", "PROTOCOL", "push") == err_bytes(
        "ERR RESP2 is not supported by this command")
    conn.cmd("HELLO", "3")
    assert conn.cmd("DEBUG", "PROTOCOL", "push") == b">2\r\n$16\r\nserver-cpu-usage\r\n:42\r\n"
    assert conn.read_raw() == b"$40\r\nSome real reply following the push reply\r\n"


@pytest.mark.shared_server
def test_debug_protocol_errors(conn):
    assert conn.cmd("DEBUG", "PROTOCOL", "nope") == err_bytes(
        "ERR Wrong protocol type name. Please use one of the following: "
        "string|integer|double|bignum|null|array|set|map|attrib|push|verbatim|true|false")
    for args in (("PROTOCOL",), ("PROTOCOL", "string", "x"), ("NOPE",)):
        assert conn.cmd("DEBUG", *args) == err_bytes(
            f"ERR unknown subcommand or wrong number of arguments for '{args[0]}'. Try DEBUG HELP.")
    assert conn.cmd("DEBUG") == err_bytes(arity("debug"))


# --------------------------------------------------------------- DEBUG OBJECT

DEBUG_OBJECT = re.compile(
    rb"\+Value at:0x[0-9a-f]+ refcount:(\d+) encoding:(\S+) serializedlength:(\d+) "
    rb"lru:\d+ lru_seconds_idle:\d+\r\n")


@pytest.mark.shared_server
def test_debug_object_line(conn):
    for key, setup in [("s", ("SET", "s", "hello")), ("n", ("SET", "n", "5")),
                       ("r", ("SET", "r", "x" * 100)), ("h", ("HSET", "h", "f", "v"))]:
        conn.cmd(*setup)
        m = DEBUG_OBJECT.fullmatch(conn.cmd("DEBUG", "OBJECT", key))
        assert m, key
        assert m.group(1) == str(conn.call("OBJECT", "REFCOUNT", key)).encode()
        assert m.group(2) == conn.call("OBJECT", "ENCODING", key)
        assert int(m.group(3)) > 0
    conn.cmd("HSET", "h", "foo", "a" * 1024)
    assert b"encoding:hashtable" in conn.cmd("DEBUG", "OBJECT", "h")
    assert conn.cmd("DEBUG", "OBJECT", "missing") == err_bytes("ERR no such key")


@pytest.mark.shared_server
def test_debug_object_address_stays_while_incr_changes_the_value_in_place(conn):
    conn.cmd("SET", "foo", "20000")
    conn.cmd("INCR", "foo")
    before = conn.cmd("DEBUG", "OBJECT", "foo").split()[1]
    conn.cmd("INCR", "foo")
    after = conn.cmd("DEBUG", "OBJECT", "foo").split()[1]
    assert before.startswith(b"at:") and before == after


# --------------------------------------------------------- DEBUG PAUSE-CRON

def test_debug_pause_cron_stops_active_expiry(conn):
    assert conn.cmd("DEBUG", "PAUSE-CRON", "1") == b"+OK\r\n"
    try:
        conn.cmd("PSETEX", "k", "20", "v")
        time.sleep(0.5)
        # Still held (DBSIZE counts it) though past its time.
        assert conn.cmd("DBSIZE") == b":1\r\n"
    finally:
        assert conn.cmd("DEBUG", "PAUSE-CRON", "0") == b"+OK\r\n"
    wait_until(lambda: conn.cmd("DBSIZE") == b":0\r\n", message="active expiry")


def test_debug_pause_cron_leaves_set_active_expire_alone(conn):
    conn.cmd("DEBUG", "SET-ACTIVE-EXPIRE", "0")
    conn.cmd("DEBUG", "PAUSE-CRON", "1")
    conn.cmd("DEBUG", "PAUSE-CRON", "0")
    conn.cmd("PSETEX", "k", "20", "v")
    time.sleep(0.5)
    assert conn.cmd("DBSIZE") == b":1\r\n"     # still off
    conn.cmd("DEBUG", "SET-ACTIVE-EXPIRE", "1")
    wait_until(lambda: conn.cmd("DBSIZE") == b":0\r\n", message="active expiry")


@pytest.mark.shared_server
def test_debug_help(conn):
    lines = help_lines(conn, "DEBUG")
    for entry in ("OBJECT <key>", "PAUSE-CRON <0|1>", "PROTOCOL <type>",
                  "SET-ACTIVE-EXPIRE <0|1>", "SLEEP <seconds>"):
        assert entry in lines

