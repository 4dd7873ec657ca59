"""AUTH and requirepass, black-box: the cases of Redis 7.0.15's tests/unit/auth.tcl
(which starts its own servers, so it cannot run against an external one),
written anew, plus HELLO AUTH and AUTH as a named ACL user. Run against
redis-server with DELTAGRID_TEST_TARGET=redis.

Not carried over: "MASTERAUTH test with binary password" (replication).
"""
import hashlib

import pytest
import redis

from helpers import SYNTAX, arity
from helpers_net import RespConn, err_bytes

NOAUTH = "NOAUTH Authentication required."
WRONGPASS = "WRONGPASS invalid username-password pair or user is disabled."
NO_PASSWORD_CONFIGURED = ("ERR AUTH <password> called without any password configured for the "
                          "default user. Are you sure your configuration is correct?")
NOAUTH_HELLO = ("NOAUTH HELLO must be called with the client already authenticated, otherwise "
                "the HELLO AUTH <user> <pass> option can be used to authenticate the client and "
                "select the RESP protocol version at the same time")


@pytest.fixture
def pw_server(make_server):
    return make_server(extra_args=["--requirepass", "foobar"])


def hello_fields(reply):
    """HELLO's RESP2 reply (flat list) as a dict with str keys."""
    it = iter(reply)
    return {k.decode(): val for k, val in zip(it, it)}


# ---------------------------------------------------- no password configured

def test_auth_fails_if_no_password_configured(conn):
    assert conn.cmd("AUTH", "foo") == err_bytes(NO_PASSWORD_CONFIGURED)


def test_auth_arity_check(conn):
    assert conn.cmd("AUTH", "a", "b", "c") == err_bytes(SYNTAX)
    assert conn.cmd("AUTH") == err_bytes(arity("auth"))


def test_auth_default_user_nopass_accepts_any_password(conn):
    assert conn.cmd("AUTH", "default", "anything") == b"+OK\r\n"
    assert conn.call("ACL", "WHOAMI") == b"default"


def test_auth_unknown_user_fails_without_requirepass(conn):
    assert conn.cmd("AUTH", "nosuchuser", "pass") == err_bytes(WRONGPASS)


# ------------------------------------------------------- requirepass foobar

def test_auth_fails_with_wrong_password(pw_server):
    with RespConn.to(pw_server) as c:
        assert c.cmd("AUTH", "wrong!") == err_bytes(WRONGPASS)


def test_command_requires_auth(pw_server):
    with RespConn.to(pw_server) as c:
        assert c.cmd("SET", "foo", "bar") == err_bytes(NOAUTH)
        assert c.cmd("ACL", "WHOAMI") == err_bytes(NOAUTH)


def test_auth_succeeds_with_right_password(pw_server):
    with RespConn.to(pw_server) as c:
        assert c.cmd("AUTH", "foobar") == b"+OK\r\n"


def test_commands_work_after_auth(pw_server):
    with RespConn.to(pw_server) as c:
        assert c.cmd("AUTH", "foobar") == b"+OK\r\n"
        assert c.cmd("SET", "foo", "100") == b"+OK\r\n"
        assert c.cmd("INCR", "foo") == b":101\r\n"


def test_auth_default_user_with_requirepass(pw_server):
    with RespConn.to(pw_server) as c:
        assert c.cmd("AUTH", "default", "wrong") == err_bytes(WRONGPASS)
        assert c.cmd("GET", "k") == err_bytes(NOAUTH)
        assert c.cmd("AUTH", "default", "foobar") == b"+OK\r\n"
        assert c.call("ACL", "WHOAMI") == b"default"


def test_failed_auth_keeps_previous_authentication(pw_server):
    with RespConn.to(pw_server) as c:
        assert c.cmd("AUTH", "foobar") == b"+OK\r\n"
        assert c.cmd("AUTH", "wrong") == err_bytes(WRONGPASS)
        assert c.cmd("PING") == b"+PONG\r\n"


def test_unauthenticated_multibulk_length_limited(pw_server):
    with RespConn.to(pw_server) as c:
        c.send_raw(b"*100\r\n")
        got = c.expect_closed()
        assert got == b"-ERR Protocol error: unauthenticated multibulk length\r\n"


def test_unauthenticated_bulk_length_limited(pw_server):
    with RespConn.to(pw_server) as c:
        c.send_raw(b"*1\r\n$100000000\r\n")
        got = c.expect_closed()
        assert got == b"-ERR Protocol error: unauthenticated bulk length\r\n"


def test_hello_requires_auth_when_password_set(pw_server):
    with RespConn.to(pw_server) as c:
        assert c.cmd("HELLO", "2") == err_bytes(NOAUTH_HELLO)
        assert c.cmd("HELLO", "2", "AUTH", "default", "wrong") == err_bytes(WRONGPASS)
        assert c.cmd("GET", "k") == err_bytes(NOAUTH)
        reply = hello_fields(c.call("HELLO", "2", "AUTH", "default", "foobar"))
        assert reply["server"] == b"redis"
        assert reply["proto"] == 2
        assert c.call("ACL", "WHOAMI") == b"default"


def test_auth_after_config_set_requirepass(conn, server):
    assert conn.cmd("CONFIG", "SET", "requirepass", "newpass") == b"+OK\r\n"
    # the connection that set it stays authenticated
    assert conn.cmd("PING") == b"+PONG\r\n"
    with RespConn.to(server) as c:
        assert c.cmd("PING") == err_bytes(NOAUTH)
        assert c.cmd("AUTH", "newpass") == b"+OK\r\n"
        assert c.cmd("PING") == b"+PONG\r\n"
    # requirepass is the default user's password (visible through ACL)
    digest = hashlib.sha256(b"newpass").hexdigest()
    assert conn.call("ACL", "LIST") == [f"user default on #{digest} ~* &* +@all".encode()]


