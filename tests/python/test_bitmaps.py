"""Bitmap commands on strings: BITCOUNT, BITPOS, BITOP, BITFIELD and
BITFIELD_RO (SETBIT/GETBIT are in test_strings.py), with Redis 7's exact
replies and errors.

Every expectation here was checked against redis-server 7.0 with
DELTAGRID_TEST_TARGET=redis. Their keyspace events are in
test_notifications.py.
"""

import pytest

from helpers import NOT_INT, SYNTAX, WRONGTYPE, arity, v
from helpers_net import err_bytes

# One server for the module, flushed before every test: these tests only touch keys.
pytestmark = pytest.mark.shared_server

OFFSET = "ERR bit offset is not an integer or out of range"
BAD_TYPE = ("ERR Invalid bitfield type. Use something like i16 u8. "
            "Note that u64 is not supported but i64 is.")


def bits_of(data):
    return "".join(format(b, "08b") for b in data)


# -------------------------------------------------------------------- BITCOUNT

def test_bitcount_whole_string_and_byte_ranges(conn):
    conn.call("SET", "s", "foobar")
    assert conn.cmd("BITCOUNT", "s") == b":26\r\n"
    assert conn.call("BITCOUNT", "s", 0, 0) == 4
    assert conn.call("BITCOUNT", "s", 1, 1) == 6
    assert conn.call("BITCOUNT", "s", 1, -2) == bits_of(b"ooba").count("1")
    assert conn.call("BITCOUNT", "s", -2, 1) == 0
    assert conn.call("BITCOUNT", "s", 0, 1000) == 26
    assert conn.call("BITCOUNT", "s", 4, 10) == bits_of(b"ar").count("1")
    assert conn.call("BITCOUNT", "s", 6, 10) == 0
    assert conn.call("BITCOUNT", "s", -100, -1) == 26
    assert conn.call("BITCOUNT", "s", 0, -1, "byte") == 26
    assert conn.call("BITCOUNT", "s", 0, 4294967296) == 26


def test_bitcount_bit_ranges(conn):
    conn.call("SET", "s", "foobar")
    bits = bits_of(b"foobar")
    for start, end, first, last in [(5, 30, 5, 30), (10, 14, 10, 14), (10, -34, 10, 14),
                                    (3, -19, 3, 29), (0, -1, 0, 47), (40, 1000, 40, 47)]:
        assert conn.call("BITCOUNT", "s", start, end, "BIT") == bits[first:last + 1].count("1")
    assert conn.call("BITCOUNT", "s", -2, 1, "bit") == 0
    assert conn.call("BITCOUNT", "s", 48, 100, "BIT") == 0


def test_bitcount_missing_key_and_empty_string(conn):
    assert conn.call("BITCOUNT", "missing") == 0
    assert conn.call("BITCOUNT", "missing", 0, 1000, "BIT") == 0
    # The key is looked up first: a missing key counts 0 whatever follows.
    assert conn.call("BITCOUNT", "missing", "x") == 0
    assert conn.call("BITCOUNT", "missing", 0, 1, "nope") == 0
    conn.call("SET", "e", "")
    assert conn.call("BITCOUNT", "e") == 0
    assert conn.call("BITCOUNT", "e", 0, -1, "BIT") == 0


def test_bitcount_errors(conn):
    conn.call("SET", "s", "foobar")
    assert conn.cmd("BITCOUNT", "s", 0) == err_bytes(SYNTAX)
    assert conn.cmd("BITCOUNT", "s", 0, 1, "hello") == err_bytes(SYNTAX)
    assert conn.cmd("BITCOUNT", "s", 0, 1, "BIT", "x") == err_bytes(SYNTAX)
    assert conn.cmd("BITCOUNT", "s", "a", 1) == err_bytes(NOT_INT)
    assert conn.cmd("BITCOUNT", "s", 0, "1.5") == err_bytes(NOT_INT)
    # Two negative indexes in the wrong order answer 0 before the unit is read.
    assert conn.call("BITCOUNT", "s", -1, -2, "hello") == 0
    conn.call("HSET", "h", "f", "v")
    assert conn.cmd("BITCOUNT", "h") == err_bytes(WRONGTYPE)
    assert conn.cmd("BITCOUNT", "h", "x") == err_bytes(WRONGTYPE)
    assert conn.cmd("BITCOUNT") == err_bytes(arity("bitcount"))


