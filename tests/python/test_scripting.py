"""Lua scripting: EVAL, EVALSHA, EVAL_RO, EVALSHA_RO and SCRIPT LOAD / EXISTS /
FLUSH / KILL. What is tested: the Redis <-> Lua reply conversions (exact wire
bytes), KEYS/ARGV and numkeys errors, the script cache (sha1, NOSCRIPT,
upper-case shas), the exact error texts a client gets (redis.call errors carry
the suffix " script: <sha1 of the body>, on @user_script:1."; redis.pcall
errors and error tables do not), writes made by scripts (atomic, visible, not
rolled back when the script fails midway), the Lua libraries Redis exposes
(cjson, bit, string, table, math, redis.sha1hex) and the ones it does not (os,
io), redis-py's Script and Lock helpers, BUSY / SCRIPT KILL with a long-running
script, scripts inside MULTI/EXEC and under WATCH, and client-side tracking
invalidation of keys written by a script.
Also run against redis-server (DELTAGRID_TEST_TARGET=redis)."""
import hashlib
import json
import time

import pytest
import redis

from helpers import WRONGTYPE, arity, v
from helpers_net import Push, RespConn, bulk, err_bytes

pytestmark = pytest.mark.shared_server

NOSCRIPT = "NOSCRIPT No matching script. Please use EVAL."
BUSY = "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE."


def sha1(body):
    return hashlib.sha1(body.encode()).hexdigest()


def script_err(text, body):
    """Exact wire form of an error raised by redis.call / error() inside `body`:
    Redis appends which script (its sha1) and where."""
    return err_bytes(f"{text} script: {sha1(body)}, on @user_script:1.")


def ev(conn, body, *keys_and_args, numkeys=0):
    """EVAL `body` on a raw connection; the exact reply bytes."""
    return conn.cmd("EVAL", body, numkeys, *keys_and_args)


# -- conversions Redis -> Lua -> Redis -----------------------------------------

def test_integer_and_bulk_and_nil_replies(conn):
    assert ev(conn, "return 1") == b":1\r\n"
    assert ev(conn, "return 'abc'") == b"$3\r\nabc\r\n"
    assert ev(conn, "return '123'") == b"$3\r\n123\r\n"  # a string stays a bulk
    assert ev(conn, "return nil") == b"$-1\r\n"
    assert ev(conn, "return {}") == b"*0\r\n"


def test_lua_numbers_are_truncated_to_integers(conn):
    assert ev(conn, "return 3.99") == b":3\r\n"
    assert ev(conn, "return -3.99") == b":-3\r\n"
    assert ev(conn, "return -0.5") == b":0\r\n"
    assert ev(conn, "return {1.5, 2.5}") == b"*2\r\n:1\r\n:2\r\n"
    assert ev(conn, "return 2^53") == b":9007199254740992\r\n"


def test_booleans_true_is_one_false_is_nil(conn):
    assert ev(conn, "return true") == b":1\r\n"
    assert ev(conn, "return false") == b"$-1\r\n"


def test_booleans_and_nil_over_resp3(conn):
    conn.call("HELLO", "3")
    assert ev(conn, "return true") == b":1\r\n"
    assert ev(conn, "return false") == b"_\r\n"
    assert ev(conn, "return nil") == b"_\r\n"
    assert ev(conn, "return 3.99") == b":3\r\n"


def test_missing_key_is_false_in_lua_and_nil_back(conn):
    assert ev(conn, "return type(redis.call('get','nokey'))") == b"$7\r\nboolean\r\n"
    assert ev(conn, "return redis.call('get','nokey') == false") == b":1\r\n"
    assert ev(conn, "return redis.call('get','nokey')") == b"$-1\r\n"


def test_nested_arrays_and_a_nil_ends_the_array(conn):
    assert ev(conn, "return {1,'a',{2,{}}}") == b"*3\r\n:1\r\n$1\r\na\r\n*2\r\n:2\r\n*0\r\n"
    # Everything from the first nil on is dropped.
    assert ev(conn, "return {1,'a',{2},nil,3}") == b"*3\r\n:1\r\n$1\r\na\r\n*1\r\n:2\r\n"
    assert ev(conn, "return {1,2,3,'foo',nil,'bar'}") == b"*4\r\n:1\r\n:2\r\n:3\r\n$3\r\nfoo\r\n"


