"""Keyspace notifications (notify-keyspace-events): the events of strings,
hashes and generic commands on __keyspace@0__ and __keyevent@0__, masking by
class, new keys, and expiry (on access and in the background). Every test
also runs against redis-server (DELTAGRID_TEST_TARGET=redis)."""
import time

import pytest

from helpers_clients import got
from helpers_net import RespConn


@pytest.fixture
def events(server):
    """(listener subscribed to every channel by pattern, command connection);
    notifications are switched off again afterwards."""
    listener, c = RespConn.to(server), RespConn.to(server)
    assert listener.call("PSUBSCRIBE", "__key*") == [b"psubscribe", b"__key*", 1]
    yield listener, c
    c.call("CONFIG", "SET", "notify-keyspace-events", "")
    listener.close()
    c.close()



def nothing_more(listener, c):
    """No notification is pending: a marker event arrives next."""
    c.call("CONFIG", "SET", "notify-keyspace-events", "KEA")
    c.call("DEL", "__marker")
    c.call("SET", "__marker", "1")
    assert got(listener, 2)[0] == ("__keyspace@0__:__marker", "set")


def test_keyspace_and_keyevent_channels(events):
    listener, c = events
    c.call("CONFIG", "SET", "notify-keyspace-events", "KEA")
    c.call("SET", "foo", "bar")
    assert got(listener, 2) == [("__keyspace@0__:foo", "set"), ("__keyevent@0__:set", "foo")]


def test_string_and_generic_events(events):
    listener, c = events
    c.call("CONFIG", "SET", "notify-keyspace-events", "Kg$")
    c.call("SET", "s", "1", "EX", "100")
    c.call("INCRBY", "s", "2")
    c.call("INCRBYFLOAT", "s", "1.5")
    c.call("APPEND", "s", "0")
    c.call("SETRANGE", "s", "0", "9")
    c.call("PERSIST", "s")
    c.call("EXPIRE", "s", "100")
    c.call("RENAME", "s", "t")
    c.call("DEL", "t", "missing")
    assert [e for _, e in got(listener, 10)] == [
        "set", "expire", "incrby", "incrbyfloat", "append", "setrange", "persist", "expire",
        "rename_from", "rename_to"]
    assert got(listener, 1) == [("__keyspace@0__:t", "del")]
    nothing_more(listener, c)


def test_copy_events(events):
    listener, c = events
    c.call("CONFIG", "SET", "notify-keyspace-events", "Kg")
    c.call("SET", "s", "1", "EX", "100")
    c.call("SET", "t", "2")
    assert c.call("COPY", "s", "u") == 1
    assert c.call("COPY", "s", "t") == 0       # exists: nothing happens
    assert c.call("COPY", "s", "t", "REPLACE") == 1
    assert got(listener, 3) == [("__keyspace@0__:s", "expire"), ("__keyspace@0__:u", "copy_to"),
                                ("__keyspace@0__:t", "copy_to")]
    nothing_more(listener, c)


def test_hash_events_and_the_last_field_deleted(events):
    listener, c = events
    c.call("CONFIG", "SET", "notify-keyspace-events", "KEgh")
    c.call("HSET", "h", "a", "1", "b", "2")
    c.call("HINCRBY", "h", "a", "10")
    c.call("HINCRBYFLOAT", "h", "a", "0.5")
    c.call("HDEL", "h", "a", "b")
    assert [(ch.split(":")[0], p) for ch, p in got(listener, 10)] == [
        ("__keyspace@0__", "hset"), ("__keyevent@0__", "h"),
        ("__keyspace@0__", "hincrby"), ("__keyevent@0__", "h"),
        ("__keyspace@0__", "hincrbyfloat"), ("__keyevent@0__", "h"),
        ("__keyspace@0__", "hdel"), ("__keyevent@0__", "h"),
        ("__keyspace@0__", "del"), ("__keyevent@0__", "h")]


def test_bitmap_events_only_for_changes(events):
    listener, c = events
    c.call("CONFIG", "SET", "notify-keyspace-events", "Kg$")
    c.call("SETBIT", "b", "3", "1")
    c.call("SETBIT", "b", "3", "1")               # no change: no event
    c.call("SETBIT", "b", "20", "0")              # grows the string
    c.call("BITFIELD", "b", "SET", "u4", "0", "2")
    c.call("BITFIELD", "b", "SET", "u4", "0", "2", "GET", "u8", "0")  # no change
    c.call("BITFIELD", "b", "OVERFLOW", "FAIL", "INCRBY", "u4", "0", "100")  # refused
    c.call("BITFIELD_RO", "b", "GET", "u4", "0")
    c.call("BITCOUNT", "b")
    c.call("BITPOS", "b", "1")
    c.call("BITOP", "NOT", "d", "b")
    c.call("SET", "e", "")
    c.call("BITOP", "OR", "d", "e")               # an empty result deletes d
    c.call("BITOP", "OR", "d", "e")               # nothing to delete
    assert got(listener, 6) == [
        ("__keyspace@0__:b", "setbit"), ("__keyspace@0__:b", "setbit"),
        ("__keyspace@0__:b", "setbit"), ("__keyspace@0__:d", "set"),
        ("__keyspace@0__:e", "set"), ("__keyspace@0__:d", "del")]
    nothing_more(listener, c)


def test_hyperloglog_events(events):
    listener, c = events
    c.call("CONFIG", "SET", "notify-keyspace-events", "KEA")
    c.call("PFADD", "h", "a")
    c.call("PFADD", "h", "a")                     # no register changed: no event
    c.call("PFCOUNT", "h")                        # a read, even where Redis caches the count
    c.call("PFMERGE", "m", "h")                   # "pfadd" too, as Redis
    c.call("PFDEBUG", "TODENSE", "h")             # no event in Redis either
    c.call("PFDEBUG", "GETREG", "m")
    assert got(listener, 4) == [("__keyspace@0__:h", "pfadd"), ("__keyevent@0__:pfadd", "h"),
                                ("__keyspace@0__:m", "pfadd"), ("__keyevent@0__:pfadd", "m")]
    nothing_more(listener, c)


def test_classes_mask_events(events):
    listener, c = events
    c.call("CONFIG", "SET", "notify-keyspace-events", "Kh")
    c.call("SET", "foo", "bar")          # a string event: masked
    c.call("DEL", "foo")                 # generic: masked
    c.call("HSET", "h", "f", "v")
    assert got(listener, 1) == [("__keyspace@0__:h", "hset")]
    nothing_more(listener, c)


def test_new_key_events(events):
    listener, c = events
    c.call("CONFIG", "SET", "notify-keyspace-events", "En")
    c.call("SET", "foo", "bar")
    c.call("SET", "foo", "baz")          # not new
    c.call("HSET", "h", "f", "v")
    assert got(listener, 2) == [("__keyevent@0__:new", "foo"), ("__keyevent@0__:new", "h")]


def test_expired_events_in_the_background_and_on_access(events):
    listener, c = events
    c.call("CONFIG", "SET", "notify-keyspace-events", "Ex")
    c.call("PSETEX", "bg", "100", "1")
    assert got(listener, 1) == [("__keyevent@0__:expired", "bg")]   # active expiry
    c.call("DEBUG", "SET-ACTIVE-EXPIRE", "0")
    try:
        c.call("PSETEX", "lazy", "50", "1")
        time.sleep(0.1)
        assert c.call("GET", "lazy") is None
        assert got(listener, 1) == [("__keyevent@0__:expired", "lazy")]
    finally:
        c.call("DEBUG", "SET-ACTIVE-EXPIRE", "1")
