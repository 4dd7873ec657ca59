"""String commands: exact Redis 7.0 replies, checked on the wire and through redis-py.

Every expectation here was verified against redis-server 7.0 with
DELTAGRID_TEST_TARGET=redis.
"""

import pytest
import redis

from helpers import NOT_FLOAT, NOT_INT, SYNTAX, WRONGTYPE, arity, invalid_expire, v
from helpers_net import RespError, bulk, err_bytes

# One server for the module, flushed before every test: these tests only touch keys.
pytestmark = pytest.mark.shared_server


# ---------------------------------------------------------------- wire format

def test_set_get_wire_bytes(conn):
    assert conn.cmd("SET", "k", "hello") == b"+OK\r\n"
    assert conn.cmd("GET", "k") == b"$5\r\nhello\r\n"
    assert conn.cmd("GET", "missing") == b"$-1\r\n"
    assert conn.cmd("SET", "e", "") == b"+OK\r\n"
    assert conn.cmd("GET", "e") == b"$0\r\n\r\n"


def test_get_missing_is_resp3_null(conn):
    conn.cmd("HELLO", "3")
    assert conn.cmd("GET", "missing") == b"_\r\n"
    assert conn.cmd("MGET", "missing", "missing") == b"*2\r\n_\r\n_\r\n"
    conn.cmd("SET", "k", "v")
    assert conn.cmd("GET", "k") == b"$1\r\nv\r\n"


def test_commands_are_case_insensitive(conn):
    assert conn.cmd("sEt", "k", "v", "ex", "100", "Nx") == b"+OK\r\n"
    assert conn.cmd("get", "k") == b"$1\r\nv\r\n"
    assert conn.cmd("GeT", "k") == b"$1\r\nv\r\n"
    # ... but keys are not
    assert conn.cmd("GET", "K") == b"$-1\r\n"


def test_values_are_binary_safe(conn):
    val = b"a\r\nb\x00c\xff$-1\r\n"
    assert conn.cmd("SET", b"k\r\n\x00", val) == b"+OK\r\n"
    assert conn.cmd("GET", b"k\r\n\x00") == bulk(val)
    assert conn.cmd("STRLEN", b"k\r\n\x00") == b":%d\r\n" % len(val)


def test_large_value_roundtrip(conn):
    val = bytes(range(256)) * 4096  # 1 MiB
    assert conn.cmd("SET", "big", val) == b"+OK\r\n"
    assert conn.cmd("GET", "big") == bulk(val)
    assert conn.cmd("STRLEN", "big") == b":1048576\r\n"


def test_arity_errors(conn):
    cases = [
        ("GET",), ("GET", "a", "b"), ("SET",), ("SET", "k"), ("SETNX", "k"), ("SETEX", "k", "10"),
        ("PSETEX", "k"), ("GETSET", "k"), ("GETDEL",), ("GETDEL", "a", "b"), ("GETEX",), ("MGET",),
        ("MSET",), ("MSET", "a"), ("MSET", "a", "1", "b"), ("MSETNX",), ("MSETNX", "a"),
        ("INCR",), ("INCR", "a", "b"), ("DECR", "a", "b"), ("INCRBY", "a"), ("DECRBY", "a"),
        ("INCRBYFLOAT", "a"), ("APPEND", "a"), ("STRLEN",), ("SETRANGE", "a", "0"),
        ("GETRANGE", "a", "0"),
    ]
    for args in cases:
        assert conn.cmd(*args) == err_bytes(arity(args[0].lower())), args


def test_arity_error_uses_lowercase_command_name(conn):
    assert conn.cmd("GET") == b"-ERR wrong number of arguments for 'get' command\r\n"
    assert conn.cmd("MsEt", "a") == b"-ERR wrong number of arguments for 'mset' command\r\n"


def test_wrongtype_errors(conn):
    assert conn.cmd("HSET", "l", "f", "x") == b":1\r\n"
    cases = [
        ("GET", "l"), ("GETSET", "l", "v"), ("GETDEL", "l"), ("GETEX", "l"), ("GETEX", "l", "PERSIST"),
        ("SET", "l", "v", "GET"), ("INCR", "l"), ("DECR", "l"), ("INCRBY", "l", "1"),
        ("DECRBY", "l", "1"), ("INCRBYFLOAT", "l", "1"), ("APPEND", "l", "x"), ("STRLEN", "l"),
        ("SETRANGE", "l", "0", "x"), ("GETRANGE", "l", "0", "1"),
    ]
    for args in cases:
        assert conn.cmd(*args) == err_bytes(WRONGTYPE), args
    # the hash is untouched by all of the above
    assert conn.cmd("TYPE", "l") == b"+hash\r\n"
    assert conn.cmd("HGETALL", "l") == b"*2\r\n$1\r\nf\r\n$1\r\nx\r\n"


# ------------------------------------------------------------------------ SET

def test_set_overwrites_any_type(conn):
    conn.cmd("HSET", "l", "f", "x")
    conn.cmd("HSET", "h", "f", "v")
    assert conn.cmd("SET", "l", "s1") == b"+OK\r\n"
    assert conn.cmd("SET", "h", "s2") == b"+OK\r\n"
    assert conn.cmd("TYPE", "l") == b"+string\r\n"
    assert conn.cmd("GET", "h") == b"$2\r\ns2\r\n"