# ---------------------------------------------------------------------- BITPOS

def test_bitpos_whole_string(conn):
    conn.call("SET", "s", b"\xff\xf0\x00")
    assert conn.cmd("BITPOS", "s", 0) == b":12\r\n"
    conn.call("SET", "s", b"\x00\x0f\x00")
    assert conn.call("BITPOS", "s", 1) == 12
    conn.call("SET", "s", b"\x00\x00\x00")
    assert conn.call("BITPOS", "s", 1) == -1
    assert conn.call("BITPOS", "s", 0) == 0


def test_bitpos_clear_bit_past_the_end_only_without_an_end(conn):
    conn.call("SET", "s", b"\xff\xff\xff")
    assert conn.call("BITPOS", "s", 0) == 24
    assert conn.call("BITPOS", "s", 0, 0) == 24
    assert conn.call("BITPOS", "s", 0, 1) == 24
    assert conn.call("BITPOS", "s", 0, 0, -1) == -1
    assert conn.call("BITPOS", "s", 0, 0, -1, "BIT") == -1
    assert conn.call("BITPOS", "s", 0, 5) == -1   # start past the end: empty range


def test_bitpos_ranges(conn):
    conn.call("SET", "s", b"\x00\xff\x00")
    assert [conn.call("BITPOS", "s", 1, *r) for r in
            [(0, -1), (1, -1), (2, -1), (2, 200), (1, 1), (-2, -2)]] == [8, 8, -1, -1, 8, 8]
    assert [conn.call("BITPOS", "s", 0, *r) for r in
            [(0, -1), (1, -1), (2, -1), (2, 200), (1, 1)]] == [0, 16, 16, 16, -1]
    assert [conn.call("BITPOS", "s", 1, *r, "BIT") for r in
            [(0, -1), (8, -1), (16, -1), (16, 200), (8, 8), (7, 7), (3, 12), (12, 3)]] == [
        8, 8, -1, -1, 8, -1, 8, -1]
    assert [conn.call("BITPOS", "s", 0, *r, "bit") for r in
            [(0, -1), (8, -1), (16, -1), (8, 8), (9, 15)]] == [0, 16, 16, -1, -1]


def test_bitpos_missing_key_and_empty_string(conn):
    assert conn.call("BITPOS", "missing", 0) == 0
    assert conn.call("BITPOS", "missing", 1) == -1
    # Missing: answered before the range is read.
    assert conn.call("BITPOS", "missing", 1, "x") == -1
    conn.call("SET", "e", "")
    assert conn.call("BITPOS", "e", 0) == -1
    assert conn.call("BITPOS", "e", 1) == -1


def test_bitpos_errors(conn):
    conn.call("SET", "s", "x")
    assert conn.cmd("BITPOS", "s", 2) == err_bytes("ERR The bit argument must be 1 or 0.")
    assert conn.cmd("BITPOS", "missing", -1) == err_bytes("ERR The bit argument must be 1 or 0.")
    assert conn.cmd("BITPOS", "s", "x") == err_bytes(NOT_INT)
    assert conn.cmd("BITPOS", "s", 1, "a") == err_bytes(NOT_INT)
    assert conn.cmd("BITPOS", "s", 1, 0, "a") == err_bytes(NOT_INT)
    assert conn.cmd("BITPOS", "s", 1, 0, 1, "WORD") == err_bytes(SYNTAX)
    # The unit is read before the end.
    assert conn.cmd("BITPOS", "s", 1, 0, "a", "WORD") == err_bytes(SYNTAX)
    assert conn.cmd("BITPOS", "s", 1, 0, 1, "BIT", "x") == err_bytes(SYNTAX)
    conn.call("HSET", "h", "f", "v")
    assert conn.cmd("BITPOS", "h", 1) == err_bytes(WRONGTYPE)
    assert conn.cmd("BITPOS", "s") == err_bytes(arity("bitpos"))


