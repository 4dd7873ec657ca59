"""SORT and SORT_RO: Redis 7's replies for lists, sets and sorted sets, BY
and GET patterns, LIMIT, ALPHA, DESC and STORE.
Also run against redis-server (DELTAGRID_TEST_TARGET=redis)."""
import pytest

from helpers import SYNTAX, WRONGTYPE
from helpers_net import err_bytes

pytestmark = pytest.mark.shared_server

NOT_DOUBLE = "ERR One or more scores can't be converted into double"


def bs(reply):
    """A reply as bytes, whatever the client decodes."""
    return [x.encode() if isinstance(x, str) else x for x in reply]


def test_numbers_sort_numerically_and_desc_limit_alpha(r):
    r.rpush("l", 10, 2, 33, -1, 2.5)
    assert bs(r.sort("l")) == [b"-1", b"2", b"2.5", b"10", b"33"]
    assert bs(r.sort("l", desc=True)) == [b"33", b"10", b"2.5", b"2", b"-1"]
    assert bs(r.sort("l", start=1, num=2)) == [b"2", b"2.5"]
    assert bs(r.sort("l", start=4, num=10)) == [b"33"]
    assert bs(r.sort("l", start=9, num=2)) == []
    assert bs(r.sort("l", alpha=True)) == [b"-1", b"10", b"2", b"2.5", b"33"]
    assert r.execute_command("SORT", "l", "LIMIT", 0, -1) == r.sort("l")


def test_sets_and_sorted_sets_sort_too(r):
    r.sadd("s", 3, 1, 2)
    assert bs(r.sort("s")) == [b"1", b"2", b"3"]
    r.zadd("z", {"c": 1, "a": 3, "b": 2})
    assert bs(r.sort("z", alpha=True)) == [b"a", b"b", b"c"]
    # BY a pattern naming no key: the sorted set's own order.
    assert bs(r.sort("z", by="nosort")) == [b"c", b"b", b"a"]
    assert bs(r.sort("z", by="nosort", desc=True)) == [b"a", b"b", b"c"]
    assert bs(r.sort("missing")) == []


def test_by_weights_and_get_patterns(r):
    r.rpush("ids", 1, 2, 3)
    r.mset({"w_1": 30, "w_2": 10, "w_3": 20, "name_1": "one", "name_3": "three"})
    r.hset("h_1", "f", "h-one")
    r.hset("h_2", "f", "h-two")
    assert bs(r.sort("ids", by="w_*")) == [b"2", b"3", b"1"]
    assert bs(r.sort("ids", by="w_*", get=["#", "name_*", "h_*->f"])) == [
        b"2", None, b"h-two", b"3", b"three", None, b"1", b"one", b"h-one"]
    # The list's own order, with GET.
    assert bs(r.sort("ids", by="nosort", get="name_*")) == [b"one", None, b"three"]
    assert bs(r.sort("ids", by="nosort", desc=True)) == [b"3", b"2", b"1"]
    # A missing weight sorts as 0; equal weights by the element.
    r.rpush("more", "b", "a", "c")
    r.set("w_c", 5)
    assert bs(r.sort("more", by="w_*")) == [b"a", b"b", b"c"]
    # ALPHA by a pattern: missing values first, equal ones as they came.
    assert bs(r.sort("more", by="w_*", alpha=True)) == [b"b", b"a", b"c"]


def test_store_writes_a_list_and_an_empty_result_deletes(r):
    r.rpush("src", 3, 1, 2)
    assert r.sort("src", store="dst") == 3
    assert r.type("dst") in (b"list", "list")
    assert bs(r.lrange("dst", 0, -1)) == [b"1", b"2", b"3"]
    r.set("name_1", "x")
    assert r.sort("src", by="nosort", get="name_*", store="dst") == 3
    assert bs(r.lrange("dst", 0, -1)) == [b"", b"x", b""]
    assert r.sort("nothing", store="dst") == 0
    assert r.exists("dst") == 0
    r.sadd("set", "b", "a", "c")
    # A set stored without sorting is sorted as bytes (deterministic).
    assert r.sort("set", by="nosort", store="dst") == 3
    assert bs(r.lrange("dst", 0, -1)) == [b"a", b"b", b"c"]


def test_errors(r, conn):
    r.rpush("l", 1, "x")
    assert conn.cmd("SORT", "l") == err_bytes(NOT_DOUBLE)
    r.set("str", "v")
    assert conn.cmd("SORT", "str") == err_bytes(WRONGTYPE)
    r.hset("h", "f", "v")
    assert conn.cmd("SORT", "h") == err_bytes(WRONGTYPE)
    assert conn.cmd("SORT", "l", "LIMIT", 1) == err_bytes(SYNTAX)
    assert conn.cmd("SORT", "l", "BOGUS") == err_bytes(SYNTAX)
    assert conn.cmd("SORT_RO", "l", "STORE", "d") == err_bytes(SYNTAX)
    assert conn.cmd("SORT_RO", "l", "ALPHA") == b"*2\r\n$1\r\n1\r\n$1\r\nx\r\n"
