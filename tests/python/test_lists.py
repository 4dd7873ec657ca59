"""List commands: LPUSH RPUSH LPUSHX RPUSHX LPOP RPOP LLEN LINDEX LRANGE LSET
LINSERT LREM LTRIM LPOS LMOVE RPOPLPUSH LMPOP and the blocking BLPOP BRPOP
BLMOVE BRPOPLPUSH BLMPOP. Redis 7.0's exact replies on the wire (RESP2 and
RESP3) and through redis-py; arity and WRONGTYPE errors both ways; a list
whose last element goes deletes its key; keyspace commands on lists (EXPIRE,
RENAME, COPY, DEL, SCAN TYPE, DUMP/RESTORE); a 1,000-element list; elements
of every size and binary content; keyspace notifications. Encodings are not
asserted (Redis 7.0 says quicklist where 7.2 says listpack).
Also run against redis-server (DELTAGRID_TEST_TARGET=redis).

No test sleeps and hopes: a client is known to be blocked when CLIENT LIST
shows it with flag `b` (and INFO counts it in blocked_clients), as in
test_blocking.py."""
import time

import pytest

from helpers import NOT_INT, SYNTAX, WRONGTYPE, arity, v, wait_until
from helpers_clients import blocked_clients, blocked_ids, connect, got, wait_blocked
from helpers_net import RespConn, RespError, bulk, bulks, err_bytes

pytestmark = pytest.mark.shared_server

NULL = b"$-1\r\n"
NULL2 = b"*-1\r\n"   # nil array (RESP2)
NULL3 = b"_\r\n"     # RESP3 null
EMPTY = b"*0\r\n"
NOT_FLOAT = "ERR timeout is not a float or out of range"
NEGATIVE = "ERR timeout is negative"
NUMKEYS = "ERR numkeys should be greater than 0"
POSITIVE = "ERR value is out of range, must be positive"


def lst(r, key):
    """The whole list as bytes, whatever the client decodes."""
    return [x if isinstance(x, bytes) else x.encode() for x in r.lrange(key, 0, -1)]


def bl(*xs):
    return [x.encode() for x in xs]


def mpopped(key, *items):
    """LMPOP/BLMPOP's reply: [key, [element, ...]]."""
    return b"*2\r\n" + bulk(key) + bulks(*items)






# -- errors ------------------------------------------------------------------

def test_arity(conn):
    for args in [("LPUSH", "l"), ("RPUSH", "l"), ("LPUSHX", "l"), ("RPUSHX", "l"),
                 ("LPOP",), ("RPOP",), ("LLEN",), ("LLEN", "a", "b"),
                 ("LINDEX", "l"), ("LINDEX", "l", "0", "1"), ("LRANGE", "l", "0"),
                 ("LSET", "l", "0"), ("LINSERT", "l", "BEFORE", "a"), ("LREM", "l", "0"),
                 ("LTRIM", "l", "0"), ("LPOS", "l"), ("LMOVE", "a", "b", "LEFT"),
                 ("RPOPLPUSH", "a"), ("RPOPLPUSH", "a", "b", "c"), ("LMPOP", "1", "l"),
                 ("BLPOP", "l"), ("BRPOP", "l"), ("BLMOVE", "a", "b", "LEFT", "LEFT"),
                 ("BRPOPLPUSH", "a", "b"), ("BLMPOP", "0", "1", "l")]:
        assert conn.cmd(*args) == err_bytes(arity(args[0].lower())), args
    assert conn.cmd("LPOP", "l", "1", "2") == err_bytes(arity("lpop"))
    assert conn.cmd("RPOP", "l", "1", "2") == err_bytes(arity("rpop"))


def test_list_commands_on_a_string_are_wrongtype(conn):
    conn.cmd("SET", "s", "x")
    for args in [("LPUSH", "s", "a"), ("RPUSH", "s", "a"), ("LPUSHX", "s", "a"),
                 ("RPUSHX", "s", "a"), ("LPOP", "s"), ("RPOP", "s"), ("LPOP", "s", "2"),
                 ("LPOP", "s", "0"), ("RPOP", "s", "2"), ("LLEN", "s"), ("LINDEX", "s", "0"),
                 ("LRANGE", "s", "0", "-1"), ("LSET", "s", "0", "x"),
                 ("LINSERT", "s", "BEFORE", "a", "b"), ("LREM", "s", "0", "a"),
                 ("LTRIM", "s", "0", "1"), ("LPOS", "s", "a"), ("LMOVE", "s", "d", "LEFT", "LEFT"),
                 ("RPOPLPUSH", "s", "d"), ("LMPOP", "1", "s", "LEFT"), ("BLPOP", "s", "0"),
                 ("BRPOP", "s", "0"), ("BLMOVE", "s", "d", "LEFT", "LEFT", "0"),
                 ("BRPOPLPUSH", "s", "d", "0"), ("BLMPOP", "0", "1", "s", "LEFT")]:
        assert conn.cmd(*args) == err_bytes(WRONGTYPE), args
    assert conn.cmd("GET", "s") == bulk("x")
    assert conn.cmd("EXISTS", "d") == b":0\r\n"


def test_other_commands_on_a_list_are_wrongtype(conn):
    conn.cmd("RPUSH", "l", "1", "2")
    for args in [("GET", "l"), ("INCR", "l"), ("APPEND", "l", "x"), ("STRLEN", "l"),
                 ("GETRANGE", "l", "0", "1"), ("SADD", "l", "a"), ("SMEMBERS", "l"),
                 ("SCARD", "l"), ("HSET", "l", "f", "v"), ("HGET", "l", "f"),
                 ("HGETALL", "l"), ("ZADD", "l", "1", "a"), ("ZRANGE", "l", "0", "-1"),
                 ("PFADD", "l", "a")]:
        assert conn.cmd(*args) == err_bytes(WRONGTYPE), args
    assert conn.cmd("LRANGE", "l", "0", "-1") == bulks("1", "2")
    # SET replaces whatever the key holds.
    assert conn.cmd("SET", "l", "v") == b"+OK\r\n"
    assert conn.cmd("TYPE", "l") == b"+string\r\n"


# -- push --------------------------------------------------------------------

def test_push_order_and_counts(r):
    assert r.rpush("l", "a", "b", "c") == 3
    assert r.lpush("l", "x", "y") == 5
    assert lst(r, "l") == bl("y", "x", "a", "b", "c")
    assert r.rpush("l", "z") == 6
    assert r.lpush("l", "a") == 7
    assert lst(r, "l") == bl("a", "y", "x", "a", "b", "c", "z")
    assert r.llen("l") == 7
    assert r.type("l") == v(r, "list")
    # A push to a new key creates it; duplicates are kept.
    assert r.lpush("m", "d", "d") == 2
    assert lst(r, "m") == bl("d", "d")