def test_redis_replies_come_back_with_their_types(conn):
    conn.call("RPUSH", "l", "a", "b")
    assert ev(conn, "return redis.call('lrange', 'l', 0, -1)") == b"*2\r\n$1\r\na\r\n$1\r\nb\r\n"
    assert ev(conn, "return redis.call('llen', 'l')") == b":2\r\n"
    assert ev(conn, "return redis.call('type', 'l')") == b"+list\r\n"
    assert ev(conn, "return redis.call('ping')") == b"+PONG\r\n"
    assert ev(conn, "return redis.call('hgetall', 'nokey')") == b"*0\r\n"


def test_status_reply_is_an_ok_table(conn):
    body = "local x = redis.call('set','k','v'); return type(x) .. ':' .. x.ok"
    assert ev(conn, body) == b"$8\r\ntable:OK\r\n"
    assert ev(conn, "return redis.call('set','k','v')") == b"+OK\r\n"
    assert ev(conn, "return {ok='fine'}") == b"+fine\r\n"
    assert ev(conn, "return redis.status_reply('FINE')") == b"+FINE\r\n"


def test_error_tables_and_error_reply(conn):
    assert ev(conn, "return {err='My Error'}") == err_bytes("My Error")
    assert ev(conn, "return redis.error_reply('My Error')") == err_bytes("My Error")
    assert ev(conn, "return redis.error_reply('ERR x')") == err_bytes("ERR x")
    # Inside an array, status and error tables become nested status/error replies.
    assert ev(conn, "return {1, {ok='x'}, {err='inner'}}") == b"*3\r\n:1\r\n+x\r\n-inner\r\n"


def test_error_reply_with_empty_text_gets_err_but_a_raw_table_does_not(conn):
    assert ev(conn, "return redis.error_reply('')") == b"-ERR \r\n"
    assert ev(conn, "return {err=''}") == b"-\r\n"


def test_keys_and_argv(conn):
    body = "return {KEYS[1],KEYS[2],ARGV[1],ARGV[2]}"
    assert ev(conn, body, "a", "b", "c", "d", numkeys=2) == \
        b"*4\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n$1\r\nd\r\n"
    assert ev(conn, "return #KEYS .. ' ' .. #ARGV", "a", "b", "c", "d", numkeys=1) == b"$3\r\n1 3\r\n"
    assert ev(conn, "return KEYS") == b"*0\r\n"
    assert ev(conn, "return ARGV") == b"*0\r\n"
    # Arguments are strings in Lua.
    assert ev(conn, "return type(ARGV[1])", "5") == b"$6\r\nstring\r\n"


def test_keys_and_values_are_binary_safe(conn):
    raw = b"a\x00\xffb"
    assert ev(conn, "return ARGV[1]", raw) == b"$4\r\n" + raw + b"\r\n"
    assert ev(conn, "return #ARGV[1]", raw) == b":4\r\n"
    assert ev(conn, "return redis.call('set', KEYS[1], ARGV[1])", raw, raw, numkeys=1) == b"+OK\r\n"
    assert conn.cmd("GET", raw) == b"$4\r\n" + raw + b"\r\n"


def test_a_table_with_only_string_keys_is_an_empty_array(conn):
    assert ev(conn, "return {a=1}") == b"*0\r\n"
    assert ev(conn, "return type(redis.call('incr','n'))") == b"$6\r\nnumber\r\n"
    assert ev(conn, "return redis.log(redis.LOG_WARNING, 'from a test')") == b"$-1\r\n"


def test_setresp_3_gives_maps_and_doubles_to_resp3_clients(conn):
    conn.call("HSET", "h", "f", "v")
    conn.call("ZADD", "z", "1.5", "m")
    hgetall = "redis.setresp(3); return redis.call('hgetall', KEYS[1])"
    zscore = "redis.setresp(3); return redis.call('zscore', KEYS[1], 'm')"
    assert ev(conn, "redis.setresp(3); return redis.call('hgetall', 'h').map.f") == b"$1\r\nv\r\n"
    assert ev(conn, hgetall, "h", numkeys=1) == b"*2\r\n$1\r\nf\r\n$1\r\nv\r\n"
    assert ev(conn, zscore, "z", numkeys=1) == b"$3\r\n1.5\r\n"
    assert ev(conn, "return {double=3.5}") == b"$3\r\n3.5\r\n"
    conn.call("HELLO", "3")
    assert ev(conn, hgetall, "h", numkeys=1) == b"%1\r\n$1\r\nf\r\n$1\r\nv\r\n"
    assert ev(conn, zscore, "z", numkeys=1) == b",1.5\r\n"
    assert ev(conn, "return {double=3.5}") == b",3.5\r\n"
    # Without setresp(3) the script sees RESP2 replies whatever the client speaks.
    assert ev(conn, "return redis.call('zscore', KEYS[1], 'm')", "z", numkeys=1) == b"$3\r\n1.5\r\n"
    body = "return redis.setresp(4)"
    assert ev(conn, body) == script_err("ERR RESP version must be 2 or 3.", body)


