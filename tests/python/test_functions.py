"""Redis 7 functions: FUNCTION LOAD / DELETE / FLUSH / LIST / STATS / KILL and
FCALL / FCALL_RO. What is tested: a library's metadata line and its errors,
register_function's positional and named forms and their errors, REPLACE,
function names in any case, FCALL's numkeys and not-found errors, flags
(no-writes and FCALL_RO), FUNCTION LIST's shape with WITHCODE and a
LIBRARYNAME pattern, that SCRIPT FLUSH leaves functions alone, redis.call not
being available while a library loads, and FUNCTION KILL of a busy function.
Also run against redis-server (DELTAGRID_TEST_TARGET=redis)."""
import time

import pytest

from helpers_net import RespConn, err_bytes

pytestmark = pytest.mark.shared_server

LIB = """#!lua name=mylib
redis.register_function('setit', function(keys, args)
  return redis.call('set', keys[1], args[1])
end)
redis.register_function{function_name='getit', callback=function(keys)
  return redis.call('get', keys[1])
end, flags={'no-writes'}, description='reads a key'}
"""


@pytest.fixture
def fn(conn):
    """A connection; the node's libraries are flushed after the test."""
    yield conn
    conn.cmd("FUNCTION", "FLUSH")


def lib(name, body):
    return f"#!lua name={name}\n{body}"


def test_load_call_and_read_only_flag(fn):
    assert fn.cmd("FUNCTION", "LOAD", LIB) == b"$5\r\nmylib\r\n"
    assert fn.cmd("FCALL", "setit", 1, "{f}k", "v") == b"+OK\r\n"
    assert fn.cmd("FCALL", "getit", 1, "{f}k") == b"$1\r\nv\r\n"
    assert fn.cmd("FCALL_RO", "getit", 1, "{f}k") == b"$1\r\nv\r\n"
    assert fn.cmd("FCALL", "GETIT", 1, "{f}k") == b"$1\r\nv\r\n"  # any case
    assert fn.cmd("FCALL_RO", "setit", 1, "{f}k", "w") == err_bytes(
        "ERR Can not execute a script with write flag using *_ro command.")
    assert fn.cmd("FCALL", "nosuch", 0) == err_bytes("ERR Function not found")
    assert fn.cmd("FCALL", "setit", "x", "k") == err_bytes("ERR Bad number of keys provided")
    assert fn.cmd("FCALL", "setit", 3, "k") == err_bytes(
        "ERR Number of keys can't be greater than number of args")
    assert fn.cmd("FCALL", "setit", -1, "k") == err_bytes("ERR Number of keys can't be negative")


def test_a_no_writes_function_cannot_write(fn):
    fn.cmd("FUNCTION", "LOAD", lib("ro", """
redis.register_function{function_name='w', callback=function(keys)
  return redis.call('set', keys[1], 'x')
end, flags={'no-writes'}}"""))
    reply = fn.cmd("FCALL", "w", 1, "k")
    assert reply.startswith(b"-ERR Write commands are not allowed from read-only scripts."), reply
    assert b"script: w, on @user_function:4." in reply  # the metadata line counts


def test_replace_and_name_collisions(fn):
    assert fn.cmd("FUNCTION", "LOAD", LIB) == b"$5\r\nmylib\r\n"
    assert fn.cmd("FUNCTION", "LOAD", LIB) == err_bytes("ERR Library 'mylib' already exists")
    again = lib("mylib", "redis.register_function('setit', function() return 2 end)")
    assert fn.cmd("FUNCTION", "LOAD", "REPLACE", again) == b"$5\r\nmylib\r\n"
    assert fn.cmd("FCALL", "setit", 0) == b":2\r\n"
    # getit went with the old code.
    assert fn.cmd("FCALL", "getit", 0) == err_bytes("ERR Function not found")
    other = lib("other", "redis.register_function('setit', function() return 3 end)")
    assert fn.cmd("FUNCTION", "LOAD", other) == err_bytes("ERR Function setit already exists")
    # A failed REPLACE keeps the library as it was.
    assert fn.cmd("FUNCTION", "LOAD", "REPLACE", lib("mylib", "error('no')")).startswith(
        b"-ERR Error registering functions")
    assert fn.cmd("FCALL", "setit", 0) == b":2\r\n"
    twice = lib("two", "redis.register_function('a', function() end)\n"
                       "redis.register_function('a', function() end)")
    reply = fn.cmd("FUNCTION", "LOAD", twice)
    assert reply.startswith(b"-ERR Error registering functions: "), reply
    assert b"Function already exists in the library" in reply, reply