def test_pushx_only_on_an_existing_list(r):
    assert r.lpushx("l", "a") == 0
    assert r.rpushx("l", "a", "b") == 0
    assert r.exists("l") == 0
    r.rpush("l", "m")
    assert r.lpushx("l", "b", "a") == 3
    assert r.rpushx("l", "y", "z") == 5
    assert lst(r, "l") == bl("a", "b", "m", "y", "z")


def test_pushx_wire(conn):
    assert conn.cmd("LPUSHX", "l", "a") == b":0\r\n"
    assert conn.cmd("RPUSHX", "l", "a") == b":0\r\n"
    assert conn.cmd("TYPE", "l") == b"+none\r\n"
    assert conn.cmd("RPUSH", "l", "a", "b") == b":2\r\n"
    assert conn.cmd("RPUSHX", "l", "c") == b":3\r\n"


# -- pop ---------------------------------------------------------------------

def test_pop_without_count(conn):
    assert conn.cmd("LPOP", "nokey") == NULL
    assert conn.cmd("RPOP", "nokey") == NULL
    conn.cmd("RPUSH", "l", "a", "b", "c")
    assert conn.cmd("LPOP", "l") == bulk("a")
    assert conn.cmd("RPOP", "l") == bulk("c")
    assert conn.cmd("LLEN", "l") == b":1\r\n"
    assert conn.cmd("RPOP", "l") == bulk("b")
    assert conn.cmd("EXISTS", "l") == b":0\r\n"
    assert conn.cmd("LPOP", "l") == NULL


@pytest.mark.parametrize("resp3", [False, True], ids=["resp2", "resp3"])
def test_pop_with_count(conn, resp3):
    if resp3:
        conn.call("HELLO", "3")
    null_array = NULL3 if resp3 else NULL2
    assert conn.cmd("LPOP", "nokey", "2") == null_array
    assert conn.cmd("RPOP", "nokey", "2") == null_array
    assert conn.cmd("LPOP", "nokey", "0") == null_array
    conn.cmd("RPUSH", "l", "a", "b", "c", "d", "e")
    assert conn.cmd("LPOP", "l", "0") == EMPTY
    assert conn.cmd("LPOP", "l", "2") == bulks("a", "b")
    assert conn.cmd("RPOP", "l", "1") == bulks("e")
    assert conn.cmd("RPOP", "l", "10") == bulks("d", "c")
    assert conn.cmd("EXISTS", "l") == b":0\r\n"
    assert conn.cmd("LPOP", "l", "1") == null_array
    assert conn.cmd("LPOP", "l") == (NULL3 if resp3 else NULL)


def test_pop_count_errors(conn):
    conn.cmd("RPUSH", "l", "a")
    for cmd in ("LPOP", "RPOP"):
        assert conn.cmd(cmd, "l", "-1") == err_bytes(POSITIVE)
        assert conn.cmd(cmd, "l", "abc") == err_bytes(POSITIVE)
    assert conn.cmd("LLEN", "l") == b":1\r\n"


def test_pop_through_redis_py(r):
    r.rpush("l", "1", "2", "3", "4")
    assert r.lpop("l") == v(r, "1")
    assert r.rpop("l") == v(r, "4")
    assert r.lpop("l", 5) == v(r, ["2", "3"])
    assert r.lpop("l") is None
    assert r.rpop("l", 2) is None


# -- read --------------------------------------------------------------------

def test_llen_and_lindex(conn):
    assert conn.cmd("LLEN", "nokey") == b":0\r\n"
    assert conn.cmd("LINDEX", "nokey", "0") == NULL
    conn.cmd("RPUSH", "l", "a", "b", "c")
    assert conn.cmd("LLEN", "l") == b":3\r\n"
    assert conn.cmd("LINDEX", "l", "0") == bulk("a")
    assert conn.cmd("LINDEX", "l", "2") == bulk("c")
    assert conn.cmd("LINDEX", "l", "-1") == bulk("c")
    assert conn.cmd("LINDEX", "l", "-3") == bulk("a")
    assert conn.cmd("LINDEX", "l", "3") == NULL
    assert conn.cmd("LINDEX", "l", "-4") == NULL
    assert conn.cmd("LINDEX", "l", "abc") == err_bytes(NOT_INT)


def test_lrange(r):
    r.rpush("l", "a", "b", "c", "d", "e")
    assert lst(r, "l") == bl("a", "b", "c", "d", "e")
    assert r.lrange("l", 1, 3) == v(r, ["b", "c", "d"])
    assert r.lrange("l", -2, -1) == v(r, ["d", "e"])
    assert r.lrange("l", -100, 1) == v(r, ["a", "b"])
    assert r.lrange("l", 3, 100) == v(r, ["d", "e"])
    assert r.lrange("l", 0, -100) == []
    assert r.lrange("l", 5, 10) == []
    assert r.lrange("l", 3, 1) == []
    assert r.lrange("l", -1, -2) == []
    assert r.lrange("l", 2, 2) == v(r, ["c"])
    assert r.lrange("nokey", 0, -1) == []


def test_lrange_wire(conn):
    assert conn.cmd("LRANGE", "nokey", "0", "-1") == EMPTY
    conn.cmd("RPUSH", "l", "a", "b")
    assert conn.cmd("LRANGE", "l", "0", "-1") == bulks("a", "b")
    assert conn.cmd("LRANGE", "l", "1", "0") == EMPTY
    assert conn.cmd("LRANGE", "l", "a", "1") == err_bytes(NOT_INT)
    assert conn.cmd("LRANGE", "l", "0", "1.5") == err_bytes(NOT_INT)


# -- write in place ----------------------------------------------------------

def test_lset(conn):
    assert conn.cmd("LSET", "nokey", "0", "x") == err_bytes("ERR no such key")
    assert conn.cmd("EXISTS", "nokey") == b":0\r\n"
    conn.cmd("RPUSH", "l", "a", "b", "c")
    assert conn.cmd("LSET", "l", "0", "A") == b"+OK\r\n"
    assert conn.cmd("LSET", "l", "-1", "C") == b"+OK\r\n"
    assert conn.cmd("LSET", "l", "1", "") == b"+OK\r\n"
    assert conn.cmd("LRANGE", "l", "0", "-1") == bulks("A", "", "C")
    assert conn.cmd("LSET", "l", "3", "x") == err_bytes("ERR index out of range")
    assert conn.cmd("LSET", "l", "-4", "x") == err_bytes("ERR index out of range")
    assert conn.cmd("LSET", "l", "abc", "x") == err_bytes(NOT_INT)
    assert conn.cmd("LRANGE", "l", "0", "-1") == bulks("A", "", "C")