def test_r_client_values(r):
    assert r.eval("return {1, 'two', {3}}", 0) == [1, v(r, "two"), [3]]
    assert r.eval("return redis.call('set', KEYS[1], ARGV[1])", 1, "k", "v") in (True, v(r, "OK"))
    assert r.get("k") == v(r, "v")
    assert r.eval("return false", 0) is None
    with pytest.raises(redis.ResponseError, match="^My Error$"):
        r.eval("return {err='My Error'}", 0)


# -- numkeys, the script cache ---------------------------------------------------

def test_numkeys_errors(conn):
    assert conn.cmd("EVAL", "return 1", 3, "a") == \
        err_bytes("ERR Number of keys can't be greater than number of args")
    assert conn.cmd("EVAL", "return 1", -1) == err_bytes("ERR Number of keys can't be negative")
    assert conn.cmd("EVAL", "return 1", "x") == err_bytes("ERR value is not an integer or out of range")
    assert conn.cmd("EVAL", "return 1") == err_bytes(arity("eval"))
    assert conn.cmd("EVALSHA", sha1("return 1"), 2, "a") == \
        err_bytes("ERR Number of keys can't be greater than number of args")


def test_evalsha_of_an_unknown_sha_is_noscript(conn):
    assert conn.cmd("EVALSHA", "f" * 40, 0) == err_bytes(NOSCRIPT)
    assert conn.cmd("EVALSHA", "abc", 0) == err_bytes(NOSCRIPT)
    assert conn.cmd("EVALSHA_RO", "f" * 40, 0) == err_bytes(NOSCRIPT)


def test_script_load_returns_the_sha1_and_evalsha_runs_it(conn):
    body = "return {KEYS[1], ARGV[1]}"
    sha = sha1(body)
    assert conn.cmd("SCRIPT", "LOAD", body) == b"$40\r\n" + sha.encode() + b"\r\n"
    assert conn.cmd("SCRIPT", "LOAD", body) == b"$40\r\n" + sha.encode() + b"\r\n"
    assert conn.cmd("EVALSHA", sha, 1, "k", "a") == b"*2\r\n$1\r\nk\r\n$1\r\na\r\n"
    assert conn.cmd("EVALSHA", sha.upper(), 1, "k", "a") == b"*2\r\n$1\r\nk\r\n$1\r\na\r\n"
    assert conn.cmd("EVALSHA_RO", sha, 1, "k", "a") == b"*2\r\n$1\r\nk\r\n$1\r\na\r\n"


def test_the_script_cache_is_shared_by_connections(server, conn):
    body = "return 'shared'"
    sha = conn.call("SCRIPT", "LOAD", body).decode()
    with RespConn.to(server) as other:
        assert other.cmd("EVALSHA", sha, 0) == b"$6\r\nshared\r\n"
        assert other.cmd("SCRIPT", "FLUSH") == b"+OK\r\n"
    assert conn.cmd("EVALSHA", sha, 0) == err_bytes(NOSCRIPT)


def test_script_exists(conn):
    loaded = sha1("return 'loaded'")
    conn.cmd("SCRIPT", "LOAD", "return 'loaded'")
    assert conn.cmd("SCRIPT", "EXISTS", loaded, "f" * 40, loaded.upper()) == b"*3\r\n:1\r\n:0\r\n:1\r\n"
    # EVAL caches the script it ran.
    assert ev(conn, "return 'evaled'") == b"$6\r\nevaled\r\n"
    assert conn.cmd("SCRIPT", "EXISTS", sha1("return 'evaled'")) == b"*1\r\n:1\r\n"
    assert conn.cmd("SCRIPT", "EXISTS") == err_bytes("ERR wrong number of arguments for 'script|exists' command")