def test_metadata_errors(fn):
    assert fn.cmd("FUNCTION", "LOAD", "return 1") == err_bytes("ERR Missing library metadata")
    assert fn.cmd("FUNCTION", "LOAD", "#!lua\nreturn 1") == err_bytes(
        "ERR Library name was not given")
    assert fn.cmd("FUNCTION", "LOAD", "#!lua name=a name=b\nreturn 1") == err_bytes(
        "ERR Invalid metadata value, name argument was given multiple times")
    assert fn.cmd("FUNCTION", "LOAD", "#!lua foo=bar\nreturn 1") == err_bytes(
        "ERR Invalid metadata value given: foo=bar")
    assert fn.cmd("FUNCTION", "LOAD", "#!lua name=a-b\nreturn 1") == err_bytes(
        "ERR Library names can only contain letters, numbers, or underscores(_) "
        "and must be at least one character long")
    assert fn.cmd("FUNCTION", "LOAD", "#!lua name=empty\nlocal a = 1") == err_bytes(
        "ERR No functions registered")
    assert fn.cmd("FUNCTION", "LOAD", "#!lua name=bad\nreturn (").startswith(
        b"-ERR Error compiling function: user_function:2:")


@pytest.mark.parametrize("code,error", [
    ("redis.register_function()", "wrong number of arguments to redis.register_function"),
    ("redis.register_function('f')", "calling redis.register_function with a single argument "
     "is only applicable to Lua table (representing named arguments)."),
    ("redis.register_function({}, function() end)",
     "first argument to redis.register_function must be a string"),
    ("redis.register_function('f', 1)",
     "second argument to redis.register_function must be a function"),
    ("redis.register_function{callback=function() end}",
     "redis.register_function must get a function name argument"),
    ("redis.register_function{function_name='f'}",
     "redis.register_function must get a callback argument"),
    ("redis.register_function{function_name='f', callback=function() end, what=1}",
     "unknown argument given to redis.register_function"),
    ("redis.register_function{function_name='f', callback=function() end, flags={'bad'}}",
     "unknown flag given"),
])
def test_register_function_errors(fn, code, error):
    reply = fn.cmd("FUNCTION", "LOAD", lib("l", code))
    assert reply.startswith(b"-ERR Error registering functions: "), reply
    assert error.encode() in reply, reply


def test_redis_call_is_not_available_while_loading(fn):
    reply = fn.cmd("FUNCTION", "LOAD", lib("l", "return redis.call('ping')"))
    assert reply.startswith(b"-ERR Error registering functions: "), reply
    assert b"user_function:2: Script attempted to access nonexistent global variable 'call'" in reply, reply


def test_list_delete_and_flush(fn):
    fn.cmd("FUNCTION", "LOAD", LIB)
    fn.cmd("FUNCTION", "LOAD", lib("other", "redis.register_function('o', function() return 1 end)"))
    listed = fn.call("FUNCTION", "LIST", "LIBRARYNAME", "my*")
    assert len(listed) == 1
    entry = dict(zip(listed[0][::2], listed[0][1::2]))
    assert entry[b"library_name"] == b"mylib" and entry[b"engine"] == b"LUA"
    functions = {f[1]: dict(zip(f[::2], f[1::2])) for f in entry[b"functions"]}
    assert set(functions) == {b"setit", b"getit"}
    assert functions[b"getit"][b"description"] == b"reads a key"
    # Flags are status strings.
    assert [f.encode() if isinstance(f, str) else f for f in functions[b"getit"][b"flags"]] == [
        b"no-writes"]
    assert functions[b"setit"][b"description"] is None
    coded = fn.call("FUNCTION", "LIST", "WITHCODE", "LIBRARYNAME", "other")
    assert dict(zip(coded[0][::2], coded[0][1::2]))[b"library_code"].startswith(b"#!lua name=other")
    assert len(fn.call("FUNCTION", "LIST")) == 2
    assert fn.cmd("FUNCTION", "LIST", "bad") == err_bytes("ERR Unknown argument bad")
    assert fn.cmd("FUNCTION", "LIST", "LIBRARYNAME") == err_bytes(
        "ERR library name argument was not given")
    assert fn.cmd("FUNCTION", "DELETE", "other") == b"+OK\r\n"
    assert fn.cmd("FUNCTION", "DELETE", "other") == err_bytes("ERR Library not found")
    assert fn.cmd("FCALL", "o", 0) == err_bytes("ERR Function not found")
    # SCRIPT FLUSH is for EVAL's scripts only.
    assert fn.cmd("SCRIPT", "FLUSH") == b"+OK\r\n"
    assert fn.cmd("FCALL", "getit", 1, "nokey") == b"$-1\r\n"
    assert fn.cmd("FUNCTION", "FLUSH", "BAD") == err_bytes(
        "ERR FUNCTION FLUSH only supports SYNC|ASYNC option")
    assert fn.cmd("FUNCTION", "FLUSH", "SYNC") == b"+OK\r\n"
    assert fn.call("FUNCTION", "LIST") == []