def test_linsert(conn):
    conn.cmd("RPUSH", "l", "a", "b", "a")
    assert conn.cmd("LINSERT", "l", "BEFORE", "b", "x") == b":4\r\n"
    assert conn.cmd("LINSERT", "l", "after", "b", "y") == b":5\r\n"
    # The first occurrence of the pivot counts.
    assert conn.cmd("LINSERT", "l", "AFTER", "a", "z") == b":6\r\n"
    assert conn.cmd("LRANGE", "l", "0", "-1") == bulks("a", "z", "x", "b", "y", "a")
    assert conn.cmd("LINSERT", "l", "BEFORE", "a", "h") == b":7\r\n"
    assert conn.cmd("LINSERT", "l", "AFTER", "y", "t") == b":8\r\n"
    assert conn.cmd("LRANGE", "l", "0", "-1") == bulks("h", "a", "z", "x", "b", "y", "t", "a")
    assert conn.cmd("LINSERT", "l", "BEFORE", "nope", "q") == b":-1\r\n"
    assert conn.cmd("LINSERT", "nokey", "BEFORE", "a", "q") == b":0\r\n"
    assert conn.cmd("EXISTS", "nokey") == b":0\r\n"
    assert conn.cmd("LINSERT", "l", "MIDDLE", "a", "q") == err_bytes(SYNTAX)
    assert conn.cmd("LLEN", "l") == b":8\r\n"


def test_lrem(r):
    r.rpush("l", "a", "b", "a", "c", "a", "b", "a")
    assert r.lrem("l", 2, "a") == 2
    assert lst(r, "l") == bl("b", "c", "a", "b", "a")
    assert r.lrem("l", -1, "b") == 1
    assert lst(r, "l") == bl("b", "c", "a", "a")
    assert r.lrem("l", -5, "a") == 2
    assert lst(r, "l") == bl("b", "c")
    assert r.lrem("l", 0, "zz") == 0
    r.rpush("l", "b", "b")
    assert r.lrem("l", 0, "b") == 3
    assert lst(r, "l") == bl("c")
    assert r.lrem("nokey", 0, "a") == 0
    assert r.lrem("l", 0, "c") == 1
    assert r.exists("l") == 0


def test_lrem_wire(conn):
    conn.cmd("RPUSH", "l", "x", "y", "x")
    assert conn.cmd("LREM", "l", "-1", "x") == b":1\r\n"
    assert conn.cmd("LRANGE", "l", "0", "-1") == bulks("x", "y")
    assert conn.cmd("LREM", "l", "abc", "x") == err_bytes(NOT_INT)
    assert conn.cmd("LREM", "nokey", "1", "x") == b":0\r\n"


def test_ltrim(r):
    r.rpush("l", *"abcdefg")
    assert r.ltrim("l", 1, -2) in (True, b"OK", "OK")
    assert lst(r, "l") == bl(*"bcdef")
    r.ltrim("l", -3, 100)
    assert lst(r, "l") == bl(*"def")
    r.ltrim("l", -100, 1)
    assert lst(r, "l") == bl(*"de")
    r.ltrim("l", 0, 0)
    assert lst(r, "l") == bl("d")
    r.ltrim("l", 1, 0)
    assert r.exists("l") == 0
    r.rpush("m", "a", "b")
    r.ltrim("m", 5, 10)
    assert r.exists("m") == 0
    r.rpush("n", "a", "b")
    r.ltrim("n", 0, -3)
    assert r.exists("n") == 0
    r.ltrim("nokey", 0, 1)
    assert r.exists("nokey") == 0


def test_ltrim_wire(conn):
    conn.cmd("RPUSH", "l", "a", "b", "c")
    assert conn.cmd("LTRIM", "l", "0", "1") == b"+OK\r\n"
    assert conn.cmd("LTRIM", "nokey", "0", "1") == b"+OK\r\n"
    assert conn.cmd("LTRIM", "l", "a", "1") == err_bytes(NOT_INT)
    assert conn.cmd("LTRIM", "l", "2", "1") == b"+OK\r\n"
    assert conn.cmd("TYPE", "l") == b"+none\r\n"
    assert conn.cmd("EXISTS", "l") == b":0\r\n"


# -- LPOS --------------------------------------------------------------------

def test_lpos(r):
    # index:      0    1    2    3    4    5    6
    r.rpush("l", "a", "b", "c", "a", "b", "c", "a")
    assert r.lpos("l", "a") == 0
    assert r.lpos("l", "c") == 2
    assert r.lpos("l", "zz") is None
    assert r.lpos("l", "a", rank=2) == 3
    assert r.lpos("l", "a", rank=3) == 6
    assert r.lpos("l", "a", rank=4) is None
    assert r.lpos("l", "a", rank=-1) == 6
    assert r.lpos("l", "a", rank=-3) == 0
    assert r.lpos("l", "b", rank=-1) == 4
    assert r.lpos("l", "a", count=2) == [0, 3]
    assert r.lpos("l", "a", count=0) == [0, 3, 6]
    assert r.lpos("l", "a", count=10) == [0, 3, 6]
    assert r.lpos("l", "a", rank=-1, count=2) == [6, 3]
    assert r.lpos("l", "a", rank=2, count=0) == [3, 6]
    assert r.lpos("l", "zz", count=3) == []
    # MAXLEN: compare at most that many elements (0: all).
    assert r.lpos("l", "c", maxlen=2) is None
    assert r.lpos("l", "c", maxlen=3) == 2
    assert r.lpos("l", "a", count=0, maxlen=4) == [0, 3]
    assert r.lpos("l", "a", rank=-1, count=0, maxlen=2) == [6]
    assert r.lpos("l", "a", count=0, maxlen=0) == [0, 3, 6]
    assert r.lpos("nokey", "a") is None
    assert r.lpos("nokey", "a", count=2) == []


