"""Sorted-set commands: exact Redis 7.0 replies, on the wire and through redis-py (RESP2 and RESP3).

Scores used here print the same in Redis 7.0 (%.17g) and 7.2 (shortest form)."""
import pytest

from helpers import NOT_FLOAT, NOT_INT, SYNTAX, WRONGTYPE, arity, v
from helpers_net import bulks, err_bytes

pytestmark = pytest.mark.shared_server

MINMAX_FLOAT = "ERR min or max is not a float"
MINMAX_LEX = "ERR min or max not valid string range item"



def test_arity_errors(conn):
    cases = [
        ("ZADD", "z", "1"), ("ZINCRBY", "z", "1"), ("ZREM", "z"), ("ZCARD",), ("ZSCORE", "z"),
        ("ZMSCORE", "z"), ("ZCOUNT", "z", "0"), ("ZLEXCOUNT", "z", "-"), ("ZRANK", "z"),
        ("ZRANGE", "z", "0"), ("ZRANGEBYSCORE", "z", "0"), ("ZRANGEBYLEX", "z", "-"),
        ("ZRANGESTORE", "d", "z", "0"), ("ZPOPMIN",), ("ZMPOP", "1", "z"),
        ("ZREMRANGEBYRANK", "z", "0"), ("ZUNIONSTORE", "d", "1"), ("ZUNION", "1"),
        ("ZINTERCARD", "1"), ("ZRANDMEMBER",), ("ZSCAN", "z"),
    ]
    for args in cases:
        assert conn.cmd(*args) == err_bytes(arity(args[0].lower())), args


def test_wrongtype(conn):
    conn.cmd("SET", "s", "x")
    cases = [
        ("ZADD", "s", "1", "a"), ("ZINCRBY", "s", "1", "a"), ("ZREM", "s", "a"), ("ZCARD", "s"),
        ("ZSCORE", "s", "a"), ("ZMSCORE", "s", "a"), ("ZCOUNT", "s", "0", "1"),
        ("ZLEXCOUNT", "s", "-", "+"), ("ZRANK", "s", "a"), ("ZRANGE", "s", "0", "-1"),
        ("ZRANGEBYSCORE", "s", "0", "1"), ("ZPOPMIN", "s"), ("ZMPOP", "1", "s", "MIN"),
        ("ZREMRANGEBYRANK", "s", "0", "1"), ("ZUNION", "1", "s"), ("ZUNIONSTORE", "d", "1", "s"),
        ("ZINTERCARD", "1", "s"), ("ZRANDMEMBER", "s"), ("ZSCAN", "s", "0"),
        ("ZRANGESTORE", "d", "s", "0", "-1"),
    ]
    for args in cases:
        assert conn.cmd(*args) == err_bytes(WRONGTYPE), args


def test_zadd_flags_and_errors(conn):
    assert conn.cmd("ZADD", "z", "1", "a", "2", "b") == b":2\r\n"
    assert conn.cmd("ZADD", "z", "1", "a", "3", "b", "4", "c") == b":1\r\n"
    assert conn.cmd("ZADD", "z", "CH", "5", "a", "3", "b") == b":1\r\n"
    assert conn.cmd("ZADD", "z", "NX", "9", "a", "1", "d") == b":1\r\n"
    assert conn.cmd("ZSCORE", "z", "a") == b"$1\r\n5\r\n"
    assert conn.cmd("ZADD", "z", "XX", "CH", "7", "a", "1", "e") == b":1\r\n"
    assert conn.cmd("ZSCORE", "z", "e") == b"$-1\r\n"
    assert conn.cmd("ZADD", "z", "GT", "CH", "6", "a", "9", "b") == b":1\r\n"
    assert conn.cmd("ZADD", "z", "LT", "CH", "8", "a", "1", "b") == b":1\r\n"
    assert conn.cmd("ZMSCORE", "z", "a", "b", "nope") == b"*3\r\n$1\r\n7\r\n$1\r\n1\r\n$-1\r\n"
    assert conn.cmd("ZADD", "z", "NX", "XX", "1", "a") == err_bytes(
        "ERR XX and NX options at the same time are not compatible")
    for flags in (("GT", "LT"), ("GT", "NX"), ("LT", "NX")):
        assert conn.cmd("ZADD", "z", *flags, "1", "a") == err_bytes(
            "ERR GT, LT, and/or NX options at the same time are not compatible")
    assert conn.cmd("ZADD", "z", "INCR", "1", "a", "2", "b") == err_bytes(
        "ERR INCR option supports a single increment-element pair")
    assert conn.cmd("ZADD", "z", "1", "a", "2") == err_bytes(SYNTAX)
    assert conn.cmd("ZADD", "z", "x", "a") == err_bytes(NOT_FLOAT)
    assert conn.cmd("ZADD", "z", "nan", "a") == err_bytes(NOT_FLOAT)
    assert conn.cmd("ZADD", "nokey", "XX", "1", "a") == b":0\r\n"
    assert conn.cmd("EXISTS", "nokey") == b":0\r\n"