def test_set_nx_xx(conn):
    assert conn.cmd("SET", "k", "v1", "XX") == b"$-1\r\n"
    assert conn.cmd("EXISTS", "k") == b":0\r\n"
    assert conn.cmd("SET", "k", "v1", "NX") == b"+OK\r\n"
    assert conn.cmd("SET", "k", "v2", "NX") == b"$-1\r\n"
    assert conn.cmd("GET", "k") == b"$2\r\nv1\r\n"
    assert conn.cmd("SET", "k", "v3", "XX") == b"+OK\r\n"
    assert conn.cmd("GET", "k") == b"$2\r\nv3\r\n"


def test_set_nx_failure_is_resp3_null(conn):
    conn.cmd("HELLO", "3")
    conn.cmd("SET", "k", "v")
    assert conn.cmd("SET", "k", "v", "NX") == b"_\r\n"


def test_set_ex_px(conn):
    assert conn.cmd("SET", "k", "v", "EX", "100") == b"+OK\r\n"
    ttl = conn.call("TTL", "k")
    assert 99 <= ttl <= 100
    assert conn.cmd("SET", "k", "v", "PX", "100000") == b"+OK\r\n"
    pttl = conn.call("PTTL", "k")
    assert 99000 <= pttl <= 100000


def test_set_exat_pxat(conn):
    assert conn.cmd("SET", "k", "v", "EXAT", "4102444800") == b"+OK\r\n"
    assert conn.cmd("EXPIRETIME", "k") == b":4102444800\r\n"
    assert conn.cmd("SET", "k", "v", "PXAT", "4102444800123") == b"+OK\r\n"
    assert conn.cmd("PEXPIRETIME", "k") == b":4102444800123\r\n"
    assert conn.cmd("EXPIRETIME", "k") == b":4102444800\r\n"


def test_set_exat_in_the_past_replies_ok_and_key_is_gone(conn):
    conn.cmd("SET", "k", "old")
    assert conn.cmd("SET", "k", "v", "EXAT", "1") == b"+OK\r\n"
    assert conn.cmd("EXISTS", "k") == b":0\r\n"
    assert conn.cmd("SET", "k", "v", "PXAT", "1") == b"+OK\r\n"
    assert conn.cmd("GET", "k") == b"$-1\r\n"


def test_set_without_ttl_option_clears_ttl(conn):
    conn.cmd("SET", "k", "v", "EX", "100")
    assert conn.cmd("SET", "k", "v2") == b"+OK\r\n"
    assert conn.cmd("TTL", "k") == b":-1\r\n"


def test_set_keepttl(conn):
    conn.cmd("SET", "k", "v", "EX", "100")
    assert conn.cmd("SET", "k", "v2", "KEEPTTL") == b"+OK\r\n"
    assert 99 <= conn.call("TTL", "k") <= 100
    assert conn.cmd("GET", "k") == b"$2\r\nv2\r\n"
    # KEEPTTL on a key without TTL keeps it persistent
    conn.cmd("SET", "p", "v")
    conn.cmd("SET", "p", "v2", "KEEPTTL")
    assert conn.cmd("TTL", "p") == b":-1\r\n"


def test_set_get_option(conn):
    assert conn.cmd("SET", "k", "v1", "GET") == b"$-1\r\n"
    assert conn.cmd("SET", "k", "v2", "GET") == b"$2\r\nv1\r\n"
    assert conn.cmd("GET", "k") == b"$2\r\nv2\r\n"
    # GET combines with NX since 7.0: returns the old value and does not set
    assert conn.cmd("SET", "k", "v3", "NX", "GET") == b"$2\r\nv2\r\n"
    assert conn.cmd("GET", "k") == b"$2\r\nv2\r\n"
    assert conn.cmd("SET", "n", "v", "NX", "GET") == b"$-1\r\n"
    assert conn.cmd("GET", "n") == b"$1\r\nv\r\n"
    # XX + GET on a missing key: nil, nothing set
    assert conn.cmd("SET", "m", "v", "XX", "GET") == b"$-1\r\n"
    assert conn.cmd("EXISTS", "m") == b":0\r\n"
    assert conn.cmd("SET", "k", "v4", "XX", "GET", "EX", "100") == b"$2\r\nv2\r\n"
    assert conn.cmd("GET", "k") == b"$2\r\nv4\r\n"
    assert conn.call("TTL", "k") > 0


def test_set_get_option_against_wrong_type_does_not_overwrite(conn):
    conn.cmd("HSET", "l", "f", "x")
    assert conn.cmd("SET", "l", "v", "GET") == err_bytes(WRONGTYPE)
    assert conn.cmd("TYPE", "l") == b"+hash\r\n"


def test_set_repeated_identical_options_are_accepted(conn):
    assert conn.cmd("SET", "k", "v", "EX", "10", "EX", "20") == b"+OK\r\n"
    assert 19 <= conn.call("TTL", "k") <= 20
    assert conn.cmd("SET", "k", "v", "KEEPTTL", "KEEPTTL") == b"+OK\r\n"
    assert conn.cmd("SET", "k", "v", "GET", "GET") == b"$1\r\nv\r\n"


def test_set_option_conflicts_are_syntax_errors(conn):
    conn.cmd("SET", "k", "orig")
    cases = [
        ("NX", "XX"), ("EX", "10", "PX", "100"), ("PX", "100000", "EX", "20"),
        ("EX", "20", "EXAT", "4102444800"), ("PXAT", "4102444800000", "EXAT", "4102444800"),
        ("EX", "10", "KEEPTTL"), ("KEEPTTL", "PX", "100"), ("EX",), ("PX",), ("EXX", "10"),
        ("FOO",), ("GET", "KEEPTTL", "PX", "100"),
    ]
    for opts in cases:
        assert conn.cmd("SET", "k", "v", *opts) == err_bytes(SYNTAX), opts
    assert conn.cmd("GET", "k") == b"$4\r\norig\r\n"