def test_lpos_wire_and_errors(conn):
    conn.cmd("RPUSH", "l", "a", "b", "a")
    assert conn.cmd("LPOS", "l", "a") == b":0\r\n"
    assert conn.cmd("LPOS", "l", "z") == NULL
    assert conn.cmd("LPOS", "l", "a", "COUNT", "0") == b"*2\r\n:0\r\n:2\r\n"
    assert conn.cmd("LPOS", "l", "z", "COUNT", "2") == EMPTY
    assert conn.cmd("LPOS", "nokey", "a") == NULL
    assert conn.cmd("LPOS", "nokey", "a", "COUNT", "0") == EMPTY
    assert conn.cmd("LPOS", "l", "a", "RANK", "0") == err_bytes(
        "ERR RANK can't be zero: use 1 to start from the first match, 2 from the second ... "
        "or use negative to start from the end of the list")
    assert conn.cmd("LPOS", "l", "a", "COUNT", "-1") == err_bytes("ERR COUNT can't be negative")
    assert conn.cmd("LPOS", "l", "a", "MAXLEN", "-1") == err_bytes("ERR MAXLEN can't be negative")
    assert conn.cmd("LPOS", "l", "a", "RANK", "x") == err_bytes(NOT_INT)
    assert conn.cmd("LPOS", "l", "a", "RANK") == err_bytes(SYNTAX)
    assert conn.cmd("LPOS", "l", "a", "FOO", "1") == err_bytes(SYNTAX)


# -- moves -------------------------------------------------------------------

@pytest.mark.parametrize("wherefrom,whereto,moved,src,dst", [
    ("LEFT", "LEFT", "a", ["b", "c"], ["a", "x", "y"]),
    ("LEFT", "RIGHT", "a", ["b", "c"], ["x", "y", "a"]),
    ("RIGHT", "LEFT", "c", ["a", "b"], ["c", "x", "y"]),
    ("RIGHT", "RIGHT", "c", ["a", "b"], ["x", "y", "c"]),
])
def test_lmove_directions(conn, wherefrom, whereto, moved, src, dst):
    conn.cmd("RPUSH", "src", "a", "b", "c")
    conn.cmd("RPUSH", "dst", "x", "y")
    assert conn.cmd("LMOVE", "src", "dst", wherefrom, whereto) == bulk(moved)
    assert conn.cmd("LRANGE", "src", "0", "-1") == bulks(*src)
    assert conn.cmd("LRANGE", "dst", "0", "-1") == bulks(*dst)


def test_lmove_through_redis_py(r):
    r.rpush("src", "1", "2")
    assert r.lmove("src", "new", "RIGHT", "LEFT") == v(r, "2")
    assert r.type("new") == v(r, "list")
    assert r.lmove("src", "new", "LEFT", "RIGHT") == v(r, "1")
    assert r.exists("src") == 0
    assert lst(r, "new") == bl("2", "1")
    assert r.lmove("src", "new") is None


def test_lmove_same_key_rotates(conn):
    conn.cmd("RPUSH", "l", "a", "b", "c")
    assert conn.cmd("LMOVE", "l", "l", "LEFT", "RIGHT") == bulk("a")
    assert conn.cmd("LRANGE", "l", "0", "-1") == bulks("b", "c", "a")
    assert conn.cmd("LMOVE", "l", "l", "RIGHT", "LEFT") == bulk("a")
    assert conn.cmd("LRANGE", "l", "0", "-1") == bulks("a", "b", "c")
    assert conn.cmd("LMOVE", "l", "l", "LEFT", "LEFT") == bulk("a")
    assert conn.cmd("LMOVE", "l", "l", "RIGHT", "RIGHT") == bulk("c")
    assert conn.cmd("LRANGE", "l", "0", "-1") == bulks("a", "b", "c")
    conn.cmd("RPUSH", "one", "x")
    assert conn.cmd("LMOVE", "one", "one", "LEFT", "RIGHT") == bulk("x")
    assert conn.cmd("LRANGE", "one", "0", "-1") == bulks("x")
    assert conn.cmd("RPOPLPUSH", "l", "l") == bulk("c")
    assert conn.cmd("LRANGE", "l", "0", "-1") == bulks("c", "a", "b")


def test_lmove_missing_source_and_errors(conn):
    assert conn.cmd("LMOVE", "nokey", "dst", "LEFT", "LEFT") == NULL
    assert conn.cmd("EXISTS", "dst") == b":0\r\n"
    conn.cmd("RPUSH", "src", "a", "b")
    conn.cmd("SET", "str", "x")
    # A destination of another type: nothing moves.
    assert conn.cmd("LMOVE", "src", "str", "LEFT", "LEFT") == err_bytes(WRONGTYPE)
    assert conn.cmd("RPOPLPUSH", "src", "str") == err_bytes(WRONGTYPE)
    assert conn.cmd("LRANGE", "src", "0", "-1") == bulks("a", "b")
    assert conn.cmd("GET", "str") == bulk("x")
    assert conn.cmd("LMOVE", "src", "dst", "UP", "LEFT") == err_bytes(SYNTAX)
    assert conn.cmd("LMOVE", "src", "dst", "LEFT", "DOWN") == err_bytes(SYNTAX)
    assert conn.cmd("LMOVE", "src", "dst", "left", "right") == bulk("a")
    assert conn.cmd("LRANGE", "dst", "0", "-1") == bulks("a")


def test_rpoplpush(conn):
    assert conn.cmd("RPOPLPUSH", "nokey", "dst") == NULL
    assert conn.cmd("EXISTS", "dst") == b":0\r\n"
    conn.cmd("RPUSH", "src", "a", "b", "c")
    conn.cmd("RPUSH", "dst", "x")
    assert conn.cmd("RPOPLPUSH", "src", "dst") == bulk("c")
    assert conn.cmd("RPOPLPUSH", "src", "dst") == bulk("b")
    assert conn.cmd("LRANGE", "src", "0", "-1") == bulks("a")
    assert conn.cmd("LRANGE", "dst", "0", "-1") == bulks("b", "c", "x")
    assert conn.cmd("RPOPLPUSH", "src", "other") == bulk("a")
    assert conn.cmd("EXISTS", "src") == b":0\r\n"
    assert conn.cmd("LRANGE", "other", "0", "-1") == bulks("a")


# -- LMPOP -------------------------------------------------------------------

def test_lmpop(conn):
    assert conn.cmd("LMPOP", "2", "k1", "k2", "LEFT") == NULL2
    conn.cmd("RPUSH", "k2", "a", "b", "c", "d")
    conn.cmd("RPUSH", "k3", "z")
    # The first key that holds a list, whatever the keys before it.
    assert conn.cmd("LMPOP", "3", "k1", "k2", "k3", "LEFT") == mpopped("k2", "a")
    assert conn.cmd("LMPOP", "2", "k1", "k2", "RIGHT", "COUNT", "2") == mpopped("k2", "d", "c")
    assert conn.cmd("LMPOP", "2", "k2", "k3", "left", "count", "10") == mpopped("k2", "b")
    assert conn.cmd("EXISTS", "k2") == b":0\r\n"
    assert conn.cmd("LMPOP", "2", "k2", "k3", "RIGHT") == mpopped("k3", "z")
    assert conn.cmd("LMPOP", "2", "k2", "k3", "RIGHT") == NULL2
    conn.call("HELLO", "3")
    assert conn.cmd("LMPOP", "1", "k1", "LEFT") == NULL3