# ----------------------------------------------------------------------- BITOP

def test_bitop_and_or_xor_pad_with_zeros(conn):
    conn.call("SET", "a{t}", b"\x01\x02\xff\xff")
    conn.call("SET", "b{t}", b"\x01\x02\xff")
    assert conn.cmd("BITOP", "AND", "r1{t}", "a{t}", "b{t}") == b":4\r\n"
    assert conn.call("BITOP", "or", "r2{t}", "a{t}", "b{t}") == 4
    assert conn.call("BITOP", "Xor", "r3{t}", "a{t}", "b{t}", "missing{t}") == 4
    assert [conn.call("GET", k) for k in ("r1{t}", "r2{t}", "r3{t}")] == [
        b"\x01\x02\xff\x00", b"\x01\x02\xff\xff", b"\x00\x00\x00\xff"]
    assert conn.call("BITOP", "AND", "r4{t}", "missing{t}", "a{t}") == 4
    assert conn.call("GET", "r4{t}") == b"\x00\x00\x00\x00"


def test_bitop_not_and_same_key(conn):
    conn.call("SET", "s", b"\xaa\x00\xff\x55")
    assert conn.call("BITOP", "NOT", "s", "s") == 4
    assert conn.call("GET", "s") == b"\x55\xff\x00\xaa"


def test_bitop_result_replaces_the_destination(conn):
    conn.call("SET", "a{t}", "1")
    conn.call("SET", "b{t}", "2")
    conn.call("HSET", "d{t}", "f", "v")
    assert conn.call("BITOP", "XOR", "d{t}", "a{t}", "b{t}", "a{t}") == 1
    assert conn.call("GET", "d{t}") == b"2"
    conn.call("EXPIRE", "d{t}", 100)
    assert conn.call("BITOP", "OR", "d{t}", "a{t}") == 1
    assert conn.call("TTL", "d{t}") == -1  # a new value: no time to live


def test_bitop_empty_result_deletes_the_destination(conn):
    conn.call("SET", "d{t}", "old")
    conn.call("SET", "e{t}", "")
    assert conn.call("BITOP", "NOT", "d{t}", "e{t}") == 0
    assert conn.call("EXISTS", "d{t}") == 0
    assert conn.call("BITOP", "OR", "d{t}", "missing{t}", "e{t}") == 0
    assert conn.call("EXISTS", "d{t}") == 0


def test_bitop_errors(conn):
    conn.call("SET", "a{t}", "x")
    conn.call("HSET", "h{t}", "f", "v")
    assert conn.cmd("BITOP", "NAND", "d{t}", "a{t}") == err_bytes(SYNTAX)
    assert conn.cmd("BITOP", "NOT", "d{t}", "a{t}", "a{t}") == err_bytes(
        "ERR BITOP NOT must be called with a single source key.")
    assert conn.cmd("BITOP", "AND", "d{t}", "a{t}", "h{t}") == err_bytes(WRONGTYPE)
    assert conn.call("EXISTS", "d{t}") == 0
    assert conn.cmd("BITOP", "AND", "d{t}") == err_bytes(arity("bitop"))


# -------------------------------------------------------------------- BITFIELD