def test_set_invalid_expire_time(conn):
    for opts in [("EX", "0"), ("EX", "-1"), ("PX", "0"), ("PX", "-100"), ("EXAT", "0"),
                 ("PXAT", "0"), ("EXAT", "-5"), ("EX", "9223372036854775807"),
                 ("EX", "9223372036854775"), ("PX", "9223372036854775807")]:
        assert conn.cmd("SET", "k", "v", *opts) == invalid_expire("set"), opts
    assert conn.cmd("EXISTS", "k") == b":0\r\n"


def test_set_expire_not_an_integer(conn):
    for val in ["abc", "1.5", "0x10", "", " 10"]:
        assert conn.cmd("SET", "k", "v", "EX", val) == err_bytes(NOT_INT), val
    assert conn.cmd("SET", "k", "v", "PX", "1e3") == err_bytes(NOT_INT)


def test_set_large_but_valid_ex(conn):
    assert conn.cmd("SET", "k", "v", "EX", "922337203685477") == b"+OK\r\n"
    assert conn.call("TTL", "k") >= 922337203685470


# --------------------------------------------------------- SETNX SETEX PSETEX

def test_setnx(conn):
    assert conn.cmd("SETNX", "k", "v1") == b":1\r\n"
    assert conn.cmd("SETNX", "k", "v2") == b":0\r\n"
    assert conn.cmd("GET", "k") == b"$2\r\nv1\r\n"
    conn.cmd("HSET", "l", "f", "x")
    # SETNX on an existing key of another type is just 0, not WRONGTYPE
    assert conn.cmd("SETNX", "l", "v") == b":0\r\n"


def test_setex_psetex(conn):
    assert conn.cmd("SETEX", "k", "100", "v") == b"+OK\r\n"
    assert conn.cmd("GET", "k") == b"$1\r\nv\r\n"
    assert 99 <= conn.call("TTL", "k") <= 100
    assert conn.cmd("PSETEX", "p", "100000", "v") == b"+OK\r\n"
    assert 99000 <= conn.call("PTTL", "p") <= 100000
    conn.cmd("HSET", "l", "f", "x")
    assert conn.cmd("SETEX", "l", "100", "v") == b"+OK\r\n"  # overwrites any type
    assert conn.cmd("TYPE", "l") == b"+string\r\n"


def test_setex_psetex_errors(conn):
    assert conn.cmd("SETEX", "k", "0", "v") == invalid_expire("setex")
    assert conn.cmd("SETEX", "k", "-5", "v") == invalid_expire("setex")
    assert conn.cmd("PSETEX", "k", "0", "v") == invalid_expire("psetex")
    assert conn.cmd("PSETEX", "k", "-1", "v") == invalid_expire("psetex")
    assert conn.cmd("SETEX", "k", "abc", "v") == err_bytes(NOT_INT)
    assert conn.cmd("PSETEX", "k", "abc", "v") == err_bytes(NOT_INT)
    assert conn.cmd("EXISTS", "k") == b":0\r\n"


# ------------------------------------------------------ GETSET GETDEL GETEX

def test_getset(conn):
    assert conn.cmd("GETSET", "k", "v1") == b"$-1\r\n"
    assert conn.cmd("GET", "k") == b"$2\r\nv1\r\n"
    conn.cmd("EXPIRE", "k", "100")
    assert conn.cmd("GETSET", "k", "v2") == b"$2\r\nv1\r\n"
    assert conn.cmd("TTL", "k") == b":-1\r\n"  # GETSET clears the TTL
    assert conn.cmd("GET", "k") == b"$2\r\nv2\r\n"


def test_getdel(conn):
    conn.cmd("SET", "k", "v")
    assert conn.cmd("GETDEL", "k") == b"$1\r\nv\r\n"
    assert conn.cmd("GETDEL", "k") == b"$-1\r\n"
    assert conn.cmd("EXISTS", "k") == b":0\r\n"


def test_getex_options(conn):
    conn.cmd("SET", "k", "v")
    assert conn.cmd("GETEX", "k") == b"$1\r\nv\r\n"
    assert conn.cmd("TTL", "k") == b":-1\r\n"
    assert conn.cmd("GETEX", "k", "EX", "50") == b"$1\r\nv\r\n"
    assert 49 <= conn.call("TTL", "k") <= 50
    assert conn.cmd("GETEX", "k", "PX", "50000") == b"$1\r\nv\r\n"
    assert 49000 <= conn.call("PTTL", "k") <= 50000
    assert conn.cmd("GETEX", "k", "EXAT", "4102444800") == b"$1\r\nv\r\n"
    assert conn.cmd("EXPIRETIME", "k") == b":4102444800\r\n"
    assert conn.cmd("GETEX", "k", "PXAT", "4102444800123") == b"$1\r\nv\r\n"
    assert conn.cmd("PEXPIRETIME", "k") == b":4102444800123\r\n"
    # plain GETEX leaves the TTL alone
    assert conn.cmd("GETEX", "k") == b"$1\r\nv\r\n"
    assert conn.cmd("PEXPIRETIME", "k") == b":4102444800123\r\n"
    assert conn.cmd("GETEX", "k", "PERSIST") == b"$1\r\nv\r\n"
    assert conn.cmd("TTL", "k") == b":-1\r\n"
    assert conn.cmd("GETEX", "k", "persist", "PERSIST") == b"$1\r\nv\r\n"