def test_lmpop_through_redis_py(r):
    r.rpush("b", "1", "2", "3")
    assert r.lmpop(2, "a", "b", direction="LEFT") == v(r, ["b", ["1"]])
    assert r.lmpop(2, "a", "b", direction="RIGHT", count=5) == v(r, ["b", ["3", "2"]])
    assert r.lmpop(2, "a", "b", direction="LEFT") is None


def test_lmpop_errors(conn):
    conn.cmd("RPUSH", "l", "a")
    assert conn.cmd("LMPOP", "0", "l", "LEFT") == err_bytes(NUMKEYS)
    assert conn.cmd("LMPOP", "-1", "l", "LEFT") == err_bytes(NUMKEYS)
    assert conn.cmd("LMPOP", "x", "l", "LEFT") == err_bytes(NUMKEYS)
    assert conn.cmd("LMPOP", "1", "l", "UP") == err_bytes(SYNTAX)
    assert conn.cmd("LMPOP", "3", "a", "b", "LEFT") == err_bytes(SYNTAX)
    assert conn.cmd("LMPOP", "1", "l", "LEFT", "COUNT") == err_bytes(SYNTAX)
    assert conn.cmd("LMPOP", "1", "l", "LEFT", "COUNT", "0") == err_bytes(
        "ERR count should be greater than 0")
    assert conn.cmd("LMPOP", "1", "l", "LEFT", "FOO", "1") == err_bytes(SYNTAX)
    assert conn.cmd("LLEN", "l") == b":1\r\n"


# -- the key goes with its last element ---------------------------------------

@pytest.mark.parametrize("removal", [
    ("LPOP", "l"), ("RPOP", "l"), ("LPOP", "l", "5"), ("RPOP", "l", "2"),
    ("LREM", "l", "0", "x"), ("LTRIM", "l", "3", "-1"), ("LMOVE", "l", "d", "LEFT", "LEFT"),
    ("RPOPLPUSH", "l", "d"), ("LMPOP", "1", "l", "LEFT", "COUNT", "3"),
    ("BLPOP", "l", "0"), ("BRPOP", "l", "0"), ("BLMOVE", "l", "d", "RIGHT", "LEFT", "0"),
    ("BRPOPLPUSH", "l", "d", "0"), ("BLMPOP", "0", "1", "l", "RIGHT", "COUNT", "2"),
], ids="-".join)
def test_removing_the_last_element_deletes_the_key(conn, removal):
    conn.cmd("RPUSH", "l", "x")
    assert conn.cmd("TYPE", "l") == b"+list\r\n"
    assert not conn.cmd(*removal).startswith(b"-")
    assert conn.cmd("EXISTS", "l") == b":0\r\n"
    assert conn.cmd("TYPE", "l") == b"+none\r\n"
    assert conn.cmd("LLEN", "l") == b":0\r\n"
    # The key is truly gone: it can become another type.
    assert conn.cmd("SADD", "l", "m") == b":1\r\n"


# -- blocking ----------------------------------------------------------------

def test_blocking_pops_answer_at_once_when_a_list_has_elements(conn):
    conn.cmd("RPUSH", "k2", "a", "b", "c", "d")
    conn.cmd("RPUSH", "k3", "z")
    # The first non-empty key wins; the reply is [key, element].
    assert conn.cmd("BLPOP", "k1", "k2", "k3", "0") == bulks("k2", "a")
    assert conn.cmd("BRPOP", "k1", "k3", "k2", "1") == bulks("k3", "z")
    assert conn.cmd("BRPOP", "k1", "k3", "k2", "0") == bulks("k2", "d")
    assert conn.cmd("BLMOVE", "k2", "d", "LEFT", "RIGHT", "0") == bulk("b")
    assert conn.cmd("BRPOPLPUSH", "k2", "d", "0") == bulk("c")
    assert conn.cmd("LRANGE", "d", "0", "-1") == bulks("c", "b")
    assert conn.cmd("BLMPOP", "0", "2", "k1", "d", "LEFT", "COUNT", "5") == mpopped("d", "c", "b")
    assert conn.cmd("EXISTS", "k2", "k3", "d") == b":0\r\n"
    assert blocked_clients(conn) == 0


def test_blocking_argument_errors(conn):
    for cmd in ("BLPOP", "BRPOP"):
        assert conn.cmd(cmd, "k", "-1") == err_bytes(NEGATIVE)
        assert conn.cmd(cmd, "k", "-0.5") == err_bytes(NEGATIVE)
        assert conn.cmd(cmd, "k", "abc") == err_bytes(NOT_FLOAT)
        assert conn.cmd(cmd, "k", "nan") == err_bytes(NOT_FLOAT)
    assert conn.cmd("BLMOVE", "a", "b", "LEFT", "LEFT", "-1") == err_bytes(NEGATIVE)
    assert conn.cmd("BLMOVE", "a", "b", "LEFT", "LEFT", "x") == err_bytes(NOT_FLOAT)
    assert conn.cmd("BLMOVE", "a", "b", "UP", "LEFT", "0") == err_bytes(SYNTAX)
    assert conn.cmd("BRPOPLPUSH", "a", "b", "-1") == err_bytes(NEGATIVE)
    assert conn.cmd("BRPOPLPUSH", "a", "b", "x") == err_bytes(NOT_FLOAT)
    assert conn.cmd("BLMPOP", "-1", "1", "k", "LEFT") == err_bytes(NEGATIVE)
    assert conn.cmd("BLMPOP", "x", "1", "k", "LEFT") == err_bytes(NOT_FLOAT)
    assert conn.cmd("BLMPOP", "0", "0", "k", "LEFT") == err_bytes(NUMKEYS)
    assert conn.cmd("BLMPOP", "0", "1", "k", "UP") == err_bytes(SYNTAX)
    assert conn.cmd("BLMPOP", "0", "1", "k", "LEFT", "COUNT", "0") == err_bytes(
        "ERR count should be greater than 0")
    assert blocked_clients(conn) == 0