def test_zadd_incr_and_zincrby(conn):
    assert conn.cmd("ZADD", "z", "INCR", "1.5", "a") == b"$3\r\n1.5\r\n"
    assert conn.cmd("ZADD", "z", "INCR", "1.5", "a") == b"$1\r\n3\r\n"
    assert conn.cmd("ZADD", "z", "INCR", "NX", "1", "a") == b"$-1\r\n"
    assert conn.cmd("ZADD", "z", "INCR", "XX", "1", "nope") == b"$-1\r\n"
    assert conn.cmd("ZADD", "z", "INCR", "GT", "-1", "a") == b"$-1\r\n"
    assert conn.cmd("ZINCRBY", "z", "2", "a") == b"$1\r\n5\r\n"
    assert conn.cmd("ZINCRBY", "z", "x", "a") == err_bytes(NOT_FLOAT)
    assert conn.cmd("ZINCRBY", "z", "inf", "a") == b"$3\r\ninf\r\n"
    assert conn.cmd("ZINCRBY", "z", "-inf", "a") == err_bytes("ERR resulting score is not a number (NaN)")
    assert conn.cmd("ZADD", "z", "INCR", "-inf", "a") == err_bytes("ERR resulting score is not a number (NaN)")
    assert conn.cmd("ZSCORE", "z", "a") == b"$3\r\ninf\r\n"
    conn.cmd("HELLO", "3")
    assert conn.cmd("ZSCORE", "z", "a") == b",inf\r\n"
    assert conn.cmd("ZINCRBY", "n", "1.5", "m") == b",1.5\r\n"
    assert conn.cmd("ZSCORE", "z", "nope") == b"_\r\n"


def test_zrem_and_card(conn):
    conn.cmd("ZADD", "z", "1", "a", "2", "b", "3", "c")
    assert conn.cmd("ZREM", "z", "a", "a", "nope") == b":1\r\n"
    assert conn.cmd("ZCARD", "z") == b":2\r\n"
    assert conn.cmd("ZREM", "z", "b", "c") == b":2\r\n"
    assert conn.cmd("EXISTS", "z") == b":0\r\n"
    assert conn.cmd("ZCARD", "z") == b":0\r\n"
    assert conn.cmd("ZREM", "z", "a") == b":0\r\n"


def setup_abc(conn):
    conn.cmd("ZADD", "z", "1", "a", "2", "b", "3", "c", "1.5", "x", "-inf", "lo", "+inf", "hi")


def test_zrange_by_rank(conn):
    setup_abc(conn)
    assert conn.cmd("ZRANGE", "z", "0", "2") == bulks("lo", "a", "x")
    assert conn.cmd("ZRANGE", "z", "-2", "-1", "WITHSCORES") == bulks("c", "3", "hi", "inf")
    assert conn.cmd("ZRANGE", "z", "0", "0", "REV") == bulks("hi")
    assert conn.cmd("ZREVRANGE", "z", "0", "1", "WITHSCORES") == bulks("hi", "inf", "c", "3")
    assert conn.cmd("ZRANGE", "z", "5", "2") == b"*0\r\n"
    assert conn.cmd("ZRANGE", "z", "-100", "-6") == bulks("lo")
    assert conn.cmd("ZRANGE", "z", "100", "200") == b"*0\r\n"
    assert conn.cmd("ZRANGE", "z", "0", "9223372036854775807") == bulks("lo", "a", "x", "b", "c", "hi")
    assert conn.cmd("ZRANGE", "z", "-9223372036854775808", "0") == bulks("lo")
    assert conn.cmd("ZRANGE", "nokey", "0", "-1") == b"*0\r\n"
    assert conn.cmd("ZRANGE", "z", "a", "1") == err_bytes(NOT_INT)
    assert conn.cmd("ZRANGE", "z", "0", "1", "LIMIT", "0", "1") == err_bytes(
        "ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX")
    assert conn.cmd("ZRANGE", "z", "0", "1", "FOO") == err_bytes(SYNTAX)
    assert conn.cmd("ZREVRANGE", "z", "0", "1", "REV") == err_bytes(SYNTAX)