def test_getex_missing_key(conn):
    assert conn.cmd("GETEX", "nokey", "EX", "10") == b"$-1\r\n"
    assert conn.cmd("EXISTS", "nokey") == b":0\r\n"


def test_getex_exat_in_the_past_deletes(conn):
    conn.cmd("SET", "k", "v")
    assert conn.cmd("GETEX", "k", "EXAT", "1") == b"$1\r\nv\r\n"
    assert conn.cmd("EXISTS", "k") == b":0\r\n"


def test_getex_errors(conn):
    conn.cmd("SET", "k", "v")
    for opts in [("FOO",), ("EX", "10", "PX", "10"), ("EX", "1", "PERSIST"), ("EX",),
                 ("PERSIST", "EX", "10")]:
        assert conn.cmd("GETEX", "k", *opts) == err_bytes(SYNTAX), opts
    for opts in [("EX", "-1"), ("EX", "0"), ("PX", "0"), ("EXAT", "0"), ("PXAT", "-1")]:
        assert conn.cmd("GETEX", "k", *opts) == invalid_expire("getex"), opts
    assert conn.cmd("GETEX", "k", "EX", "abc") == err_bytes(NOT_INT)
    assert conn.cmd("TTL", "k") == b":-1\r\n"


# ------------------------------------------------------------ MGET MSET MSETNX

def test_mget_mset(conn):
    assert conn.cmd("MSET", "a", "1", "b", "2", "a", "3") == b"+OK\r\n"
    conn.cmd("HSET", "l", "f", "x")
    # a key of another type is nil in MGET, not an error
    assert conn.cmd("MGET", "a", "b", "nokey", "l", "a") == (
        b"*5\r\n$1\r\n3\r\n$1\r\n2\r\n$-1\r\n$-1\r\n$1\r\n3\r\n")


def test_mset_overwrites_and_clears_ttl(conn):
    conn.cmd("SET", "a", "old", "EX", "100")
    conn.cmd("HSET", "l", "f", "x")
    assert conn.cmd("MSET", "a", "new", "l", "s") == b"+OK\r\n"
    assert conn.cmd("TTL", "a") == b":-1\r\n"
    assert conn.cmd("TYPE", "l") == b"+string\r\n"


def test_msetnx_is_all_or_nothing(conn):
    assert conn.cmd("MSETNX", "a", "1", "b", "2") == b":1\r\n"
    assert conn.cmd("MSETNX", "a", "x", "c", "3") == b":0\r\n"
    assert conn.cmd("MGET", "a", "b", "c") == b"*3\r\n$1\r\n1\r\n$1\r\n2\r\n$-1\r\n"
    conn.cmd("HSET", "l", "f", "x")
    assert conn.cmd("MSETNX", "l", "x", "d", "4") == b":0\r\n"
    assert conn.cmd("EXISTS", "d") == b":0\r\n"


# ------------------------------------------------------------- INCR family

def test_incr_decr_basic(conn):
    assert conn.cmd("INCR", "n") == b":1\r\n"
    assert conn.cmd("INCR", "n") == b":2\r\n"
    assert conn.cmd("DECR", "n") == b":1\r\n"
    assert conn.cmd("INCRBY", "n", "10") == b":11\r\n"
    assert conn.cmd("INCRBY", "n", "-20") == b":-9\r\n"
    assert conn.cmd("DECRBY", "n", "-9") == b":0\r\n"
    assert conn.cmd("DECR", "m") == b":-1\r\n"
    assert conn.cmd("DECRBY", "o", "5") == b":-5\r\n"
    # the value is stored as a string
    assert conn.cmd("GET", "o") == b"$2\r\n-5\r\n"
    assert conn.cmd("TYPE", "o") == b"+string\r\n"


def test_incr_keeps_ttl(conn):
    conn.cmd("SET", "n", "5", "EX", "100")
    assert conn.cmd("INCR", "n") == b":6\r\n"
    assert 99 <= conn.call("TTL", "n") <= 100


def test_incr_limits(conn):
    conn.cmd("SET", "n", "9223372036854775806")
    assert conn.cmd("INCR", "n") == b":9223372036854775807\r\n"
    assert conn.cmd("INCR", "n") == err_bytes("ERR increment or decrement would overflow")
    assert conn.cmd("INCRBY", "n", "1") == err_bytes("ERR increment or decrement would overflow")
    assert conn.cmd("GET", "n") == b"$19\r\n9223372036854775807\r\n"
    conn.cmd("SET", "m", "-9223372036854775807")
    assert conn.cmd("DECR", "m") == b":-9223372036854775808\r\n"
    assert conn.cmd("DECR", "m") == err_bytes("ERR increment or decrement would overflow")
    assert conn.cmd("INCRBY", "m", "-1") == err_bytes("ERR increment or decrement would overflow")
    conn.cmd("SET", "z", "0")
    assert conn.cmd("INCRBY", "z", "-9223372036854775808") == b":-9223372036854775808\r\n"
    assert conn.cmd("DECRBY", "z", "-9223372036854775807") == b":-1\r\n"


def test_decrby_llong_min_has_its_own_error(conn):
    # DECRBY cannot negate LLONG_MIN: Redis 7.0 has a dedicated message for it
    conn.cmd("SET", "n", "0")
    assert conn.cmd("DECRBY", "n", "-9223372036854775808") == err_bytes("ERR decrement would overflow")
    assert conn.cmd("DECRBY", "missing", "-9223372036854775808") == err_bytes(
        "ERR decrement would overflow")
    assert conn.cmd("GET", "n") == b"$1\r\n0\r\n"