def test_script_flush_forgets_scripts(conn):
    for opt in ((), ("SYNC",), ("ASYNC",), ("async",)):
        sha = conn.call("SCRIPT", "LOAD", "return 'x'").decode()
        assert conn.cmd("SCRIPT", "EXISTS", sha) == b"*1\r\n:1\r\n"
        assert conn.cmd("SCRIPT", "FLUSH", *opt) == b"+OK\r\n"
        assert conn.cmd("SCRIPT", "EXISTS", sha) == b"*1\r\n:0\r\n"
        assert conn.cmd("EVALSHA", sha, 0) == err_bytes(NOSCRIPT)


def test_script_flush_bad_option_and_other_script_errors(conn):
    bad = err_bytes("ERR SCRIPT FLUSH only support SYNC|ASYNC option")
    assert conn.cmd("SCRIPT", "FLUSH", "BAD") == bad
    assert conn.cmd("SCRIPT", "FLUSH", "SYNC", "ASYNC") == bad
    assert conn.cmd("SCRIPT", "LOAD") == err_bytes("ERR wrong number of arguments for 'script|load' command")
    assert conn.cmd("SCRIPT", "BAD") == err_bytes("ERR unknown subcommand 'BAD'. Try SCRIPT HELP.")


def test_script_kill_when_nothing_runs_is_notbusy(conn):
    assert conn.cmd("SCRIPT", "KILL") == err_bytes("NOTBUSY No scripts in execution right now.")


# -- errors --------------------------------------------------------------------

def test_redis_call_errors_carry_the_script_suffix(conn):
    for body, text in [
        ("return redis.call('nosuch')", "ERR Unknown Redis command called from script"),
        ("return redis.call('get')", "ERR Wrong number of args calling Redis command from script"),
        ("return redis.call('get','a','b')", "ERR Wrong number of args calling Redis command from script"),
        ("return redis.call()", "ERR Please specify at least one argument for this redis lib call"),
    ]:
        assert ev(conn, body) == script_err(text, body), body


def test_commands_not_allowed_from_scripts(conn):
    for cmd in ("'multi'", "'exec'", "'watch','x'", "'subscribe','c'", "'eval','return 1',0",
                "'script','load','return 1'", "'blpop','x',0", "'client','list'"):
        body = f"return redis.call({cmd})"
        assert ev(conn, body) == script_err("ERR This Redis command is not allowed from script", body), body


def test_wrongtype_from_redis_call(conn):
    conn.call("RPUSH", "l", "x")
    body = "return redis.call('get', KEYS[1])"
    assert ev(conn, body, "l", numkeys=1) == script_err(WRONGTYPE, body)


def test_pcall_returns_the_error_as_a_table(conn):
    conn.call("RPUSH", "l", "x")
    assert ev(conn, "local e = redis.pcall('get','l'); return type(e) .. '|' .. e.err") == \
        bulk("table|" + WRONGTYPE)
    # Returned as is, it is an error reply with the original text (no suffix).
    assert ev(conn, "return redis.pcall('get','l')") == err_bytes(WRONGTYPE)
    assert ev(conn, "return redis.pcall('nosuch')") == err_bytes("ERR Unknown Redis command called from script")
    # The script goes on after a failed pcall.
    assert ev(conn, "redis.pcall('get','l'); return 'after'") == b"$5\r\nafter\r\n"


def test_compile_error(conn):
    reply = ev(conn, "return 'a' +")
    assert reply.startswith(b"-ERR Error compiling script (new function): user_script:1: ")
    assert reply.endswith(b"\r\n") and reply.count(b"\r\n") == 1
    reply = conn.cmd("SCRIPT", "LOAD", "return +")
    assert reply.startswith(b"-ERR Error compiling script (new function): user_script:1: ")
    # A script that does not compile is not cached.
    assert conn.cmd("SCRIPT", "EXISTS", sha1("return +")) == b"*1\r\n:0\r\n"


def test_runtime_errors(conn):
    body = "error('x')"
    assert ev(conn, body) == script_err("ERR user_script:1: x", body)
    body = "local x = nil; x()"
    reply = ev(conn, body)
    assert reply.startswith(b"-ERR user_script:1: attempt to call ")
    assert reply.endswith(f" script: {sha1(body)}, on @user_script:1.\r\n".encode())
    # error() with an error table: its text as is, with the suffix.
    body = "error({err='MYERR boom'})"
    assert ev(conn, body) == script_err("MYERR boom", body)