def test_zrange_by_score(conn):
    setup_abc(conn)
    assert conn.cmd("ZRANGEBYSCORE", "z", "(1", "3") == bulks("x", "b", "c")
    assert conn.cmd("ZRANGEBYSCORE", "z", "1", "(3", "WITHSCORES") == bulks("a", "1", "x", "1.5", "b", "2")
    assert conn.cmd("ZRANGEBYSCORE", "z", "-inf", "+inf", "LIMIT", "1", "2") == bulks("a", "x")
    assert conn.cmd("ZRANGEBYSCORE", "z", "-inf", "+inf", "LIMIT", "4", "-1") == bulks("c", "hi")
    assert conn.cmd("ZRANGEBYSCORE", "z", "-inf", "+inf", "LIMIT", "-1", "2") == b"*0\r\n"
    assert conn.cmd("ZRANGEBYSCORE", "z", "-inf", "+inf", "LIMIT", "0", "9223372036854775807") == (
        bulks("lo", "a", "x", "b", "c", "hi"))
    assert conn.cmd("ZREVRANGEBYSCORE", "z", "3", "(1", "WITHSCORES") == bulks("c", "3", "b", "2", "x", "1.5")
    assert conn.cmd("ZREVRANGEBYSCORE", "z", "+inf", "-inf", "LIMIT", "1", "1") == bulks("c")
    assert conn.cmd("ZRANGE", "z", "(3", "1", "BYSCORE", "REV") == bulks("b", "x", "a")
    assert conn.cmd("ZRANGE", "z", "2", "1", "BYSCORE") == b"*0\r\n"
    assert conn.cmd("ZCOUNT", "z", "(1", "+inf") == b":4\r\n"
    assert conn.cmd("ZCOUNT", "z", "-inf", "+inf") == b":6\r\n"
    assert conn.cmd("ZCOUNT", "nokey", "0", "1") == b":0\r\n"
    for cmd in (("ZRANGEBYSCORE", "z", "x", "1"), ("ZCOUNT", "z", "1", "(x"),
                ("ZRANGE", "z", "nan", "1", "BYSCORE"), ("ZREMRANGEBYSCORE", "z", "((1", "2")):
        assert conn.cmd(*cmd) == err_bytes(MINMAX_FLOAT), cmd


def test_zrange_by_lex(conn):
    conn.cmd("ZADD", "l", "0", "a", "0", "b", "0", "c", "0", "d", "0", "e")
    assert conn.cmd("ZRANGEBYLEX", "l", "-", "+") == bulks("a", "b", "c", "d", "e")
    assert conn.cmd("ZRANGEBYLEX", "l", "(a", "[c") == bulks("b", "c")
    assert conn.cmd("ZRANGEBYLEX", "l", "[aa", "(d") == bulks("b", "c")
    assert conn.cmd("ZRANGEBYLEX", "l", "-", "+", "LIMIT", "1", "2") == bulks("b", "c")
    assert conn.cmd("ZREVRANGEBYLEX", "l", "+", "(c") == bulks("e", "d")
    assert conn.cmd("ZRANGE", "l", "[d", "-", "BYLEX", "REV", "LIMIT", "0", "2") == bulks("d", "c")
    assert conn.cmd("ZRANGEBYLEX", "l", "+", "-") == b"*0\r\n"
    assert conn.cmd("ZLEXCOUNT", "l", "(a", "+") == b":4\r\n"
    assert conn.cmd("ZLEXCOUNT", "nokey", "-", "+") == b":0\r\n"
    assert conn.cmd("ZRANGE", "l", "-", "+", "BYLEX", "WITHSCORES") == err_bytes(
        "ERR syntax error, WITHSCORES not supported in combination with BYLEX")
    for cmd in (("ZRANGEBYLEX", "l", "a", "+"), ("ZLEXCOUNT", "l", "-", "c"),
                ("ZREMRANGEBYLEX", "l", "", "+")):
        assert conn.cmd(*cmd) == err_bytes(MINMAX_LEX), cmd
    assert conn.cmd("ZREMRANGEBYLEX", "l", "[b", "(d") == b":2\r\n"
    assert conn.cmd("ZRANGE", "l", "0", "-1") == bulks("a", "d", "e")