def test_incr_on_non_integer_values(conn):
    for val in ["abc", "1.5", " 1", "1 ", "01", "+1", "", "12345678901234567890", "0x10", "1e3",
                "-0"]:
        conn.cmd("SET", "n", val)
        assert conn.cmd("INCR", "n") == err_bytes(NOT_INT), val
        assert conn.cmd("GET", "n") == bulk(val), val


def test_incrby_argument_not_an_integer(conn):
    for arg in ["abc", "1.5", "", "9223372036854775808", " 1"]:
        assert conn.cmd("INCRBY", "n", arg) == err_bytes(NOT_INT), arg
        assert conn.cmd("DECRBY", "n", arg) == err_bytes(NOT_INT), arg
    assert conn.cmd("EXISTS", "n") == b":0\r\n"


def test_incr_accepts_valid_integer_strings(conn):
    for val, expect in [("-5", b":-4\r\n"), ("0", b":1\r\n"), ("9", b":10\r\n"),
                        ("-9223372036854775808", b":-9223372036854775807\r\n")]:
        conn.cmd("SET", "n", val)
        assert conn.cmd("INCR", "n") == expect, val


# --------------------------------------------------------------- INCRBYFLOAT

def test_incrbyfloat_documented_examples(conn):
    conn.cmd("SET", "k", "10.50")
    assert conn.cmd("INCRBYFLOAT", "k", "0.1") == b"$4\r\n10.6\r\n"
    assert conn.cmd("INCRBYFLOAT", "k", "-5") == b"$3\r\n5.6\r\n"
    conn.cmd("SET", "k", "5.0e3")
    assert conn.cmd("INCRBYFLOAT", "k", "2.0e2") == b"$4\r\n5200\r\n"
    assert conn.cmd("GET", "k") == b"$4\r\n5200\r\n"


def test_incrbyfloat_formatting(conn):
    # always plain decimal notation, trailing zeros (and dot) stripped
    cases = [("missing1", "1.5", b"1.5"), ("missing2", "5", b"5"), ("missing3", "-0", b"0"),
             ("missing4", "1e21", b"1000000000000000000000"),
             ("missing5", "-1.5e-5", b"-0.000015"), ("missing6", "0.0001", b"0.0001"),
             ("missing7", "1e5", b"100000")]
    for key, incr, expect in cases:
        assert conn.cmd("INCRBYFLOAT", key, incr) == bulk(expect), incr
        assert conn.cmd("GET", key) == bulk(expect)
    conn.cmd("SET", "i", "3")
    assert conn.cmd("INCRBYFLOAT", "i", "1.5") == b"$3\r\n4.5\r\n"
    conn.cmd("SET", "f", "1.0")
    assert conn.cmd("INCRBYFLOAT", "f", "1") == b"$1\r\n2\r\n"
    conn.cmd("SET", "e", "1e3")
    assert conn.cmd("INCRBYFLOAT", "e", "0") == b"$4\r\n1000\r\n"


def test_incrbyfloat_is_bulk_string_in_resp3(conn):
    conn.cmd("HELLO", "3")
    assert conn.cmd("INCRBYFLOAT", "k", "1.5") == b"$3\r\n1.5\r\n"


def test_incrbyfloat_errors(conn):
    assert conn.cmd("INCRBYFLOAT", "k", "abc") == err_bytes(NOT_FLOAT)
    assert conn.cmd("INCRBYFLOAT", "k", "") == err_bytes(NOT_FLOAT)
    assert conn.cmd("INCRBYFLOAT", "k", " 1") == err_bytes(NOT_FLOAT)
    assert conn.cmd("INCRBYFLOAT", "k", "nan") == err_bytes(NOT_FLOAT)
    assert conn.cmd("EXISTS", "k") == b":0\r\n"
    conn.cmd("SET", "k", "1")
    assert conn.cmd("INCRBYFLOAT", "k", "inf") == err_bytes("ERR increment would produce NaN or Infinity")
    assert conn.cmd("INCRBYFLOAT", "k", "-inf") == err_bytes("ERR increment would produce NaN or Infinity")
    for val in ["abc", " 1.5", "1.5 ", ""]:
        conn.cmd("SET", "k", val)
        assert conn.cmd("INCRBYFLOAT", "k", "1") == err_bytes(NOT_FLOAT), val


def test_incrbyfloat_keeps_ttl_and_incr_refuses_float(conn):
    conn.cmd("SET", "k", "5", "EX", "100")
    assert conn.cmd("INCRBYFLOAT", "k", "1.5") == b"$3\r\n6.5\r\n"
    assert 99 <= conn.call("TTL", "k") <= 100
    assert conn.cmd("INCR", "k") == err_bytes(NOT_INT)


# ------------------------------------------------------------ APPEND STRLEN

def test_append_strlen(conn):
    assert conn.cmd("STRLEN", "k") == b":0\r\n"
    assert conn.cmd("APPEND", "k", "Hello") == b":5\r\n"
    assert conn.cmd("APPEND", "k", " World") == b":11\r\n"
    assert conn.cmd("GET", "k") == b"$11\r\nHello World\r\n"
    assert conn.cmd("STRLEN", "k") == b":11\r\n"
    assert conn.cmd("APPEND", "k", "") == b":11\r\n"
    assert conn.cmd("APPEND", "e", "") == b":0\r\n"
    assert conn.cmd("EXISTS", "e") == b":1\r\n"  # APPEND creates the key even for ""
    assert conn.cmd("APPEND", "b", b"\x00\r\n") == b":3\r\n"
    assert conn.cmd("GET", "b") == b"$3\r\n\x00\r\n\r\n"