def test_stats_when_idle(fn):
    fn.cmd("FUNCTION", "LOAD", LIB)
    stats = fn.call("FUNCTION", "STATS")
    assert stats[0] == b"running_script" and stats[1] is None
    engines = dict(zip(stats[3][::2], stats[3][1::2]))
    lua = dict(zip(engines[b"LUA"][::2], engines[b"LUA"][1::2]))
    assert lua == {b"libraries_count": 1, b"functions_count": 2}
    assert fn.cmd("FUNCTION", "KILL") == err_bytes("NOTBUSY No scripts in execution right now.")


def test_a_busy_function_is_killed_by_function_kill_only(make_server):
    server = make_server()
    with RespConn.to(server) as admin, RespConn(server.host, server.port, timeout=30) as runner:
        admin.cmd("CONFIG", "SET", "busy-reply-threshold", "50")
        admin.cmd("FUNCTION", "LOAD", lib("spin", """
redis.register_function('spin', function() local a = 1 while true do a = a + 1 end end)"""))
        runner.send("FCALL", "spin", 0)
        deadline = time.monotonic() + 10
        while not admin.cmd("PING").startswith(b"-BUSY"):
            assert time.monotonic() < deadline, "the function never made the server BUSY"
            time.sleep(0.01)
        assert admin.cmd("PING") == err_bytes(
            "BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE.")
        stats = admin.call("FUNCTION", "STATS")
        running = dict(zip(stats[1][::2], stats[1][1::2]))
        assert running[b"name"] == b"spin" and running[b"command"] == [b"FCALL", b"spin", b"0"]
        assert admin.cmd("SCRIPT", "KILL") == err_bytes(
            "BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE.")
        assert admin.cmd("FUNCTION", "KILL") == b"+OK\r\n"
        killed = runner.read_raw(timeout=10)
        assert killed.startswith(b"-ERR Script killed by user with SCRIPT KILL"), killed
        assert admin.cmd("PING") == b"+PONG\r\n"


def test_dump_and_restore_by_policy(fn):
    fn.cmd("FUNCTION", "LOAD", LIB)
    payload = fn.call("FUNCTION", "DUMP")
    assert fn.cmd("FUNCTION", "FLUSH") == b"+OK\r\n"
    assert fn.cmd("FUNCTION", "RESTORE", payload) == b"+OK\r\n"
    assert fn.cmd("FCALL", "setit", 1, "k", "v") == b"+OK\r\n"
    # APPEND (the default) refuses a library already there, and changes nothing.
    assert fn.cmd("FUNCTION", "RESTORE", payload, "APPEND").startswith(b"-ERR Library ")
    assert len(fn.call("FUNCTION", "LIST")) == 1
    assert fn.cmd("FUNCTION", "RESTORE", payload, "REPLACE") == b"+OK\r\n"
    fn.cmd("FUNCTION", "LOAD", lib("other", "redis.register_function('o', function() return 1 end)"))
    assert fn.cmd("FUNCTION", "RESTORE", payload, "FLUSH") == b"+OK\r\n"
    assert [lib_[1] for lib_ in fn.call("FUNCTION", "LIST")] == [b"mylib"]
    assert fn.cmd("FUNCTION", "RESTORE", payload, "BAD") == err_bytes(
        "ERR Wrong restore policy given, value should be either FLUSH, APPEND or REPLACE.")
    assert fn.cmd("FUNCTION", "RESTORE", b"bad payload") == err_bytes(
        "ERR DUMP payload version or checksum are wrong")
    assert len(fn.call("FUNCTION", "LIST")) == 1