def test_lua_pcall_catches_errors(conn):
    assert ev(conn, "return {pcall(function() error('boom') end)}") == \
        b"*2\r\n$-1\r\n$19\r\nuser_script:1: boom\r\n"


def test_undefined_global_is_an_error(conn):
    body = "return undefinedvar"
    assert ev(conn, body) == script_err(
        "ERR user_script:1: Script attempted to access nonexistent global variable 'undefinedvar'", body)


def test_setting_a_global_is_an_error(conn):
    body = "x = 5"
    assert ev(conn, body) == script_err("ERR user_script:1: Attempt to modify a readonly table", body)


def test_redis_call_arguments_must_be_strings_or_integers(conn):
    for arg in ("{}", "nil", "true"):
        body = f"return redis.call('set', 'a', {arg})"
        assert ev(conn, body) == script_err(
            "ERR Lua redis lib command arguments must be strings or integers", body), body
    assert conn.cmd("EXISTS", "a") == b":0\r\n"
    # Numbers are passed as their text (a float keeps its fraction).
    assert ev(conn, "return redis.call('set', 'a', 1.5)") == b"+OK\r\n"
    assert conn.cmd("GET", "a") == b"$3\r\n1.5\r\n"
    assert ev(conn, "return redis.call('set', 'b', 7)") == b"+OK\r\n"
    assert conn.cmd("GET", "b") == b"$1\r\n7\r\n"


def test_eval_ro_refuses_writes(conn):
    conn.call("SET", "a", "1")
    body = "return redis.call('set', KEYS[1], 'b')"
    assert conn.cmd("EVAL_RO", body, 1, "a") == \
        script_err("ERR Write commands are not allowed from read-only scripts.", body)
    assert conn.cmd("EVAL_RO", "return redis.pcall('set', KEYS[1], 'b')", 1, "a") == \
        err_bytes("ERR Write commands are not allowed from read-only scripts.")
    assert conn.cmd("GET", "a") == b"$1\r\n1\r\n"
    assert conn.cmd("EVAL_RO", "return redis.call('get', KEYS[1])", 1, "a") == b"$1\r\n1\r\n"
    sha = conn.call("SCRIPT", "LOAD", body).decode()
    assert conn.cmd("EVALSHA_RO", sha, 1, "a") == \
        script_err("ERR Write commands are not allowed from read-only scripts.", body)
    assert conn.cmd("EVALSHA", sha, 1, "a") == b"+OK\r\n"
    assert conn.cmd("GET", "a") == b"$1\r\nb\r\n"


# -- writes ----------------------------------------------------------------------

def test_a_script_incrs_a_hundred_times(conn):
    body = "for i = 1, 100 do redis.call('incr', KEYS[1]) end return redis.call('get', KEYS[1])"
    assert ev(conn, body, "n", numkeys=1) == b"$3\r\n100\r\n"
    assert ev(conn, body, "n", numkeys=1) == b"$3\r\n200\r\n"
    assert conn.cmd("GET", "n") == b"$3\r\n200\r\n"


def test_a_script_using_several_keys(r):
    body = """
        redis.call('hset', KEYS[1], 'f', ARGV[1])
        redis.call('rpush', KEYS[2], ARGV[1], ARGV[2])
        redis.call('sadd', KEYS[3], ARGV[2])
        return {redis.call('hget', KEYS[1], 'f'), redis.call('llen', KEYS[2]),
                redis.call('sismember', KEYS[3], ARGV[2])}
    """
    assert r.eval(body, 3, "{x}h", "{x}l", "{x}s", "one", "two") == [v(r, "one"), 2, 1]
    assert r.hgetall("{x}h") == v(r, {"f": "one"})
    assert r.lrange("{x}l", 0, -1) == v(r, ["one", "two"])
    assert r.smembers("{x}s") == v(r, {"two"})


def test_an_error_midway_keeps_the_earlier_writes(conn):
    body = ("redis.call('set', KEYS[1], 'a'); redis.call('incr', KEYS[2]); "
            "redis.call('lpush', KEYS[1], 'z'); redis.call('set', KEYS[3], 'c')")
    assert ev(conn, body, "{x}1", "{x}2", "{x}3", numkeys=3) == script_err(WRONGTYPE, body)
    # No rollback: the writes before the failing call stay, the ones after never ran.
    assert conn.cmd("MGET", "{x}1", "{x}2", "{x}3") == b"*3\r\n$1\r\na\r\n$1\r\n1\r\n$-1\r\n"