def test_append_to_integer_value_and_keeps_ttl(conn):
    conn.cmd("SET", "n", "12", "EX", "100")
    conn.cmd("INCR", "n")
    assert conn.cmd("APPEND", "n", "4") == b":3\r\n"
    assert conn.cmd("GET", "n") == b"$3\r\n134\r\n"
    assert conn.cmd("INCR", "n") == b":135\r\n"
    assert 99 <= conn.call("TTL", "n") <= 100


# ------------------------------------------------------ SETRANGE GETRANGE

def test_setrange_basic_and_padding(conn):
    conn.cmd("SET", "k", "Hello World")
    assert conn.cmd("SETRANGE", "k", "6", "Redis") == b":11\r\n"
    assert conn.cmd("GET", "k") == b"$11\r\nHello Redis\r\n"
    assert conn.cmd("SETRANGE", "k", "15", "!") == b":16\r\n"
    assert conn.cmd("GET", "k") == b"$16\r\nHello Redis\x00\x00\x00\x00!\r\n"
    assert conn.cmd("SETRANGE", "new", "5", "hi") == b":7\r\n"
    assert conn.cmd("GET", "new") == b"$7\r\n\x00\x00\x00\x00\x00hi\r\n"


def test_setrange_empty_value(conn):
    # on a missing key: 0 and the key is not created
    assert conn.cmd("SETRANGE", "m", "0", "") == b":0\r\n"
    assert conn.cmd("SETRANGE", "m", "5", "") == b":0\r\n"
    assert conn.cmd("SETRANGE", "m", "536870912", "") == b":0\r\n"
    assert conn.cmd("EXISTS", "m") == b":0\r\n"
    # on an existing key: returns the current length, no padding added
    conn.cmd("SET", "k", "abc")
    assert conn.cmd("SETRANGE", "k", "10", "") == b":3\r\n"
    assert conn.cmd("SETRANGE", "k", "536870912", "") == b":3\r\n"
    assert conn.cmd("GET", "k") == b"$3\r\nabc\r\n"


def test_setrange_offset_limits(conn):
    conn.cmd("SET", "k", "abc")
    assert conn.cmd("SETRANGE", "k", "-1", "x") == err_bytes("ERR offset is out of range")
    assert conn.cmd("SETRANGE", "k", "-1", "") == err_bytes("ERR offset is out of range")
    assert conn.cmd("SETRANGE", "m", "-1", "") == err_bytes("ERR offset is out of range")
    too_big = err_bytes("ERR string exceeds maximum allowed size (proto-max-bulk-len)")
    assert conn.cmd("SETRANGE", "k", "536870912", "x") == too_big
    assert conn.cmd("SETRANGE", "k", "536870911", "xy") == too_big
    assert conn.cmd("SETRANGE", "m", "536870912", "x") == too_big
    assert conn.cmd("SETRANGE", "k", "abc", "x") == err_bytes(NOT_INT)
    assert conn.cmd("SETRANGE", "k", "9223372036854775808", "x") == err_bytes(NOT_INT)
    assert conn.cmd("EXISTS", "m") == b":0\r\n"
    assert conn.cmd("GET", "k") == b"$3\r\nabc\r\n"


def test_getrange(conn):
    conn.cmd("SET", "s", "This is a string")
    cases = [
        (("0", "3"), b"This"), (("-3", "-1"), b"ing"), (("0", "-1"), b"This is a string"),
        (("10", "100"), b"string"), (("5", "3"), b""), (("100", "200"), b""),
        (("-100", "2"), b"Thi"), (("-1", "-100"), b""),
        (("0", "9223372036854775807"), b"This is a string"),
        (("-9223372036854775808", "-1"), b"This is a string"),
    ]
    for (start, end), expect in cases:
        assert conn.cmd("GETRANGE", "s", start, end) == bulk(expect), (start, end)


def test_getrange_end_clamped_to_zero_in_70(conn):
    # Redis 7.0 clamps a negative end below -len to 0, so one byte comes back.
    # (Redis 8 changed this to an empty string; we assert 7.0.)
    conn.cmd("SET", "s", "This is a string")
    assert conn.cmd("GETRANGE", "s", "0", "-100") == b"$1\r\nT\r\n"
    assert conn.cmd("GETRANGE", "s", "-100", "-50") == b"$1\r\nT\r\n"


def test_getrange_missing_empty_and_errors(conn):
    assert conn.cmd("GETRANGE", "missing", "0", "-1") == b"$0\r\n\r\n"
    conn.cmd("SET", "e", "")
    assert conn.cmd("GETRANGE", "e", "0", "-1") == b"$0\r\n\r\n"
    assert conn.cmd("GETRANGE", "e", "-1", "-1") == b"$0\r\n\r\n"
    conn.cmd("SET", "s", "abc")
    assert conn.cmd("GETRANGE", "s", "a", "1") == err_bytes(NOT_INT)
    assert conn.cmd("GETRANGE", "s", "0", "1.5") == err_bytes(NOT_INT)


def test_getrange_on_integer_encoded_value(conn):
    conn.cmd("SET", "n", "12345")
    conn.cmd("INCR", "n")
    assert conn.cmd("GETRANGE", "n", "1", "-2") == b"$3\r\n234\r\n"
    assert conn.cmd("STRLEN", "n") == b":5\r\n"


# ------------------------------------------------------------------------ LCS