@pytest.mark.parametrize("resp3", [False, True], ids=["resp2", "resp3"])
def test_timeout_answers_null(server, conn, resp3):
    with connect(server, resp3) as waiter:
        null = NULL3 if resp3 else NULL2
        for cmd in (("BLPOP", "k", "0.1"), ("BRPOP", "k", "other", "0.1"),
                    ("BLMOVE", "k", "d", "LEFT", "RIGHT", "0.1"), ("BRPOPLPUSH", "k", "d", "0.1"),
                    ("BLMPOP", "0.1", "2", "k", "other", "LEFT")):
            start = time.monotonic()
            waiter.send(*cmd)
            assert waiter.read_raw(timeout=5) == null, cmd
            elapsed = time.monotonic() - start
            assert 0.08 <= elapsed < 3.0, (cmd, elapsed)
        wait_until(lambda: blocked_clients(conn) == 0, message="no client blocked")
        assert conn.cmd("EXISTS", "k", "d") == b":0\r\n"
        assert waiter.cmd("PING") == b"+PONG\r\n"


def test_blpop_through_redis_py_times_out(r):
    assert r.blpop(["k1", "k2"], timeout=0.1) is None
    r.rpush("k2", "x")
    assert tuple(r.blpop(["k1", "k2"], timeout=0.1)) == v(r, ("k2", "x"))


@pytest.mark.parametrize("resp3", [False, True], ids=["resp2", "resp3"])
def test_blpop_served_by_a_push_from_another_client(server, conn, resp3):
    with connect(server, resp3) as waiter:
        waiter.send("BLPOP", "k1", "k2", "0")
        wait_blocked(conn, waiter)
        assert blocked_clients(conn) == 1
        line = [l for l in conn.call("CLIENT", "LIST").decode().splitlines()
                if f"id={waiter.id} " in l][0]
        assert " cmd=blpop " in line
        # The waiter is served after the whole push: the head is the last pushed.
        assert conn.cmd("LPUSH", "k2", "a", "b", "c") == b":3\r\n"
        assert waiter.read_raw() == bulks("k2", "c")
        assert conn.cmd("LRANGE", "k2", "0", "-1") == bulks("b", "a")
        wait_until(lambda: blocked_clients(conn) == 0, message="no client blocked")


def test_brpop_served_by_rpush(server, conn):
    with connect(server) as waiter:
        waiter.send("BRPOP", "k1", "k2", "0")
        wait_blocked(conn, waiter)
        assert conn.cmd("RPUSH", "k1", "a", "b") == b":2\r\n"
        assert waiter.read_raw() == bulks("k1", "b")
        assert conn.cmd("LRANGE", "k1", "0", "-1") == bulks("a")


def test_pushed_elements_go_to_the_longest_waiting_client_first(server, conn):
    with connect(server) as first, connect(server) as second, connect(server) as third:
        first.send("BLPOP", "k", "0")
        wait_blocked(conn, first)
        second.send("BRPOP", "k", "0")
        wait_blocked(conn, second)
        third.send("BLPOP", "other", "k", "0")
        wait_blocked(conn, third)
        # Two elements for three clients: the first two get them, in order.
        conn.cmd("RPUSH", "k", "x", "y")
        assert first.read_raw() == bulks("k", "x")
        assert second.read_raw() == bulks("k", "y")
        assert conn.cmd("EXISTS", "k") == b":0\r\n"
        wait_until(lambda: blocked_ids(conn) == {third.id}, message="only the third client blocked")
        conn.cmd("LPUSH", "k", "z")
        assert third.read_raw() == bulks("k", "z")
        wait_until(lambda: blocked_clients(conn) == 0, message="no client blocked")
        assert conn.cmd("EXISTS", "k") == b":0\r\n"


def test_blmove_served_by_a_later_push(server, conn):
    with connect(server) as waiter:
        waiter.send("BLMOVE", "src", "dst", "RIGHT", "LEFT", "0")
        wait_blocked(conn, waiter)
        conn.cmd("RPUSH", "dst", "old")
        assert waiter.id in blocked_ids(conn)
        conn.cmd("RPUSH", "src", "a", "b")
        assert waiter.read_raw() == bulk("b")
        assert conn.cmd("LRANGE", "src", "0", "-1") == bulks("a")
        assert conn.cmd("LRANGE", "dst", "0", "-1") == bulks("b", "old")


def test_brpoplpush_served_by_a_later_push(server, conn):
    with connect(server) as waiter:
        waiter.send("BRPOPLPUSH", "src", "dst", "0")
        wait_blocked(conn, waiter)
        conn.cmd("LPUSH", "src", "a")
        assert waiter.read_raw() == bulk("a")
        assert conn.cmd("EXISTS", "src") == b":0\r\n"
        assert conn.cmd("LRANGE", "dst", "0", "-1") == bulks("a")


def test_blmpop_served_by_a_later_push(server, conn):
    with connect(server) as waiter:
        waiter.send("BLMPOP", "0", "2", "k1", "k2", "LEFT", "COUNT", "2")
        wait_blocked(conn, waiter)
        conn.cmd("RPUSH", "k2", "a", "b", "c")
        assert waiter.read_raw() == mpopped("k2", "a", "b")
        assert conn.cmd("LRANGE", "k2", "0", "-1") == bulks("c")
        waiter.send("BLMPOP", "0", "1", "k1", "RIGHT")
        wait_blocked(conn, waiter)
        conn.cmd("RPUSH", "k1", "x", "y")
        assert waiter.read_raw() == mpopped("k1", "y")


def test_a_move_into_the_awaited_key_serves_the_waiter(server, conn):
    with connect(server) as waiter:
        waiter.send("BLPOP", "dst", "0")
        wait_blocked(conn, waiter)
        conn.cmd("RPUSH", "src", "a", "b")
        assert conn.cmd("LMOVE", "src", "dst", "RIGHT", "LEFT") == bulk("b")
        assert waiter.read_raw() == bulks("dst", "b")
        assert conn.cmd("EXISTS", "dst") == b":0\r\n"
        waiter.send("BRPOP", "dst", "0")
        wait_blocked(conn, waiter)
        assert conn.cmd("RPOPLPUSH", "src", "dst") == bulk("a")
        assert waiter.read_raw() == bulks("dst", "a")
        assert conn.cmd("EXISTS", "src", "dst") == b":0\r\n"


def test_a_key_of_another_type_keeps_the_client_waiting(server, conn):
    with connect(server) as waiter:
        waiter.send("BLPOP", "k", "0")
        wait_blocked(conn, waiter)
        conn.cmd("SET", "k", "string")
        conn.cmd("DEL", "k")
        assert waiter.id in blocked_ids(conn)
        conn.cmd("RPUSH", "k", "a")
        assert waiter.read_raw() == bulks("k", "a")