def test_bitfield_set_get_incrby(conn):
    assert conn.cmd("BITFIELD", "bf", "SET", "u8", 0, 255, "GET", "u8", 0) == (
        b"*2\r\n:0\r\n:255\r\n")
    assert conn.call("GET", "bf") == b"\xff"
    assert conn.call("BITFIELD", "bf", "INCRBY", "u8", 0, 10, "GET", "i8", 0) == [9, 9]
    # The example of Redis's documentation: 5-bit fields at #1 and #2.
    conn.call("DEL", "bf")
    assert conn.call("BITFIELD", "bf", "SET", "u5", 7, 23) == [0]
    assert conn.call("GET", "bf") == b"\x01\x70"
    assert conn.call("BITFIELD", "bf", "SET", "i8", "#1", -1, "GET", "u8", 8, "GET", "i4", "#2") == [
        0x70, 255, -1]
    assert conn.call("BITFIELD", "bf", "GET", "i64", 0, "GET", "u63", 1, "GET", "i16", 4) == [
        0x01ff_0000_0000_0000, 0x01ff_0000_0000_0000, 0x1ff0]


def test_bitfield_reads_past_the_end_as_zeros(conn):
    assert conn.call("BITFIELD", "missing", "GET", "u8", 0, "GET", "i64", 100) == [0, 0]
    assert conn.call("EXISTS", "missing") == 0
    conn.call("SET", "s", b"\x80")
    assert conn.call("BITFIELD", "s", "GET", "i4", 0, "GET", "u4", 4, "GET", "u16", 0) == [
        -8, 0, 0x8000]
    assert conn.cmd("BITFIELD", "s") == b"*0\r\n"


def test_bitfield_grows_the_string_to_the_furthest_write(conn):
    assert conn.call("BITFIELD", "g", "SET", "u8", 8, 1) == [0]
    assert conn.call("GET", "g") == b"\x00\x01"
    # Even a write refused by OVERFLOW FAIL grows the string.
    assert conn.call("BITFIELD", "g", "OVERFLOW", "FAIL", "INCRBY", "u2", 100, 9) == [None]
    assert conn.call("STRLEN", "g") == 13
    assert conn.call("GET", "g") == b"\x00\x01" + b"\x00" * 11


def test_bitfield_overflow_modes(conn):
    assert conn.call("BITFIELD", "o", "SET", "u2", 0, 3, "INCRBY", "u2", 0, 1) == [0, 0]
    assert conn.call("BITFIELD", "o", "OVERFLOW", "SAT", "INCRBY", "u2", 0, 10,
                     "INCRBY", "u2", 0, -10) == [3, 0]
    assert conn.call("BITFIELD", "o", "OVERFLOW", "fail", "INCRBY", "u2", 0, 4,
                     "OVERFLOW", "wrap", "INCRBY", "u2", 0, 5) == [None, 1]
    assert conn.call("BITFIELD", "o", "SET", "i8", 8, 200, "GET", "i8", 8) == [0, -56]
    assert conn.call("BITFIELD", "o", "OVERFLOW", "SAT", "SET", "i8", 8, 200, "GET", "i8", 8,
                     "SET", "u8", 8, -1, "GET", "u8", 8) == [-56, 127, 127, 255]
    assert conn.call("BITFIELD", "o", "OVERFLOW", "SAT", "INCRBY", "i64", 16, 9223372036854775807,
                     "INCRBY", "i64", 16, 1, "INCRBY", "i64", 16, -9223372036854775808) == [
        9223372036854775807, 9223372036854775807, -1]


def test_bitfield_fail_is_a_null_in_each_protocol(conn):
    conn.call("SET", "f", b"\xff")
    assert conn.cmd("BITFIELD", "f", "OVERFLOW", "FAIL", "INCRBY", "u8", 0, 1) == b"*1\r\n$-1\r\n"
    conn.call("HELLO", "3")
    assert conn.cmd("BITFIELD", "f", "OVERFLOW", "FAIL", "INCRBY", "u8", 0, 1) == b"*1\r\n_\r\n"
    assert conn.call("GET", "f") == b"\xff"