def test_lcs_string_and_len(conn):
    conn.cmd("MSET", "a", "ohmytext", "b", "mynewtext")
    assert conn.cmd("LCS", "a", "b") == b"$6\r\nmytext\r\n"
    assert conn.cmd("LCS", "a", "b", "LEN") == b":6\r\n"
    assert conn.cmd("LCS", "a", "b", "WITHMATCHLEN") == b"$6\r\nmytext\r\n"  # IDX only
    # A missing key is an empty string.
    assert conn.cmd("LCS", "a", "missing") == b"$0\r\n\r\n"
    assert conn.cmd("LCS", "missing", "a", "LEN") == b":0\r\n"


# Two matches, each [[start, end] in a, [start, end] in b].
LCS_IDX_RANGES = (b"*2\r\n" + b"*2\r\n*2\r\n:4\r\n:7\r\n*2\r\n:5\r\n:8\r\n"
                  + b"*2\r\n*2\r\n:2\r\n:3\r\n*2\r\n:0\r\n:1\r\n")


def test_lcs_idx_is_a_map_in_resp3(conn):
    conn.cmd("MSET", "a", "ohmytext", "b", "mynewtext")
    tail = b"$3\r\nlen\r\n:6\r\n"
    assert conn.cmd("LCS", "a", "b", "IDX") == b"*4\r\n$7\r\nmatches\r\n" + LCS_IDX_RANGES + tail
    conn.cmd("HELLO", "3")
    assert conn.cmd("LCS", "a", "b", "IDX") == b"%2\r\n$7\r\nmatches\r\n" + LCS_IDX_RANGES + tail


def test_lcs_idx_match_lengths_and_minimum(conn):
    conn.cmd("MSET", "a", "ohmytext", "b", "mynewtext")
    assert conn.call("LCS", "a", "b", "IDX", "WITHMATCHLEN") == [
        b"matches", [[[4, 7], [5, 8], 4], [[2, 3], [0, 1], 2]], b"len", 6]
    assert conn.call("LCS", "a", "b", "IDX", "MINMATCHLEN", "4", "WITHMATCHLEN") == [
        b"matches", [[[4, 7], [5, 8], 4]], b"len", 6]
    # A negative minimum is no minimum.
    assert conn.call("LCS", "a", "b", "idx", "minmatchlen", "-3") == [
        b"matches", [[[4, 7], [5, 8]], [[2, 3], [0, 1]]], b"len", 6]
    assert conn.call("LCS", "a", "missing", "IDX") == [b"matches", [], b"len", 0]


def test_lcs_agrees_with_a_reference(conn):
    import random
    rng = random.Random(7)
    for _ in range(20):
        x = "".join(rng.choice("ACGT") for _ in range(rng.randrange(0, 60)))
        y = "".join(rng.choice("ACGT") for _ in range(rng.randrange(0, 60)))
        conn.cmd("MSET", "x", x, "y", y)
        # The length by the textbook recurrence.
        prev = [0] * (len(y) + 1)
        for cx in x:
            row = [0]
            for j, cy in enumerate(y):
                row.append(prev[j] + 1 if cx == cy else max(prev[j + 1], row[j]))
            prev = row
        text = conn.call("LCS", "x", "y").decode()
        assert len(text) == prev[-1] == conn.call("LCS", "x", "y", "LEN")
        for s in (x, y):  # a subsequence of both
            it = iter(s)
            assert all(c in it for c in text)


def test_lcs_errors(conn):
    conn.cmd("SET", "a", "abc")
    conn.cmd("HSET", "h", "f", "v")
    not_strings = err_bytes("ERR The specified keys must contain string values")
    assert conn.cmd("LCS", "a", "h") == not_strings
    assert conn.cmd("LCS", "h", "missing", "LEN") == not_strings
    assert conn.cmd("LCS", "h", "a", "BADOPT") == not_strings  # the types are checked first
    assert conn.cmd("LCS", "a") == err_bytes(arity("lcs"))
    assert conn.cmd("LCS", "a", "a", "BADOPT") == err_bytes(SYNTAX)
    assert conn.cmd("LCS", "a", "a", "MINMATCHLEN") == err_bytes(SYNTAX)
    assert conn.cmd("LCS", "a", "a", "MINMATCHLEN", "x") == err_bytes(NOT_INT)
    both = err_bytes("ERR If you want both the length and indexes, please just use IDX.")
    assert conn.cmd("LCS", "a", "a", "LEN", "IDX") == both
    assert conn.cmd("LCS", "a", "a", "IDX", "LEN") == both


def test_lcs_refuses_a_table_over_proto_max_bulk_len(conn):
    # 12,001 x 12,001 cells of 4 bytes: 576 MB, over the 512 MB default.
    conn.cmd("MSET", "a", "x" * 12000, "b", "y" * 12000)
    too_large = err_bytes(
        "ERR Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len")
    assert conn.cmd("LCS", "a", "b") == too_large
    assert conn.cmd("LCS", "a", "b", "LEN") == too_large


# ------------------------------------------------------------- via redis-py

def test_redis_py_basic_types(r):
    assert r.set("k", "v") is True
    assert r.get("k") == v(r, "v")
    assert r.get("missing") is None
    assert r.set("k", "x", nx=True) is None
    assert r.set("k", "v2", get=True) == v(r, "v")
    assert r.getset("k", "v3") == v(r, "v2")
    assert r.getdel("k") == v(r, "v3")
    assert r.getdel("k") is None
    assert r.mset({"a": "1", "b": "2"}) is True
    assert r.mget(["a", "missing", "b"]) == [v(r, "1"), None, v(r, "2")]
    assert r.msetnx({"a": "9", "c": "3"}) is False
    assert r.setnx("c", "3") is True
    assert r.setnx("c", "4") is False