# -- libraries ---------------------------------------------------------------------

def test_cjson_round_trip(conn):
    doc = {"name": "grid", "n": 3, "list": [1, 2, 3], "nested": {"ok": True}}
    reply = conn.call("EVAL", "return cjson.encode(cjson.decode(ARGV[1]))", 0, json.dumps(doc))
    assert json.loads(reply) == doc
    assert ev(conn, "local t = cjson.decode(ARGV[1]); return {t.name, t.n, t.list[2]}", json.dumps(doc)) == \
        b"*3\r\n$4\r\ngrid\r\n:3\r\n:2\r\n"
    assert ev(conn, "return cjson.encode({1,2})") == b"$5\r\n[1,2]\r\n"
    assert ev(conn, "return cjson.decode('[1,2,3]')") == b"*3\r\n:1\r\n:2\r\n:3\r\n"


def test_bit_library(conn):
    assert ev(conn, "return bit.band(12, 10)") == b":8\r\n"
    assert ev(conn, "return bit.bor(12, 10)") == b":14\r\n"
    assert ev(conn, "return bit.bxor(12, 10)") == b":6\r\n"
    assert ev(conn, "return bit.tohex(255)") == b"$8\r\n000000ff\r\n"
    assert ev(conn, "return bit.tohex(65535, 4)") == b"$4\r\nffff\r\n"


def test_sha1hex(conn):
    assert ev(conn, "return redis.sha1hex('')") == b"$40\r\nda39a3ee5e6b4b0d3255bfef95601890afd80709\r\n"
    assert ev(conn, "return redis.sha1hex(ARGV[1])", "deltagrid") == \
        b"$40\r\n" + hashlib.sha1(b"deltagrid").hexdigest().encode() + b"\r\n"


def test_standard_library_functions(conn):
    assert ev(conn, "return string.format('%05.2f|%s|%d', 3.14159, 'x', 42)") == b"$10\r\n03.14|x|42\r\n"
    assert ev(conn, "return tonumber('0x10')") == b":16\r\n"
    assert ev(conn, "return tonumber(ARGV[1]) + 1", "41") == b":42\r\n"
    assert ev(conn, "return tonumber('12abc')") == b"$-1\r\n"
    assert ev(conn, "return table.concat({'a','b','c'}, '-')") == b"$5\r\na-b-c\r\n"
    assert ev(conn, "return math.floor(-2.5)") == b":-3\r\n"
    assert ev(conn, "return string.upper(ARGV[1]) .. #ARGV[1]", "abc") == b"$4\r\nABC3\r\n"
    assert ev(conn, "return _VERSION") == b"$7\r\nLua 5.1\r\n"


def test_os_and_io_are_not_available(conn):
    for body, name in [("return os.execute('ls')", "os"), ("return io", "io"),
                       ("return print", "print"), ("return require", "require"),
                       ("return dofile", "dofile")]:
        assert ev(conn, body) == script_err(
            f"ERR user_script:1: Script attempted to access nonexistent global variable '{name}'", body), body


def test_loadstring_cannot_load_code(conn):
    # Redis 7.0 keeps the name (a function) but it loads nothing.
    assert ev(conn, "return type(loadstring)") == b"$8\r\nfunction\r\n"
    assert ev(conn, "return loadstring('return 1')") == b"$-1\r\n"


# -- redis-py helpers ---------------------------------------------------------------

def test_register_script_falls_back_to_eval_after_flush(r):
    body = "return {KEYS[1], ARGV[1], redis.call('incr', KEYS[1])}"
    s = r.register_script(body)
    assert s.sha == sha1(body)
    assert s(keys=["n"], args=["a"]) == [v(r, "n"), v(r, "a"), 1]
    assert r.script_exists(s.sha) == [True]
    r.script_flush()
    assert r.script_exists(s.sha) == [False]
    # EVALSHA gets NOSCRIPT, the Script object loads it and retries.
    assert s(keys=["n"], args=["b"]) == [v(r, "n"), v(r, "b"), 2]
    assert r.script_exists(s.sha) == [True]