def test_zrange_resp3_pairs(conn):
    conn.cmd("ZADD", "z", "1", "a", "2.5", "b")
    conn.cmd("HELLO", "3")
    assert conn.cmd("ZRANGE", "z", "0", "-1", "WITHSCORES") == (
        b"*2\r\n*2\r\n$1\r\na\r\n,1\r\n*2\r\n$1\r\nb\r\n,2.5\r\n")
    assert conn.cmd("ZRANGE", "z", "0", "-1") == bulks("a", "b")
    assert conn.cmd("ZPOPMIN", "z") == b"*2\r\n$1\r\na\r\n,1\r\n"
    assert conn.cmd("ZPOPMAX", "z", "1") == b"*1\r\n*2\r\n$1\r\nb\r\n,2.5\r\n"
    assert conn.cmd("ZPOPMIN", "z") == b"*0\r\n"


def test_zrank(conn):
    setup_abc(conn)
    assert conn.cmd("ZRANK", "z", "lo") == b":0\r\n"
    assert conn.cmd("ZRANK", "z", "c") == b":4\r\n"
    assert conn.cmd("ZREVRANK", "z", "c") == b":1\r\n"
    assert conn.cmd("ZRANK", "z", "nope") == b"$-1\r\n"
    assert conn.cmd("ZRANK", "nokey", "a") == b"$-1\r\n"


def test_zpop(conn):
    setup_abc(conn)
    assert conn.cmd("ZPOPMIN", "z") == bulks("lo", "-inf")
    assert conn.cmd("ZPOPMAX", "z", "2") == bulks("hi", "inf", "c", "3")
    assert conn.cmd("ZPOPMIN", "z", "0") == b"*0\r\n"
    assert conn.cmd("ZPOPMIN", "z", "-1") == err_bytes("ERR value is out of range, must be positive")
    assert conn.cmd("ZPOPMIN", "z", "1", "2") == err_bytes(SYNTAX)
    assert conn.cmd("ZPOPMIN", "z", "100") == bulks("a", "1", "x", "1.5", "b", "2")
    assert conn.cmd("EXISTS", "z") == b":0\r\n"
    assert conn.cmd("ZPOPMAX", "nokey") == b"*0\r\n"


def test_zmpop(conn):
    conn.cmd("ZADD", "z", "1", "a", "2", "b", "3", "c")
    assert conn.cmd("ZMPOP", "2", "nokey", "z", "MAX", "COUNT", "2") == (
        b"*2\r\n$1\r\nz\r\n*2\r\n*2\r\n$1\r\nc\r\n$1\r\n3\r\n*2\r\n$1\r\nb\r\n$1\r\n2\r\n")
    assert conn.cmd("ZMPOP", "1", "z", "min") == b"*2\r\n$1\r\nz\r\n*1\r\n*2\r\n$1\r\na\r\n$1\r\n1\r\n"
    assert conn.cmd("ZMPOP", "1", "z", "MIN") == b"*-1\r\n"
    assert conn.cmd("ZMPOP", "0", "z", "MIN") == err_bytes("ERR numkeys should be greater than 0")
    assert conn.cmd("ZMPOP", "1", "z", "FOO") == err_bytes(SYNTAX)
    assert conn.cmd("ZMPOP", "2", "z", "MIN") == err_bytes(SYNTAX)
    assert conn.cmd("ZMPOP", "1", "z", "MIN", "COUNT", "0") == err_bytes("ERR count should be greater than 0")
    conn.cmd("HELLO", "3")
    assert conn.cmd("ZMPOP", "1", "z", "MIN") == b"_\r\n"