def test_bitfield_argument_errors(conn):
    conn.call("HSET", "h", "f", "v")
    cases = [
        (("GET", "u8"), SYNTAX),
        (("SET", "u8", 0), SYNTAX),
        (("FOO", "u8", 0), SYNTAX),
        (("OVERFLOW",), SYNTAX),
        (("OVERFLOW", "BOUNCE"), "ERR Invalid OVERFLOW type specified"),
        (("GET", "u64", 0), BAD_TYPE),
        (("GET", "i65", 0), BAD_TYPE),
        (("GET", "i0", 0), BAD_TYPE),
        (("GET", "I8", 0), BAD_TYPE),
        (("GET", "u8", -1), OFFSET),
        (("GET", "u8", 4294967296), OFFSET),
        (("GET", "u8", "#-1"), OFFSET),
        (("GET", "u8", "x"), OFFSET),
        (("SET", "u8", 0, "x"), NOT_INT),
        (("INCRBY", "u8", 0, "1.5"), NOT_INT),
    ]
    for args, error in cases:
        # Arguments are checked before the key's type.
        assert conn.cmd("BITFIELD", "h", *args) == err_bytes(error), args
    assert conn.call("BITFIELD", "s", "GET", "u8", 4294967295) == [0]
    assert conn.cmd("BITFIELD", "h", "GET", "u8", 0) == err_bytes(WRONGTYPE)
    assert conn.cmd("BITFIELD", "h") == err_bytes(WRONGTYPE)
    assert conn.cmd("BITFIELD") == err_bytes(arity("bitfield"))


def test_bitfield_ro_reads_only(conn):
    conn.call("SET", "s", b"\x0f")
    assert conn.call("BITFIELD_RO", "s", "GET", "u4", 4, "GET", "i4", 4) == [15, -1]
    assert conn.call("BITFIELD_RO", "s") == []
    ro_only = "ERR BITFIELD_RO only supports the GET subcommand"
    assert conn.cmd("BITFIELD_RO", "s", "SET", "u4", 0, 1) == err_bytes(ro_only)
    assert conn.cmd("BITFIELD_RO", "s", "GET", "u4", 0, "INCRBY", "u4", 0, 1) == err_bytes(ro_only)
    assert conn.cmd("BITFIELD_RO", "s", "OVERFLOW", "SAT", "GET", "u4", 0) == b"*1\r\n:0\r\n"
    conn.call("HSET", "h", "f", "v")
    assert conn.cmd("BITFIELD_RO", "h", "SET", "u4", 0, 1) == err_bytes(ro_only)
    assert conn.cmd("BITFIELD_RO", "h", "GET", "u4", 0) == err_bytes(WRONGTYPE)


def test_writes_that_change_nothing_are_not_writes(conn):
    # WATCH sees a change only: a SETBIT or BITFIELD SET of what the bits
    # already are leaves the key as it was.
    conn.call("BITFIELD", "w", "SET", "u8", 0, 7)
    conn.call("WATCH", "w")
    assert conn.call("BITFIELD", "w", "SET", "u8", 0, 7, "SET", "u4", 4, 7) == [7, 7]
    assert conn.call("SETBIT", "w", 3, 0) == 0
    assert conn.call("SETBIT", "w", 5, 1) == 1
    conn.call("MULTI")
    conn.call("GET", "w")
    assert conn.call("EXEC") == [b"\x07"]
    conn.call("WATCH", "w")
    conn.call("SETBIT", "w", 0, 1)
    conn.call("MULTI")
    conn.call("GET", "w")
    assert conn.call("EXEC") is None


def test_bitmap_commands_through_redis_py(r):
    r.set("s", "foobar")
    assert r.bitcount("s") == 26
    assert r.bitcount("s", 1, 1) == 6
    assert r.bitpos("s", 1) == 1
    assert r.bitop("AND", "d", "s") == 6
    bf = r.bitfield("b")
    assert bf.set("u8", 0, 200).incrby("u8", 0, 100).get("u8", 0).execute() == [0, 44, 44]
    assert r.get("b") == v(r, b"\x2c")