def test_redis_py_lock(r):
    lock = r.lock("lk", timeout=5)
    assert lock.acquire(blocking=False)
    assert lock.locked() and lock.owned()
    other = r.lock("lk", timeout=5)
    assert not other.acquire(blocking=False)
    assert not other.owned()
    assert lock.extend(10)
    assert 10_000 < r.pttl("lk") <= 15_000
    assert lock.reacquire()
    assert 0 < r.pttl("lk") <= 5_000
    lock.release()
    assert not lock.locked()
    assert r.exists("lk") == 0
    assert other.acquire(blocking=False)
    # Someone else's value under the name: the release script refuses.
    r.set("lk", "stolen")
    with pytest.raises(redis.exceptions.LockNotOwnedError):
        other.release()
    assert r.get("lk") == v(r, "stolen")


# -- transactions, tracking --------------------------------------------------------

def test_eval_inside_multi_exec(conn):
    assert conn.cmd("MULTI") == b"+OK\r\n"
    assert ev(conn, "return redis.call('incr', KEYS[1])", "n", numkeys=1) == b"+QUEUED\r\n"
    assert ev(conn, "return redis.call('incr', KEYS[1])", "n", numkeys=1) == b"+QUEUED\r\n"
    assert ev(conn, "error('x')") == b"+QUEUED\r\n"
    assert conn.cmd("EVALSHA", "f" * 40, 0) == b"+QUEUED\r\n"
    assert conn.cmd("EXEC") == b"*4\r\n:1\r\n:2\r\n" + script_err("ERR user_script:1: x", "error('x')") + \
        err_bytes(NOSCRIPT)


def test_eval_arity_error_inside_multi_aborts_exec(conn):
    assert conn.cmd("MULTI") == b"+OK\r\n"
    assert conn.cmd("EVAL", "return 1") == err_bytes(arity("eval"))
    assert conn.cmd("EXEC") == err_bytes("EXECABORT Transaction discarded because of previous errors.")


def test_a_script_writing_a_watched_key_aborts_exec(server, conn):
    assert conn.cmd("WATCH", "w") == b"+OK\r\n"
    with RespConn.to(server) as other:
        assert ev(other, "return redis.call('set', KEYS[1], 'theirs')", "w", numkeys=1) == b"+OK\r\n"
    assert conn.cmd("MULTI") == b"+OK\r\n"
    assert conn.cmd("SET", "w", "mine") == b"+QUEUED\r\n"
    assert conn.cmd("EXEC") == b"*-1\r\n"
    assert conn.cmd("GET", "w") == b"$6\r\ntheirs\r\n"


def test_a_read_only_script_does_not_abort_exec(server, conn):
    conn.call("SET", "w", "1")
    assert conn.cmd("WATCH", "w") == b"+OK\r\n"
    with RespConn.to(server) as other:
        assert ev(other, "return redis.call('get', KEYS[1])", "w", numkeys=1) == b"$1\r\n1\r\n"
    assert conn.cmd("MULTI") == b"+OK\r\n"
    assert conn.cmd("SET", "w", "mine") == b"+QUEUED\r\n"
    assert conn.cmd("EXEC") == b"*1\r\n+OK\r\n"


def test_a_key_written_by_a_script_invalidates_a_tracking_client(server):
    with RespConn.to(server) as tracker, RespConn.to(server) as writer:
        assert isinstance(tracker.call("HELLO", "3"), dict)
        assert tracker.call("CLIENT", "TRACKING", "ON") == "OK"
        assert tracker.call("GET", "tk") is None
        assert ev(writer, "return redis.call('set', KEYS[1], 'x')", "tk", numkeys=1) == b"+OK\r\n"
        assert tracker.next_push(5.0) == Push([b"invalidate", [b"tk"]])


# -- a long-running script: BUSY and SCRIPT KILL --------------------------------------

def poll_until_busy(conn, timeout=10.0):
    deadline = time.monotonic() + timeout
    while True:
        reply = conn.cmd("PING")
        if reply.startswith(b"-BUSY"):
            return reply
        assert reply == b"+PONG\r\n", reply
        if time.monotonic() >= deadline:
            pytest.fail("the script never made the server BUSY")
        time.sleep(0.01)