def test_redis_py_counters(r):
    assert r.incr("n") == 1
    assert r.incrby("n", 41) == 42
    assert r.decr("n") == 41
    assert r.decrby("n", 40) == 1
    f = r.incrbyfloat("f", 1.5)
    assert isinstance(f, float) and f == 1.5
    assert r.incrbyfloat("f", "2.25") == 3.75
    assert r.get("f") == v(r, "3.75")
    assert r.append("s", "ab") == 2
    assert r.strlen("s") == 2
    assert r.setrange("s", 4, "z") == 5
    assert r.get("s") == v(r, b"ab\x00\x00z")
    assert r.getrange("s", 0, 1) == v(r, "ab")
    with pytest.raises(redis.ResponseError, match="^value is not an integer or out of range$"):
        r.incr("s")
    r.set("n", 2**63 - 1)
    with pytest.raises(redis.ResponseError, match="^increment or decrement would overflow$"):
        r.incr("n")


def test_redis_py_expiry_options(r):
    assert r.set("k", "v", ex=100) is True
    assert 99 <= r.ttl("k") <= 100
    assert r.set("k", "v", px=100000) is True
    assert 99000 <= r.pttl("k") <= 100000
    assert r.set("k", "v2", keepttl=True) is True
    assert r.ttl("k") > 0
    assert r.getex("k", persist=True) == v(r, "v2")
    assert r.ttl("k") == -1
    assert r.getex("k", ex=30) == v(r, "v2")
    assert 29 <= r.ttl("k") <= 30
    assert r.setex("e", 100, "v") is True
    assert r.psetex("p", 100000, "v") is True
    with pytest.raises(redis.ResponseError, match="^invalid expire time in 'set' command$"):
        r.set("k", "v", ex=0)
    with pytest.raises(redis.ResponseError, match="^syntax error$"):
        r.execute_command("SET", "k", "v", "NX", "XX")


def test_redis_py_lcs(r):
    r.mset({"a": "ohmytext", "b": "mynewtext"})
    assert r.lcs("a", "b") == v(r, "mytext")
    assert r.lcs("a", "b", len=True) == 6
    got = r.lcs("a", "b", idx=True, minmatchlen=4, withmatchlen=True)
    matches = [[[4, 7], [5, 8], 4]]
    if r.proto == 3:
        assert got == {v(r, "matches"): matches, v(r, "len"): 6}
    else:
        assert got == [v(r, "matches"), matches, v(r, "len"), 6]


def test_redis_py_wrongtype(r):
    r.hset("l", "f", "x")
    with pytest.raises(redis.ResponseError) as ei:
        r.get("l")
    assert str(ei.value) == WRONGTYPE


def test_pipelined_commands_reply_in_order(conn):
    payload = b"".join(
        [b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\n0\r\n"] +
        [b"*2\r\n$4\r\nINCR\r\n$1\r\nk\r\n"] * 100 +
        [b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n"])
    conn.send_raw(payload)
    assert conn.read_raw() == b"+OK\r\n"
    for i in range(1, 101):
        assert conn.read_raw() == b":%d\r\n" % i
    assert conn.read_raw() == b"$3\r\n100\r\n"


def test_inline_commands(conn):
    assert conn.inline("SET k hello") == b"+OK\r\n"
    assert conn.inline("GET k") == b"$5\r\nhello\r\n"
    assert conn.inline('SET k2 "a b"') == b"+OK\r\n"
    assert conn.inline("STRLEN k2") == b":3\r\n"


def test_incrbyfloat_keeps_redis_precision(conn):
    """Redis adds in long double and prints 17 decimals: a sum and its
    opposite give the start value back, and no negative zero."""
    assert conn.call("INCRBYFLOAT", "f", "0.024390243902439025") == b"0.02439024390243902"
    assert conn.call("INCRBYFLOAT", "f", "-0.024390243902439025") == b"0"
    conn.call("SET", "x", "3")
    assert conn.call("INCRBYFLOAT", "x", "1e-10") == b"3.0000000001"
    assert conn.call("INCRBYFLOAT", "x", "-1e-10") == b"3"
    assert conn.call("HINCRBYFLOAT", "h", "f", "1.23") == b"1.23"
    assert conn.call("HINCRBYFLOAT", "h", "f", "0.77") == b"2"
    assert conn.call("HINCRBYFLOAT", "h", "f", "-0.1") == b"1.9"


def test_setbit_and_getbit(conn):
    assert conn.call("SETBIT", "b", "7", "1") == 0
    assert conn.call("GET", "b") == b"\x01"
    assert conn.call("SETBIT", "b", "7", "1") == 1
    assert conn.call("SETBIT", "b", "100", "1") == 0
    assert conn.call("STRLEN", "b") == 13
    assert [conn.call("GETBIT", "b", o) for o in (7, 100, 101, 10_000)] == [1, 1, 0, 0]
    assert conn.call("SETBIT", "b", "7", "0") == 1
    assert conn.call("GET", "b")[0] == 0
    assert conn.call("SETBIT", "b", "4294967296", "1") == RespError(
        "ERR bit offset is not an integer or out of range")
    assert conn.call("SETBIT", "b", "0", "2") == RespError("ERR bit is not an integer or out of range")
    conn.call("HSET", "h", "f", "v")
    assert conn.call("SETBIT", "h", "0", "1") == RespError(
        "WRONGTYPE Operation against a key holding the wrong kind of value")