@pytest.mark.parametrize("resp3", [False, True], ids=["resp2", "resp3"])
def test_multi_does_not_block(conn, resp3):
    if resp3:
        conn.call("HELLO", "3")
    null_array = NULL3 if resp3 else NULL2
    null = NULL3 if resp3 else NULL
    conn.cmd("MULTI")
    for cmd in (("BLPOP", "k", "0"), ("BRPOP", "k", "0"), ("BLMOVE", "k", "d", "LEFT", "LEFT", "0"),
                ("BRPOPLPUSH", "k", "d", "0"), ("BLMPOP", "0", "1", "k", "LEFT"),
                ("RPUSH", "k", "a"), ("BLPOP", "k", "0")):
        assert conn.cmd(*cmd) == b"+QUEUED\r\n"
    assert conn.cmd("EXEC") == (b"*7\r\n" + null_array + null_array + null + null + null_array
                                + b":1\r\n" + bulks("k", "a"))
    assert blocked_clients(conn) == 0
    assert conn.cmd("EXISTS", "k", "d") == b":0\r\n"


# -- keyspace commands on lists ----------------------------------------------

def test_expire_rename_copy_del(r):
    r.rpush("l", "a", "b", "c")
    assert r.expire("l", 100) in (1, True)
    assert 0 < r.ttl("l") <= 100
    assert r.rpush("l", "d") == 4 and r.ttl("l") > 0
    assert r.rename("l", "m") in (True, b"OK", "OK")
    assert r.exists("l") == 0
    assert lst(r, "m") == bl("a", "b", "c", "d")
    assert r.ttl("m") > 0
    assert r.copy("m", "c") in (1, True)
    assert r.rpush("c", "e") == 5
    assert r.lset("c", 0, "A") in (True, b"OK", "OK")
    assert lst(r, "c") == bl("A", "b", "c", "d", "e")
    assert lst(r, "m") == bl("a", "b", "c", "d")
    assert r.type("c") == v(r, "list")
    assert r.delete("m", "c", "nokey") == 2
    assert r.exists("m", "c") == 0


def test_expired_list_is_gone(conn):
    conn.cmd("RPUSH", "l", "a")
    assert conn.cmd("PEXPIRE", "l", "50") == b":1\r\n"
    wait_until(lambda: conn.cmd("EXISTS", "l") == b":0\r\n", message="list expired")
    assert conn.cmd("LLEN", "l") == b":0\r\n"
    assert conn.cmd("LPUSHX", "l", "b") == b":0\r\n"


def test_scan_type_list(conn):
    conn.cmd("RPUSH", "l1", "a")
    conn.cmd("LPUSH", "l2", "b")
    conn.cmd("SET", "s", "x")
    conn.cmd("SADD", "set", "x")
    conn.cmd("HSET", "h", "f", "v")
    assert scan_all(conn, "TYPE", "list") == [b"l1", b"l2"]
    assert scan_all(conn, "TYPE", "LIST", "MATCH", "*2") == [b"l2"]
    assert scan_all(conn, "TYPE", "string") == [b"s"]
    conn.cmd("DEL", "l1", "l2")
    assert scan_all(conn, "TYPE", "list") == []


def scan_all(conn, *args):
    """Every key SCAN returns with these options, sorted, the cursor run to 0."""
    keys, cursor = [], b"0"
    while True:
        cursor, page = conn.call("SCAN", cursor, "COUNT", "100", *args)
        keys += page
        if cursor == b"0":
            return sorted(keys)


def test_dump_restore_round_trip(conn):
    elements = [b"a", b"", b"123", b"-5", b"x" * 5000, b"\x00\r\n\xff"]
    conn.cmd("RPUSH", "l", *elements)
    payload = conn.call("DUMP", "l")
    assert isinstance(payload, bytes) and payload
    assert conn.cmd("RESTORE", "copy", "0", payload) == b"+OK\r\n"
    assert conn.cmd("TYPE", "copy") == b"+list\r\n"
    assert conn.call("LRANGE", "copy", "0", "-1") == elements
    assert conn.cmd("RESTORE", "copy", "0", payload) == err_bytes(
        "BUSYKEY Target key name already exists.")
    conn.cmd("DEL", "l")
    assert conn.cmd("RESTORE", "l", "0", payload) == b"+OK\r\n"
    assert conn.call("LRANGE", "l", "0", "-1") == elements
    # A big list (many nodes in Redis) too.
    big = [b"e%d" % i for i in range(600)]
    conn.cmd("RPUSH", "big", *big)
    payload = conn.call("DUMP", "big")
    assert conn.cmd("RESTORE", "big2", "0", payload) == b"+OK\r\n"
    assert conn.call("LRANGE", "big2", "0", "-1") == big


# -- sizes and content -------------------------------------------------------

def test_large_list(conn):
    values = [f"v{i}" for i in range(1000)]
    for i in range(0, 1000, 100):
        assert conn.call("RPUSH", "big", *values[i:i + 100]) == i + 100
    assert conn.call("LLEN", "big") == 1000
    assert conn.call("LRANGE", "big", "0", "-1") == [x.encode() for x in values]
    assert conn.call("LINDEX", "big", "500") == b"v500"
    assert conn.call("LINDEX", "big", "-1") == b"v999"
    assert conn.call("LRANGE", "big", "498", "502") == [b"v498", b"v499", b"v500", b"v501", b"v502"]
    assert conn.cmd("LSET", "big", "500", "middle") == b"+OK\r\n"
    assert conn.call("LINDEX", "big", "500") == b"middle"
    assert conn.call("LINSERT", "big", "BEFORE", "middle", "inserted") == 1001
    assert conn.call("LRANGE", "big", "499", "501") == [b"v499", b"inserted", b"middle"]
    assert conn.call("LPOS", "big", "middle") == 501
    values[500:501] = ["inserted", "middle"]
    removed = 0
    for i in range(0, 1000, 3):
        removed += conn.call("LREM", "big", "0", f"v{i}")
    assert removed == 334
    expected = [x for x in values if not (x.startswith("v") and int(x[1:]) % 3 == 0)]
    assert len(expected) == 1001 - 334
    assert conn.call("LLEN", "big") == len(expected)
    assert conn.call("LRANGE", "big", "0", "-1") == [x.encode() for x in expected]
    assert conn.call("LRANGE", "big", "-3", "-1") == [b"v995", b"v997", b"v998"]
    assert conn.call("LTRIM", "big", "100", "199") == "OK"
    assert conn.call("LLEN", "big") == 100
    assert conn.call("LRANGE", "big", "0", "-1") == [x.encode() for x in expected[100:200]]