def test_zremrange(conn):
    setup_abc(conn)
    assert conn.cmd("ZREMRANGEBYRANK", "z", "0", "1") == b":2\r\n"
    assert conn.cmd("ZREMRANGEBYRANK", "z", "10", "20") == b":0\r\n"
    assert conn.cmd("ZREMRANGEBYSCORE", "z", "(1.5", "+inf") == b":3\r\n"
    assert conn.cmd("ZRANGE", "z", "0", "-1") == bulks("x")
    assert conn.cmd("ZREMRANGEBYRANK", "z", "0", "-1") == b":1\r\n"
    assert conn.cmd("EXISTS", "z") == b":0\r\n"
    assert conn.cmd("ZREMRANGEBYRANK", "z", "x", "1") == err_bytes(NOT_INT)


def test_zrangestore(conn):
    setup_abc(conn)
    assert conn.cmd("ZRANGESTORE", "d", "z", "1", "2", "BYSCORE") == b":3\r\n"
    assert conn.cmd("ZRANGE", "d", "0", "-1", "WITHSCORES") == bulks("a", "1", "x", "1.5", "b", "2")
    assert conn.cmd("ZRANGESTORE", "d", "z", "0", "0", "WITHSCORES") == err_bytes(SYNTAX)
    assert conn.cmd("ZRANGESTORE", "d", "z", "5", "1", "BYSCORE") == b":0\r\n"
    assert conn.cmd("EXISTS", "d") == b":0\r\n"
    conn.cmd("ZADD", "d", "1", "a")
    assert conn.cmd("ZRANGESTORE", "d", "nokey", "0", "-1") == b":0\r\n"
    assert conn.cmd("EXISTS", "d") == b":0\r\n"


def test_union_inter_diff(conn):
    conn.cmd("ZADD", "a", "1", "x", "2", "y", "3", "z")
    conn.cmd("ZADD", "b", "10", "y", "20", "z", "30", "w")
    assert conn.cmd("ZUNION", "2", "a", "b", "WITHSCORES") == bulks("x", "1", "y", "12", "z", "23", "w", "30")
    assert conn.cmd("ZINTER", "2", "a", "b", "WEIGHTS", "2", "3", "AGGREGATE", "MAX", "WITHSCORES") == (
        bulks("y", "30", "z", "60"))
    assert conn.cmd("ZINTER", "2", "a", "b", "AGGREGATE", "min") == bulks("y", "z")
    assert conn.cmd("ZDIFF", "2", "a", "b", "WITHSCORES") == bulks("x", "1")
    assert conn.cmd("ZUNION", "2", "a", "nokey") == bulks("x", "y", "z")
    assert conn.cmd("ZINTER", "2", "a", "nokey") == b"*0\r\n"
    assert conn.cmd("ZUNIONSTORE", "d", "2", "a", "b", "WEIGHTS", "1", "0") == b":4\r\n"
    assert conn.cmd("ZRANGE", "d", "0", "-1", "WITHSCORES") == bulks("w", "0", "x", "1", "y", "2", "z", "3")
    assert conn.cmd("ZINTERSTORE", "d", "2", "a", "b") == b":2\r\n"
    assert conn.cmd("ZDIFFSTORE", "d", "2", "a", "a") == b":0\r\n"
    assert conn.cmd("EXISTS", "d") == b":0\r\n"
    assert conn.cmd("ZINTERCARD", "2", "a", "b") == b":2\r\n"
    assert conn.cmd("ZINTERCARD", "2", "a", "b", "LIMIT", "1") == b":1\r\n"
    assert conn.cmd("ZINTERCARD", "2", "a", "b", "LIMIT", "-1") == err_bytes("ERR LIMIT can't be negative")
    assert conn.cmd("ZINTERCARD", "0", "a") == err_bytes(
        "ERR at least 1 input key is needed for 'zintercard' command")
    assert conn.cmd("ZUNIONSTORE", "d", "0", "a") == err_bytes(
        "ERR at least 1 input key is needed for 'zunionstore' command")
    assert conn.cmd("ZUNION", "x", "a") == err_bytes(NOT_INT)
    assert conn.cmd("ZUNION", "3", "a", "b") == err_bytes(SYNTAX)
    assert conn.cmd("ZUNION", "1", "a", "WEIGHTS", "x") == err_bytes("ERR weight value is not a float")
    assert conn.cmd("ZUNION", "1", "a", "AGGREGATE", "avg") == err_bytes(SYNTAX)
    assert conn.cmd("ZDIFF", "1", "a", "WEIGHTS", "1") == err_bytes(SYNTAX)
    assert conn.cmd("ZUNIONSTORE", "d", "1", "a", "WITHSCORES") == err_bytes(SYNTAX)