def test_busy_script_can_be_killed(make_server):
    # Its own server: it changes busy-reply-threshold.
    server = make_server()
    with RespConn.to(server) as admin, RespConn(server.host, server.port, timeout=30) as runner:
        old = admin.call("CONFIG", "GET", "busy-reply-threshold")[1]
        assert admin.cmd("CONFIG", "SET", "busy-reply-threshold", "100") == b"+OK\r\n"
        try:
            runner.send("EVAL", "while true do end", 0)
            assert poll_until_busy(admin) == err_bytes(BUSY)
            assert admin.cmd("GET", "x") == err_bytes(BUSY)
            assert admin.cmd("SCRIPT", "KILL") == b"+OK\r\n"
            killed = runner.read_raw(timeout=10)
            assert killed.startswith(b"-ERR Script killed by user with SCRIPT KILL")
            assert admin.cmd("PING") == b"+PONG\r\n"
            assert runner.cmd("PING") == b"+PONG\r\n"
            assert admin.cmd("SCRIPT", "KILL") == err_bytes("NOTBUSY No scripts in execution right now.")
        finally:
            admin.cmd("CONFIG", "SET", "busy-reply-threshold", old)
        assert admin.call("CONFIG", "GET", "busy-reply-threshold")[1] == old


def test_a_script_that_wrote_cannot_be_killed(make_server):
    server = make_server()
    # Writes, then spins for about 1.5 s of server time, then returns.
    body = """
        redis.call('set', KEYS[1], 'w')
        local t = redis.call('time')
        local start = t[1] * 1000000 + t[2]
        while true do
            t = redis.call('time')
            if t[1] * 1000000 + t[2] - start > 1500000 then break end
        end
        return 'done'
    """
    with RespConn.to(server) as admin, RespConn(server.host, server.port, timeout=30) as runner:
        old = admin.call("CONFIG", "GET", "busy-reply-threshold")[1]
        assert admin.cmd("CONFIG", "SET", "busy-reply-threshold", "100") == b"+OK\r\n"
        try:
            runner.send("EVAL", body, 1, "k")
            assert poll_until_busy(admin) == err_bytes(BUSY)
            assert admin.cmd("SCRIPT", "KILL") == err_bytes(
                "UNKILLABLE Sorry the script already executed write commands against the dataset. "
                "You can either wait the script termination or kill the server in a hard way "
                "using the SHUTDOWN NOSAVE command.")
            assert runner.read_raw(timeout=20) == b"$4\r\ndone\r\n"
            assert admin.cmd("GET", "k") == b"$1\r\nw\r\n"
        finally:
            admin.cmd("CONFIG", "SET", "busy-reply-threshold", old)


@pytest.mark.deltagrid_only  # Redis does not bound its Lua memory
def test_a_script_past_script_memory_fails_and_the_next_runs(make_server):
    server = make_server(config='[node]\nscript_memory = "16MiB"\n')
    with RespConn.to(server) as c:
        body = "local t = {} for i = 1, 10000000 do t[i] = i end return #t"
        reply = c.cmd("EVAL", body, 0)
        assert reply.startswith(b"-ERR ") and b"not enough memory" in reply, reply
        assert c.cmd("EVAL", "return 1", 0) == b":1\r\n"
        assert c.cmd("PING") == b"+PONG\r\n"


def test_cmsgpack_packs_as_redis_and_round_trips(conn):
    hexed = "local h = '' for i = 1, #e do h = h .. string.format('%02x', string.byte(e, i)) end return h"
    assert ev(conn, "local e = cmsgpack.pack(0.1) " + hexed) == bulk(b"cb3fb999999999999a")
    assert ev(conn, "local e = cmsgpack.pack(-1099511627776) " + hexed) == bulk(b"d3ffffff0000000000")
    assert ev(conn, "local e = cmsgpack.pack({1, 2, 'x'}, true) " + hexed) == bulk(b"930102a178c3")
    body = """
        local t = {a = {1, 2, 3}, s = string.rep('y', 300), n = -7, f = 1.5}
        local u = cmsgpack.unpack(cmsgpack.pack(t))
        local off, one = cmsgpack.unpack_one(cmsgpack.pack('p', 'q'), 0)
        return {u.a[3], #u.s, u.n, tostring(u.f), off, one}"""
    assert ev(conn, body) == b"*6\r\n:3\r\n:300\r\n:-7\r\n$3\r\n1.5\r\n:2\r\n$1\r\np\r\n"
    reply = ev(conn, "return cmsgpack.unpack('\\221\\255\\255')")
    assert reply.startswith(b"-ERR ") and b"Missing bytes in input." in reply, reply