def test_elements_of_every_size_and_content(conn):
    elements = [b"", b"a", b"x" * 10240, b"\r\n\x00bin\x00\r\n\xff\xfe", b"123", b"-5",
                b"9223372036854775807", b"3.14", b" 1"]
    assert conn.call("RPUSH", "l", *elements) == len(elements)
    assert conn.call("LRANGE", "l", "0", "-1") == elements
    for i, e in enumerate(elements):
        assert conn.cmd("LINDEX", "l", str(i)) == bulk(e)
    assert conn.call("LPOS", "l", b"\r\n\x00bin\x00\r\n\xff\xfe") == 3
    assert conn.call("LPOS", "l", "") == 0
    assert conn.call("LREM", "l", "0", "x" * 10240) == 1
    assert conn.call("LINSERT", "l", "AFTER", "", "\x00") == len(elements)
    assert conn.call("LRANGE", "l", "0", "1") == [b"", b"\x00"]
    assert conn.cmd("RPOP", "l") == bulk(" 1")
    assert conn.cmd("LPOP", "l") == bulk("")


def test_integer_elements(r):
    r.rpush("l", "123", "-5", "0", "007")
    assert lst(r, "l") == bl("123", "-5", "0", "007")
    assert r.lpos("l", "-5") == 1
    # Elements compare as strings: "7" is not "007".
    assert r.lpos("l", "7") is None
    assert r.lrem("l", 0, "123") == 1
    assert r.linsert("l", "AFTER", "-5", 42) == 4
    assert lst(r, "l") == bl("-5", "42", "0", "007")
    assert r.lindex("l", 1) == v(r, "42")
    assert r.rpush("l", 12345678901234567890) == 5
    assert r.rpop("l") == v(r, "12345678901234567890")


# -- keyspace notifications --------------------------------------------------


def test_keyspace_notifications(make_server):
    # A server of its own: CONFIG SET stays out of the shared one.
    s = make_server()
    with RespConn.to(s) as listener, RespConn.to(s) as c:
        assert listener.call("PSUBSCRIBE", "__key*") == [b"psubscribe", b"__key*", 1]
        assert c.call("CONFIG", "SET", "notify-keyspace-events", "KEA") == "OK"
        try:
            c.call("LPUSH", "l", "a", "b")
            c.call("RPUSH", "l", "c")
            c.call("LPOP", "l")
            c.call("RPOP", "l")
            c.call("LSET", "l", "0", "x")
            c.call("LINSERT", "l", "BEFORE", "x", "y")
            c.call("LINSERT", "l", "BEFORE", "nope", "y")   # no change: no event
            c.call("LREM", "l", "0", "y")
            c.call("LREM", "l", "0", "nope")                # no change: no event
            c.call("RPUSH", "l", "z")
            c.call("LTRIM", "l", "0", "0")
            c.call("LPOP", "l")                             # empties l: lpop, then del
            assert got(listener, 20) == [
                ("__keyspace@0__:l", "lpush"), ("__keyevent@0__:lpush", "l"),
                ("__keyspace@0__:l", "rpush"), ("__keyevent@0__:rpush", "l"),
                ("__keyspace@0__:l", "lpop"), ("__keyevent@0__:lpop", "l"),
                ("__keyspace@0__:l", "rpop"), ("__keyevent@0__:rpop", "l"),
                ("__keyspace@0__:l", "lset"), ("__keyevent@0__:lset", "l"),
                ("__keyspace@0__:l", "linsert"), ("__keyevent@0__:linsert", "l"),
                ("__keyspace@0__:l", "lrem"), ("__keyevent@0__:lrem", "l"),
                ("__keyspace@0__:l", "rpush"), ("__keyevent@0__:rpush", "l"),
                ("__keyspace@0__:l", "ltrim"), ("__keyevent@0__:ltrim", "l"),
                ("__keyspace@0__:l", "lpop"), ("__keyevent@0__:lpop", "l"),
            ]
            assert got(listener, 2) == [("__keyspace@0__:l", "del"), ("__keyevent@0__:del", "l")]
            # RPOP with a count, LREM and LTRIM that empty the list also end in del.
            c.call("RPUSH", "m", "a", "b")
            c.call("RPOP", "m", "5")
            c.call("RPUSH", "n", "a")
            c.call("LREM", "n", "0", "a")
            c.call("RPUSH", "o", "a")
            c.call("LTRIM", "o", "1", "0")
            assert [(ch.split("@0__:")[1], p) for ch, p in got(listener, 18)
                    if ch.startswith("__keyspace")] == [
                ("m", "rpush"), ("m", "rpop"), ("m", "del"),
                ("n", "rpush"), ("n", "lrem"), ("n", "del"),
                ("o", "rpush"), ("o", "ltrim"), ("o", "del")]
            # A move: the push to the destination is told first, then the pop.
            c.call("RPUSH", "src", "a", "b")
            c.call("LMOVE", "src", "dst", "LEFT", "RIGHT")
            c.call("RPOPLPUSH", "src", "dst")
            assert [(ch.split("@0__:")[1], p) for ch, p in got(listener, 12)
                    if ch.startswith("__keyspace")] == [
                ("src", "rpush"), ("dst", "rpush"), ("src", "lpop"),
                ("dst", "lpush"), ("src", "rpop"), ("src", "del")]
            # Nothing else pending: a marker event comes next.
            c.call("SET", "__marker", "1")
            assert got(listener, 1) == [("__keyspace@0__:__marker", "set")]
        finally:
            c.call("CONFIG", "SET", "notify-keyspace-events", "")


@pytest.mark.deltagrid_only
def test_object_encoding_follows_list_max_listpack_size(make_server):
    # Redis 7.0 (the reference target) calls every list a quicklist;
    # deltagrid answers as Redis 7.2, the version it reports.
    s = make_server()
    with RespConn.to(s) as c:
        c.call("RPUSH", "small", "a", "b", "c")
        c.call("RPUSH", "big", *(["x" * 1000] * 9))
        assert c.call("OBJECT", "ENCODING", "small") == b"listpack"
        assert c.call("OBJECT", "ENCODING", "big") == b"quicklist"  # over 8 KiB
        assert c.call("CONFIG", "GET", "list-max-listpack-size") == [b"list-max-listpack-size", b"-2"]
        assert c.call("CONFIG", "SET", "list-max-listpack-size", "2") == "OK"
        assert c.call("OBJECT", "ENCODING", "small") == b"quicklist"
        assert c.call("CONFIG", "SET", "list-max-ziplist-size", "-3") == "OK"
        assert c.call("OBJECT", "ENCODING", "big") == b"listpack"  # 16 KiB
        assert c.call("CONFIG", "GET", "list-max-listpack-size") == [b"list-max-listpack-size", b"-3"]
        assert isinstance(c.call("CONFIG", "SET", "list-max-listpack-size", "x"), RespError)