def test_zrandmember(conn):
    conn.cmd("ZADD", "z", "1", "a", "2", "b", "3", "c")
    assert conn.call("ZRANDMEMBER", "z") in (b"a", b"b", b"c")
    assert sorted(conn.call("ZRANDMEMBER", "z", "10")) == [b"a", b"b", b"c"]
    assert len(conn.call("ZRANDMEMBER", "z", "-10")) == 10
    flat = conn.call("ZRANDMEMBER", "z", "-5", "WITHSCORES")
    assert len(flat) == 10
    assert all({b"a": b"1", b"b": b"2", b"c": b"3"}[m] == s for m, s in zip(flat[::2], flat[1::2]))
    assert conn.cmd("ZRANDMEMBER", "nokey") == b"$-1\r\n"
    assert conn.cmd("ZRANDMEMBER", "nokey", "5") == b"*0\r\n"
    assert conn.cmd("ZRANDMEMBER", "z", "0") == b"*0\r\n"
    assert conn.cmd("ZRANDMEMBER", "z", "-9223372036854775808") == err_bytes(
        "ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807")
    assert conn.cmd("ZRANDMEMBER", "z", "9223372036854775807", "WITHSCORES") == err_bytes(
        "ERR value is out of range")
    assert conn.cmd("ZRANDMEMBER", "z", "1", "FOO") == err_bytes(SYNTAX)


def test_zscan(conn):
    conn.cmd("ZADD", "z", "1", "a", "2.5", "b")
    assert conn.cmd("ZSCAN", "z", "0") == b"*2\r\n$1\r\n0\r\n" + bulks("a", "1", "b", "2.5")
    assert conn.cmd("ZSCAN", "nokey", "0") == b"*2\r\n$1\r\n0\r\n*0\r\n"
    assert conn.cmd("ZSCAN", "z", "0", "MATCH", "b*") == b"*2\r\n$1\r\n0\r\n" + bulks("b", "2.5")
    big = [x for i in range(500) for x in (str(i), f"m{i}")]
    conn.cmd("ZADD", "big", *big)
    seen, cursor = {}, b"0"
    while True:
        cursor, page = conn.call("ZSCAN", "big", cursor, "COUNT", "37")
        seen.update(zip(page[::2], page[1::2]))
        if cursor == b"0":
            break
    assert len(seen) == 500 and seen[b"m7"] == b"7"


def pairs(x):
    """redis-py gives (member, score) tuples in RESP2 and lists in RESP3."""
    return [tuple(p) for p in x]


def test_redis_py(r):
    assert r.zadd("z", {"a": 1, "b": 2.5}) == 2
    assert r.zscore("z", "b") == 2.5
    assert pairs(r.zrange("z", 0, -1, withscores=True)) == [(v(r, "a"), 1.0), (v(r, "b"), 2.5)]
    assert r.zrevrangebyscore("z", "+inf", "-inf") == v(r, ["b", "a"])
    assert r.zincrby("z", 1, "a") == 2.0
    assert pairs(r.zpopmin("z", 1)) == [(v(r, "a"), 2.0)]
    assert r.zmscore("z", ["b", "x"]) == [2.5, None]
    assert r.zcard("z") == 1
    assert pairs(r.zunion(["z", "nokey"], withscores=True)) == [(v(r, "b"), 2.5)]


def test_lex_ranges_follow_the_member_order_when_scores_differ(r):
    # Redis walks its order comparing members: with members in order, a lex
    # range works even though the scores differ.
    r.zadd("z", {"a": 1, "b": 2, "c": 3, "d": 4})
    assert [m if isinstance(m, bytes) else m.encode() for m in r.zrange("z", "[b", "[c", bylex=True)] == [b"b", b"c"]
    assert r.zlexcount("z", "(a", "+") == 3
    assert r.zrangestore("dst", "z", "[b", "(d", bylex=True) == 2