# ---------------------------------------------------------- binary passwords

def test_auth_fails_when_binary_password_is_wrong(conn, server):
    assert conn.cmd("CONFIG", "SET", "requirepass", b"abc\x00def") == b"+OK\r\n"
    with RespConn.to(server) as c:
        assert c.cmd("AUTH", "abc") == err_bytes(WRONGPASS)
        assert c.cmd("AUTH", b"abc\x00de") == err_bytes(WRONGPASS)


def test_auth_succeeds_when_binary_password_is_correct(conn, server):
    assert conn.cmd("CONFIG", "SET", "requirepass", b"abc\x00def") == b"+OK\r\n"
    with RespConn.to(server) as c:
        assert c.cmd("AUTH", b"abc\x00def") == b"+OK\r\n"
        assert c.cmd("PING") == b"+PONG\r\n"


def test_acl_user_binary_password(conn, server):
    assert conn.cmd("ACL", "SETUSER", "bin", "on", b">p\x00w\xff", "+@all", "~*") == b"+OK\r\n"
    with RespConn.to(server) as c:
        assert c.cmd("AUTH", "bin", b"p\x00w") == err_bytes(WRONGPASS)
        assert c.cmd("AUTH", "bin", b"p\x00w\xff") == b"+OK\r\n"
        assert c.call("ACL", "WHOAMI") == b"bin"


# ------------------------------------------------------------- named users

def test_auth_named_user_then_whoami(conn, server):
    assert conn.cmd("ACL", "SETUSER", "alice", "on", ">alicepw", "+@all", "~*") == b"+OK\r\n"
    with RespConn.to(server) as c:
        assert c.call("ACL", "WHOAMI") == b"default"
        assert c.cmd("AUTH", "alice", "alicepw") == b"+OK\r\n"
        assert c.call("ACL", "WHOAMI") == b"alice"
        # a failed AUTH leaves the connection as alice
        assert c.cmd("AUTH", "alice", "nope") == err_bytes(WRONGPASS)
        assert c.call("ACL", "WHOAMI") == b"alice"
        assert c.cmd("AUTH", "default", "x") == b"+OK\r\n"
        assert c.call("ACL", "WHOAMI") == b"default"


def test_auth_named_user_wrong_password_and_disabled(conn, server):
    assert conn.cmd("ACL", "SETUSER", "bob", ">bobpw", "+@all") == b"+OK\r\n"  # off
    with RespConn.to(server) as c:
        assert c.cmd("AUTH", "bob", "bobpw") == err_bytes(WRONGPASS)
        assert conn.cmd("ACL", "SETUSER", "bob", "on") == b"+OK\r\n"
        assert c.cmd("AUTH", "bob", "wrong") == err_bytes(WRONGPASS)
        assert c.cmd("AUTH", "bob", "bobpw") == b"+OK\r\n"
        assert c.call("ACL", "WHOAMI") == b"bob"


def test_hello_auth_named_user(conn, server):
    assert conn.cmd("ACL", "SETUSER", "carol", "on", ">cpw", "+@all", "~*") == b"+OK\r\n"
    with RespConn.to(server) as c:
        assert c.cmd("HELLO", "2", "AUTH", "carol", "bad") == err_bytes(WRONGPASS)
        assert c.call("ACL", "WHOAMI") == b"default"
        reply = hello_fields(c.call("HELLO", "2", "AUTH", "carol", "cpw"))
        assert reply["proto"] == 2
        assert c.call("ACL", "WHOAMI") == b"carol"
    with RespConn.to(server) as c:
        reply = c.call("HELLO", "3", "AUTH", "carol", "cpw")
        assert reply[b"proto"] == 3
        assert c.call("ACL", "WHOAMI") == b"carol"


def test_hello_auth_works_when_default_user_has_no_commands(conn, server):
    # acl.tcl: "When default user has no command permission, hello command
    # still works for other users"
    assert conn.cmd("ACL", "SETUSER", "secure-user", ">supass", "on", "+@all") == b"+OK\r\n"
    assert conn.cmd("ACL", "SETUSER", "default", "-@all") == b"+OK\r\n"
    assert conn.cmd("PING") == err_bytes(
        "NOPERM this user has no permissions to run the 'ping' command")
    with RespConn.to(server) as c:
        reply = hello_fields(c.call("HELLO", "2", "AUTH", "secure-user", "supass"))
        assert reply["proto"] == 2
        assert c.call("ACL", "WHOAMI") == b"secure-user"
        assert c.cmd("ACL", "SETUSER", "default", "nopass", "+@all") == b"+OK\r\n"
    assert conn.cmd("AUTH", "default", "") == b"+OK\r\n"
    assert conn.cmd("PING") == b"+PONG\r\n"


def test_auth_as_user_then_whoami_redis_py(conn, server):
    assert conn.cmd("ACL", "SETUSER", "app", "on", ">apppw", "~app:*", "+@read",
                    "+acl|whoami") == b"+OK\r\n"
    c = redis.Redis(host=server.host, port=server.port, protocol=2, decode_responses=True,
                    username="app", password="apppw")
    try:
        assert c.acl_whoami() == "app"
    finally:
        c.close()
    c = redis.Redis(host=server.host, port=server.port, protocol=2, decode_responses=True,
                    username="app", password="wrong")
    try:
        with pytest.raises(redis.AuthenticationError):
            c.ping()
    finally:
        c.close()
