"""Connection and server commands: PING ECHO HELLO AUTH SELECT QUIT RESET CLIENT COMMAND INFO
DBSIZE FLUSHALL FLUSHDB TIME CONFIG, unknown-command and protocol errors.

Each test gets a fresh server (many of these change server or connection state).
"""
import fnmatch
import time

import pytest
import redis

from helpers import NOT_INT, SYNTAX, arity, make_client, v, wait_until
from helpers_net import RespError, Map, RespConn, Verbatim, err_bytes, parse_one

NOAUTH = "NOAUTH Authentication required."
WRONGPASS = "WRONGPASS invalid username-password pair or user is disabled."
NOAUTH_HELLO = ("NOAUTH HELLO must be called with the client already authenticated, otherwise the "
                "HELLO AUTH <user> <pass> option can be used to authenticate the client and select "
                "the RESP protocol version at the same time")
HELLO_KEYS = ["server", "version", "proto", "id", "mode", "role", "modules"]


@pytest.fixture
def auth_server(make_server):
    return make_server(extra_args=["--requirepass", "secret"])


def parse_client_line(line):
    """'id=3 addr=... name= ...' -> dict (values may be empty)."""
    out = {}
    for part in line.split(" "):
        k, _, val = part.partition("=")
        out[k] = val
    return out


def info_text(raw_value):
    """INFO reply value (bytes or RESP3 Verbatim) -> str."""
    assert isinstance(raw_value, bytes)
    return raw_value.decode()


def info_sections(text):
    """Parse INFO text into {section_header: {field: value}}."""
    sections = {}
    current = None
    for line in text.split("\r\n"):
        if not line:
            continue
        if line.startswith("# "):
            current = line[2:]
            sections[current] = {}
        else:
            assert current is not None, f"field before any section header: {line!r}"
            k, sep, val = line.partition(":")
            assert sep, f"malformed INFO line {line!r}"
            sections[current][k] = val
    return sections


# ---------------------------------------------------------------- PING ECHO

def test_ping(conn):
    assert conn.cmd("PING") == b"+PONG\r\n"
    assert conn.cmd("ping", "hello world") == b"$11\r\nhello world\r\n"
    assert conn.cmd("PING", "") == b"$0\r\n\r\n"
    assert conn.cmd("PING", "a", "b") == err_bytes(arity("ping"))
    conn.cmd("HELLO", "3")
    assert conn.cmd("PING") == b"+PONG\r\n"
    assert conn.cmd("PING", "x") == b"$1\r\nx\r\n"


def test_echo(conn):
    assert conn.cmd("ECHO", "hi") == b"$2\r\nhi\r\n"
    assert conn.cmd("ECHO", b"\x00\r\n") == b"$3\r\n\x00\r\n\r\n"
    assert conn.cmd("ECHO") == err_bytes(arity("echo"))
    assert conn.cmd("ECHO", "a", "b") == err_bytes(arity("echo"))


# --------------------------------------------------------------------- HELLO

def test_hello_3_map(conn):
    my_id = conn.call("CLIENT", "ID")
    raw = conn.cmd("HELLO", "3")
    assert raw.startswith(b"%7\r\n")
    reply = parse_one(raw)
    assert isinstance(reply, Map)
    assert [k.decode() for k, _ in reply.items()] == HELLO_KEYS
    d = {k.decode(): val for k, val in reply.items()}
    assert isinstance(d["server"], bytes) and d["server"]
    assert isinstance(d["version"], bytes) and d["version"][:1].isdigit()
    assert d["proto"] == 3
    assert d["id"] == my_id
    assert d["mode"] == b"standalone"
    assert d["role"] == b"master"
    assert d["modules"] == []
    assert raw.endswith(b"$7\r\nmodules\r\n*0\r\n")
    assert b"$5\r\nproto\r\n:3\r\n$2\r\nid\r\n:%d\r\n" % my_id in raw


def test_hello_2_flat_array(conn):
    raw = conn.cmd("HELLO", "2")
    assert raw.startswith(b"*14\r\n")
    reply = parse_one(raw)
    assert [k.decode() for k in reply[::2]] == HELLO_KEYS
    d = dict(zip([k.decode() for k in reply[::2]], reply[1::2]))
    assert d["proto"] == 2
    assert d["mode"] == b"standalone" and d["role"] == b"master" and d["modules"] == []


def test_hello_without_version_reports_current_protocol(conn):
    reply = conn.call("HELLO")
    assert reply[4:6] == [b"proto", 2]
    conn.cmd("HELLO", "3")
    reply = conn.call("HELLO")
    assert isinstance(reply, Map)
    assert dict(reply)[b"proto"] == 3


def test_hello_switches_reply_protocol(conn):
    conn.cmd("HSET", "h", "f", "v")
    assert conn.cmd("HGETALL", "h") == b"*2\r\n$1\r\nf\r\n$1\r\nv\r\n"
    assert conn.cmd("GET", "nokey") == b"$-1\r\n"
    conn.cmd("HELLO", "3")
    assert conn.cmd("HGETALL", "h") == b"%1\r\n$1\r\nf\r\n$1\r\nv\r\n"
    assert conn.cmd("GET", "nokey") == b"_\r\n"
    conn.cmd("HELLO", "2")
    assert conn.cmd("HGETALL", "h") == b"*2\r\n$1\r\nf\r\n$1\r\nv\r\n"
    assert conn.cmd("GET", "nokey") == b"$-1\r\n"


def test_hello_errors(conn):
    assert conn.cmd("HELLO", "4") == b"-NOPROTO unsupported protocol version\r\n"
    assert conn.cmd("HELLO", "1") == b"-NOPROTO unsupported protocol version\r\n"
    assert conn.cmd("HELLO", "0") == b"-NOPROTO unsupported protocol version\r\n"
    assert conn.cmd("HELLO", "abc") == err_bytes(
        "ERR Protocol version is not an integer or out of range")
    assert conn.cmd("HELLO", "3", "foo") == err_bytes("ERR Syntax error in HELLO option 'foo'")
    assert conn.cmd("HELLO", "3", "AUTH", "default") == err_bytes(
        "ERR Syntax error in HELLO option 'AUTH'")
    assert conn.cmd("HELLO", "3", "SETNAME") == err_bytes(
        "ERR Syntax error in HELLO option 'SETNAME'")
    assert conn.cmd("HELLO", "3", "SETNAME", "a b") == err_bytes(
        "ERR Client names cannot contain spaces, newlines or special characters.")
    # a failed HELLO leaves the protocol unchanged
    assert conn.cmd("GET", "nokey") == b"$-1\r\n"


def test_hello_setname(conn):
    reply = conn.call("HELLO", "3", "SETNAME", "myconn")
    assert isinstance(reply, Map)
    assert conn.cmd("CLIENT", "GETNAME") == b"$6\r\nmyconn\r\n"
    info = parse_client_line(conn.call("CLIENT", "INFO").decode().strip())
    assert info["name"] == "myconn"
    assert info["resp"] == "3"


def test_hello_auth_with_requirepass(auth_server):
    with RespConn.to(auth_server) as c:
        assert c.cmd("HELLO", "3") == err_bytes(NOAUTH_HELLO)
        assert c.cmd("HELLO") == err_bytes(NOAUTH_HELLO)
        assert c.cmd("HELLO", "3", "AUTH", "default", "wrong") == err_bytes(WRONGPASS)
        assert c.cmd("GET", "k") == err_bytes(NOAUTH)
        reply = c.call("HELLO", "3", "AUTH", "default", "secret", "SETNAME", "n1")
        assert isinstance(reply, Map) and dict(reply)[b"proto"] == 3
        assert c.cmd("GET", "k") == b"_\r\n"
        assert c.cmd("CLIENT", "GETNAME") == b"$2\r\nn1\r\n"
    with RespConn.to(auth_server) as c:
        reply = c.call("HELLO", "2", "AUTH", "default", "secret")
        assert reply[4:6] == [b"proto", 2]
        assert c.cmd("GET", "k") == b"$-1\r\n"


# ---------------------------------------------------------------------- AUTH

def test_noauth_before_authentication(auth_server):
    with RespConn.to(auth_server) as c:
        for args in [("PING",), ("GET", "k"), ("SET", "k", "v"), ("CLIENT", "ID"),
                     ("SELECT", "0"), ("ECHO", "x"), ("DBSIZE",), ("INFO",)]:
            assert c.cmd(*args) == b"-NOAUTH Authentication required.\r\n", args
        # unknown commands are reported as unknown even before AUTH
        assert c.cmd("FOO") == err_bytes("ERR unknown command 'FOO', with args beginning with: ")


def test_auth_wrongpass_and_success(auth_server):
    with RespConn.to(auth_server) as c:
        assert c.cmd("AUTH", "wrong") == err_bytes(WRONGPASS)
        assert c.cmd("AUTH", "default", "wrong") == err_bytes(WRONGPASS)
        assert c.cmd("AUTH", "nosuchuser", "secret") == err_bytes(WRONGPASS)
        assert c.cmd("GET", "k") == err_bytes(NOAUTH)
        assert c.cmd("AUTH", "default", "secret") == b"+OK\r\n"
        assert c.cmd("SET", "k", "v") == b"+OK\r\n"
        assert c.cmd("GET", "k") == b"$1\r\nv\r\n"
    with RespConn.to(auth_server) as c:
        assert c.cmd("AUTH", "secret") == b"+OK\r\n"
        assert c.cmd("GET", "k") == b"$1\r\nv\r\n"
        assert c.cmd("AUTH", "a", "b", "c") == err_bytes(SYNTAX)
        assert c.cmd("AUTH") == err_bytes(arity("auth"))


def test_auth_without_requirepass(conn):
    assert conn.cmd("AUTH", "x") == err_bytes(
        "ERR AUTH <password> called without any password configured for the default user. "
        "Are you sure your configuration is correct?")
    # the default user has no password, so any password works with the 2-argument form
    assert conn.cmd("AUTH", "default", "whatever") == b"+OK\r\n"


def test_redis_py_with_password(auth_server):
    for proto in (2, 3):
        with pytest.raises(redis.AuthenticationError):
            make_client(auth_server, proto, True).ping()
        c = make_client(auth_server, proto, True, password="secret")
        assert c.ping() is True
        assert c.set("k", "v") is True
        c.close()
        c = make_client(auth_server, proto, True, username="default", password="secret")
        assert c.get("k") == "v"
        c.close()


def test_reset_deauthenticates(auth_server):
    with RespConn.to(auth_server) as c:
        assert c.cmd("AUTH", "secret") == b"+OK\r\n"
        assert c.cmd("RESET") == b"+RESET\r\n"
        assert c.cmd("GET", "k") == err_bytes(NOAUTH)


# -------------------------------------------------------------------- SELECT

def test_select(conn):
    assert conn.cmd("SELECT", "0") == b"+OK\r\n"
    assert conn.cmd("SELECT", "-1") == err_bytes("ERR DB index is out of range")
    assert conn.cmd("SELECT", "16") == err_bytes("ERR DB index is out of range")
    assert conn.cmd("SELECT", "abc") == err_bytes(NOT_INT)
    assert conn.cmd("SELECT") == err_bytes(arity("select"))


def test_select_matches_config_databases(conn):
    n = int(conn.call("CONFIG", "GET", "databases")[1])
    assert n >= 1
    assert conn.cmd("SELECT", str(n - 1)) == b"+OK\r\n"
    assert conn.cmd("SELECT", str(n)) == err_bytes("ERR DB index is out of range")


@pytest.mark.deltagrid_only
def test_select_1_out_of_range(conn):
    assert conn.cmd("SELECT", "1") == err_bytes("ERR DB index is out of range")


# ---------------------------------------------------------------- QUIT RESET

def test_quit_closes_connection(conn):
    conn.cmd("SET", "k", "v")
    assert conn.cmd("QUIT") == b"+OK\r\n"
    assert conn.is_closed()


def test_quit_after_pipelined_commands(conn):
    conn.send_raw(b"*1\r\n$4\r\nPING\r\n*1\r\n$4\r\nQUIT\r\n*1\r\n$4\r\nPING\r\n")
    assert conn.read_raw() == b"+PONG\r\n"
    assert conn.read_raw() == b"+OK\r\n"
    assert conn.is_closed()


def test_reset_restores_connection_defaults(conn):
    conn.cmd("HELLO", "3", "SETNAME", "named")
    assert conn.cmd("CLIENT", "TRACKING", "ON") == b"+OK\r\n"
    info = parse_client_line(conn.call("CLIENT", "INFO").decode().strip())
    assert "t" in info["flags"] and info["resp"] == "3" and info["name"] == "named"
    assert conn.cmd("RESET") == b"+RESET\r\n"
    # back to RESP2, no name, no tracking
    assert conn.cmd("CLIENT", "GETNAME") == b"$-1\r\n"
    assert conn.cmd("GET", "nokey") == b"$-1\r\n"
    info = parse_client_line(conn.call("CLIENT", "INFO").decode().strip())
    assert info["name"] == "" and info["resp"] == "2" and "t" not in info["flags"]
    assert info["db"] == "0"
    assert conn.cmd("RESET") == b"+RESET\r\n"


# -------------------------------------------------------------------- CLIENT

def test_client_id(server):
    with RespConn.to(server) as a:
        ida = a.call("CLIENT", "ID")
        with RespConn.to(server) as b:  # connected after a was served: gets a larger id
            idb = b.call("CLIENT", "ID")
        assert isinstance(ida, int) and isinstance(idb, int)
        assert ida > 0 and idb > ida
        assert a.call("CLIENT", "ID") == ida
        assert a.cmd("CLIENT", "ID", "x") == err_bytes(arity("client|id"))


def test_client_setname_getname(conn):
    assert conn.cmd("CLIENT", "GETNAME") == b"$-1\r\n"
    assert conn.cmd("CLIENT", "SETNAME", "worker-1") == b"+OK\r\n"
    assert conn.cmd("CLIENT", "GETNAME") == b"$8\r\nworker-1\r\n"
    bad = err_bytes("ERR Client names cannot contain spaces, newlines or special characters.")
    for name in ["a b", "a\nb", "a\x01", "caf\xc3\xa9".encode("latin-1")]:
        assert conn.cmd("CLIENT", "SETNAME", name) == bad, name
    assert conn.cmd("CLIENT", "GETNAME") == b"$8\r\nworker-1\r\n"
    assert conn.cmd("CLIENT", "SETNAME", "") == b"+OK\r\n"  # empty clears the name
    assert conn.cmd("CLIENT", "GETNAME") == b"$-1\r\n"
    conn.cmd("HELLO", "3")
    assert conn.cmd("CLIENT", "GETNAME") == b"_\r\n"
    assert conn.cmd("CLIENT", "SETNAME") == err_bytes(arity("client|setname"))
    assert conn.cmd("CLIENT", "GETNAME", "x") == err_bytes(arity("client|getname"))


def test_client_list_and_info(server):
    with RespConn.to(server) as a, RespConn.to(server) as b:
        a.cmd("CLIENT", "SETNAME", "alpha")
        ida, idb = a.call("CLIENT", "ID"), b.call("CLIENT", "ID")
        raw = a.cmd("CLIENT", "LIST")
        assert raw.startswith(b"$")
        text = parse_one(raw).decode()
        assert text.endswith("\n") and "\r" not in text
        lines = text[:-1].split("\n")
        clients = {int(parse_client_line(ln)["id"]): parse_client_line(ln) for ln in lines}
        assert {ida, idb} <= set(clients)
        mine = clients[ida]
        for field in ["id", "addr", "laddr", "fd", "name", "age", "idle", "flags", "db", "sub",
                      "psub", "multi", "cmd", "user", "resp"]:
            assert field in mine, field
        assert lines[0].startswith("id=")
        assert list(mine)[:2] == ["id", "addr"]
        assert mine["name"] == "alpha"
        assert clients[idb]["name"] == ""
        assert mine["cmd"] == "client|list"
        assert mine["db"] == "0" and mine["user"] == "default" and mine["resp"] == "2"
        host, port = a.sock.getsockname()
        assert mine["addr"] == f"{host}:{port}"
        assert mine["laddr"] == f"{server.host}:{server.port}"
        info_raw = a.cmd("CLIENT", "INFO")
        info_text_ = parse_one(info_raw).decode()
        assert info_text_.endswith("\n") and info_text_.count("\n") == 1
        info = parse_client_line(info_text_.strip())
        assert int(info["id"]) == ida and info["cmd"] == "client|info"
        # filters
        only_b = parse_one(a.cmd("CLIENT", "LIST", "ID", str(idb))).decode()
        assert only_b.count("\n") == 1 and parse_client_line(only_b.strip())["id"] == str(idb)
        both = parse_one(a.cmd("CLIENT", "LIST", "ID", str(ida), str(idb), "999999")).decode()
        assert both.count("\n") == 2
        normal = parse_one(a.cmd("CLIENT", "LIST", "TYPE", "normal")).decode()
        assert normal.count("\n") >= 2
        assert a.cmd("CLIENT", "LIST", "ID", "abc") == err_bytes("ERR Invalid client ID")
        assert a.cmd("CLIENT", "LIST", "foo") == err_bytes(SYNTAX)


def test_client_list_info_are_verbatim_in_resp3(conn):
    conn.cmd("HELLO", "3")
    raw = conn.cmd("CLIENT", "INFO")
    assert raw.startswith(b"=")
    val = parse_one(raw)
    assert isinstance(val, Verbatim) and val.fmt == "txt"
    assert parse_client_line(val.decode().strip())["resp"] == "3"
    val = parse_one(conn.cmd("CLIENT", "LIST"))
    assert isinstance(val, Verbatim) and val.fmt == "txt"


def test_client_kill_by_id(server):
    with RespConn.to(server) as killer, RespConn.to(server) as victim:
        vid = victim.call("CLIENT", "ID")
        assert victim.cmd("PING") == b"+PONG\r\n"
        assert killer.cmd("CLIENT", "KILL", "ID", str(vid)) == b":1\r\n"
        assert killer.cmd("CLIENT", "KILL", "ID", str(vid)) == b":0\r\n"
        with pytest.raises((ConnectionError, OSError)):
            victim.cmd("PING")
        assert killer.cmd("PING") == b"+PONG\r\n"
        ids = [parse_client_line(ln)["id"]
               for ln in killer.call("CLIENT", "LIST").decode().strip().split("\n")]
        assert str(vid) not in ids


def test_client_kill_by_addr(server):
    with RespConn.to(server) as killer, RespConn.to(server) as v1, RespConn.to(server) as v2:
        for victim, new_form in ((v1, True), (v2, False)):
            assert victim.cmd("PING") == b"+PONG\r\n"
            host, port = victim.sock.getsockname()
            addr = f"{host}:{port}"
            if new_form:
                assert killer.cmd("CLIENT", "KILL", "ADDR", addr) == b":1\r\n"
            else:
                assert killer.cmd("CLIENT", "KILL", addr) == b"+OK\r\n"  # old form
            with pytest.raises((ConnectionError, OSError)):
                victim.cmd("PING")
        assert killer.cmd("PING") == b"+PONG\r\n"


def test_client_kill_errors(conn):
    assert conn.cmd("CLIENT", "KILL", "1.2.3.4:5") == err_bytes("ERR No such client")
    assert conn.cmd("CLIENT", "KILL", "ADDR", "1.2.3.4:5") == b":0\r\n"
    assert conn.cmd("CLIENT", "KILL", "ID", "999999") == b":0\r\n"
    assert conn.cmd("CLIENT", "KILL", "ID", "abc") == err_bytes("ERR client-id should be greater than 0")
    assert conn.cmd("CLIENT", "KILL", "ID", "0") == err_bytes("ERR client-id should be greater than 0")
    assert conn.cmd("CLIENT", "KILL", "FOO", "bar") == err_bytes(SYNTAX)
    assert conn.cmd("CLIENT", "KILL") == err_bytes(arity("client|kill"))
    assert conn.cmd("PING") == b"+PONG\r\n"


def test_client_unknown_subcommand(conn):
    assert conn.cmd("CLIENT", "FOO") == err_bytes("ERR unknown subcommand 'FOO'. Try CLIENT HELP.")
    assert conn.cmd("CLIENT") == err_bytes(arity("client"))


@pytest.mark.deltagrid_only
def test_client_setinfo(conn):
    # CLIENT SETINFO appeared in Redis 7.2 (7.0 answers "ERR unknown subcommand 'setinfo'...").
    # Texts below are Redis 7.2's. redis-py sends it on connect and ignores errors.
    assert conn.cmd("CLIENT", "SETINFO", "LIB-NAME", "mylib") == b"+OK\r\n"
    assert conn.cmd("CLIENT", "SETINFO", "lib-ver", "1.2.3") == b"+OK\r\n"
    info = parse_client_line(conn.call("CLIENT", "INFO").decode().strip())
    assert info["lib-name"] == "mylib" and info["lib-ver"] == "1.2.3"
    assert conn.cmd("CLIENT", "SETINFO", "foo", "x") == err_bytes("ERR Unrecognized option 'foo'")
    assert conn.cmd("CLIENT", "SETINFO", "lib-name", "a b") == err_bytes(
        "ERR lib-name cannot contain spaces, newlines or special characters.")
    assert conn.cmd("CLIENT", "SETINFO", "lib-name") == err_bytes(arity("client|setinfo"))


def test_client_setinfo_is_harmless_for_redis_py(server):
    # redis-py sends CLIENT SETINFO on connect; whatever the server answers, the connection works
    for proto in (2, 3):
        c = make_client(server, proto, True)
        assert c.ping() is True
        c.close()


# ------------------------------------------------------------------- COMMAND

def test_command_count_and_list(conn):
    count = conn.call("COMMAND", "COUNT")
    assert isinstance(count, int) and count > 0
    names = conn.call("COMMAND", "LIST")
    assert all(isinstance(n, bytes) and n == n.lower() for n in names)
    top = [n for n in names if b"|" not in n]
    assert len(top) == count
    assert len(set(names)) == len(names)
    for required in [b"get", b"set", b"hset", b"hgetall", b"del", b"expire", b"scan", b"ping",
                     b"hello", b"client", b"command", b"info", b"config", b"client|kill",
                     b"config|get", b"command|info"]:
        assert required in names, required


def test_command_info_get(conn):
    reply = conn.call("COMMAND", "INFO", "get")
    assert len(reply) == 1
    info = reply[0]
    assert info[0] == b"get"
    assert info[1] == 2  # arity
    assert "readonly" in info[2] and "fast" in info[2]  # flags are simple strings
    assert info[3:6] == [1, 1, 1]  # first key, last key, step
    assert "@read" in info[6] and "@string" in info[6]
    assert len(info) == 10
    raw = conn.cmd("COMMAND", "INFO", "get")
    assert raw.startswith(b"*1\r\n*10\r\n$3\r\nget\r\n:2\r\n*")


def test_command_info_other_commands(conn):
    reply = conn.call("COMMAND", "INFO", "set", "hset", "mset", "nosuchcmd", "GET")
    assert len(reply) == 5
    s, h, m, missing, g = reply
    assert s[0] == b"set" and s[1] == -3 and "write" in s[2] and s[3:6] == [1, 1, 1]
    assert h[0] == b"hset" and h[1] == -4 and h[3:6] == [1, 1, 1]
    assert m[0] == b"mset" and m[1] == -3 and m[3:6] == [1, -1, 2]
    assert missing is None
    assert g[0] == b"get"
    assert conn.cmd("COMMAND", "INFO", "nosuchcmd") == b"*1\r\n$-1\r\n"


def test_command_info_resp3_flags_are_sets(conn):
    conn.cmd("HELLO", "3")
    raw = conn.cmd("COMMAND", "INFO", "get")
    assert raw.startswith(b"*1\r\n*10\r\n$3\r\nget\r\n:2\r\n~")


def test_command_docs_get(conn):
    reply = conn.call("COMMAND", "DOCS", "get")
    assert len(reply) == 2 and reply[0] == b"get"
    docs = dict(zip(reply[1][::2], reply[1][1::2]))
    assert isinstance(docs[b"summary"], bytes) and docs[b"summary"]
    assert docs[b"group"] == b"string"
    assert docs[b"since"] == b"1.0.0"
    assert b"arguments" in docs
    conn.cmd("HELLO", "3")
    reply = conn.call("COMMAND", "DOCS", "get")
    assert isinstance(reply, Map)
    (name, body), = reply.items()
    assert name == b"get" and isinstance(body, Map)
    assert dict(body)[b"group"] == b"string"


def test_command_errors(conn):
    assert conn.cmd("COMMAND", "FOO") == err_bytes("ERR unknown subcommand 'FOO'. Try COMMAND HELP.")
    assert conn.cmd("COMMAND", "COUNT", "x") == err_bytes(arity("command|count"))


def test_redis_py_command_table_parses(r):
    table = r.command()
    assert "get" in table
    get = table["get"]
    assert get["arity"] == 2
    assert "readonly" in get["flags"]
    assert get["first_key_pos"] == 1 and get["last_key_pos"] == 1 and get["step_count"] == 1
    assert r.command_count() == len(table)
    assert v(r, "get") in r.command_list()


# ---------------------------------------------------------------------- INFO

def test_info_default_sections(conn):
    raw = conn.cmd("INFO")
    assert raw.startswith(b"$")
    text = info_text(parse_one(raw))
    assert "\r\n" in text and "\n" not in text.replace("\r\n", "")
    sections = info_sections(text)
    for name in ["Server", "Clients", "Memory", "Stats", "Replication", "Keyspace"]:
        assert name in sections, name
    assert text.startswith("# Server\r\n")


def test_info_fields(server):
    with RespConn.to(server) as c, RespConn.to(server) as other:
        other.cmd("PING")
        c.cmd("SET", "a", "1", "EX", "1000")
        c.cmd("SET", "b", "2")
        c.cmd("HSET", "h", "f", "v")

        def clients_count():
            s = info_sections(info_text(c.call("INFO", "clients")))
            return s["Clients"]["connected_clients"] == "2"

        wait_until(clients_count, timeout=3.0, message="connected_clients:2")
        sections = info_sections(info_text(c.call("INFO")))
        srv = sections["Server"]
        assert srv["redis_version"][:1].isdigit()
        assert int(srv["tcp_port"]) == server.port
        assert int(srv["process_id"]) > 0
        assert int(srv["uptime_in_seconds"]) >= 0
        assert int(sections["Memory"]["used_memory"]) > 0
        stats = sections["Stats"]
        assert int(stats["total_connections_received"]) >= 2
        assert int(stats["total_commands_processed"]) >= 4
        assert sections["Replication"]["role"] == "master"
        assert sections["Keyspace"]["db0"].startswith("keys=3,expires=1,avg_ttl=")
        avg = int(sections["Keyspace"]["db0"].split("avg_ttl=")[1])
        assert 0 <= avg <= 1000000


def test_info_fields_clients_and_the_suite_read(server):
    with RespConn.to(server) as c:
        c.call("SET", "s", "1")
        c.call("SET", "s")                                   # rejected: arity
        c.call("HSET", "s", "f", "v")                        # failed: WRONGTYPE
        c.call("NOSUCHCOMMAND")
        info = c.call("INFO").decode()
        every = c.call("INFO", "everything").decode()
        stats = c.call("INFO", "commandstats").decode()
    fields = dict(l.split(":", 1) for l in info.splitlines() if ":" in l)
    for k in ["redis_git_sha1", "redis_git_dirty", "mem_allocator", "used_cpu_sys", "used_cpu_user",
              "used_cpu_sys_children", "used_cpu_user_children", "total_error_replies"]:
        assert k in fields, k
    assert "# CPU" in info and "# Errorstats" in info and "# Commandstats" not in info
    assert "# Commandstats" in every
    assert int(fields["total_error_replies"]) >= 3
    assert int(fields["errorstat_ERR"].split("=")[1]) >= 2
    assert fields["errorstat_WRONGTYPE"] == "count=1"
    cmd = dict(l.split(":", 1) for l in stats.splitlines() if l.startswith("cmdstat_"))
    sets = dict(kv.split("=") for kv in cmd["cmdstat_set"].split(","))
    assert (sets["calls"], sets["rejected_calls"], sets["failed_calls"]) == ("1", "1", "0")
    hsets = dict(kv.split("=") for kv in cmd["cmdstat_hset"].split(","))
    assert (hsets["calls"], hsets["failed_calls"]) == ("1", "1")


def test_info_single_and_multiple_sections(conn):
    for section, header in [("server", "Server"), ("clients", "Clients"), ("memory", "Memory"),
                            ("stats", "Stats"), ("replication", "Replication"),
                            ("keyspace", "Keyspace"), ("SERVER", "Server")]:
        sections = info_sections(info_text(conn.call("INFO", section)))
        assert list(sections) == [header], section
    sections = info_sections(info_text(conn.call("INFO", "server", "clients")))
    assert list(sections) == ["Server", "Clients"]


def test_info_keyspace_exact(conn):
    assert conn.cmd("INFO", "keyspace") == b"$12\r\n# Keyspace\r\n\r\n"
    conn.cmd("SET", "a", "1")
    conn.cmd("SET", "b", "1")
    body = b"# Keyspace\r\ndb0:keys=2,expires=0,avg_ttl=0\r\n"
    assert conn.cmd("INFO", "keyspace") == b"$%d\r\n%s\r\n" % (len(body), body)
    assert conn.cmd("INFO", "nosuchsection") == b"$0\r\n\r\n"


def test_info_is_verbatim_in_resp3(conn):
    conn.cmd("HELLO", "3")
    raw = conn.cmd("INFO", "keyspace")
    assert raw == b"=16\r\ntxt:# Keyspace\r\n\r\n"
    val = parse_one(conn.cmd("INFO"))
    assert isinstance(val, Verbatim) and val.fmt == "txt"
    assert "Server" in info_sections(val.decode())


def test_redis_py_info(r):
    r.set("a", "1")
    info = r.info()
    assert isinstance(info, dict)
    assert "redis_version" in info and isinstance(info["connected_clients"], int)
    assert r.info("keyspace") == {"db0": {"keys": 1, "expires": 0, "avg_ttl": 0}}
    assert isinstance(r.info("memory")["used_memory"], int)


# ------------------------------------------------- DBSIZE FLUSHALL FLUSHDB TIME

def test_dbsize_flushdb_flushall(conn):
    assert conn.cmd("DBSIZE") == b":0\r\n"
    conn.cmd("MSET", "a", "1", "b", "2")
    conn.cmd("HSET", "h", "f", "v")
    assert conn.cmd("DBSIZE") == b":3\r\n"
    assert conn.cmd("FLUSHDB") == b"+OK\r\n"
    assert conn.cmd("DBSIZE") == b":0\r\n"
    conn.cmd("MSET", "a", "1", "b", "2")
    assert conn.cmd("FLUSHALL") == b"+OK\r\n"
    assert conn.cmd("DBSIZE") == b":0\r\n"
    for cmd in ("FLUSHALL", "FLUSHDB"):
        conn.cmd("SET", "a", "1")
        assert conn.cmd(cmd, "ASYNC") == b"+OK\r\n"
        assert conn.cmd("GET", "a") == b"$-1\r\n"
        conn.cmd("SET", "a", "1")
        assert conn.cmd(cmd, "sync") == b"+OK\r\n"
        assert conn.cmd("DBSIZE") == b":0\r\n"
        assert conn.cmd(cmd, "foo") == err_bytes(SYNTAX)
    assert conn.cmd("DBSIZE", "x") == err_bytes(arity("dbsize"))


def test_time(conn):
    raw = conn.cmd("TIME")
    assert raw.startswith(b"*2\r\n$")
    secs, micros = parse_one(raw)
    assert isinstance(secs, bytes) and isinstance(micros, bytes)
    assert secs.isdigit() and micros.isdigit()
    assert abs(int(secs) - time.time()) < 5
    assert 0 <= int(micros) < 1000000
    assert conn.cmd("TIME", "x") == err_bytes(arity("time"))


def test_redis_py_time(r):
    secs, micros = r.time()
    assert isinstance(secs, int) and isinstance(micros, int)
    assert abs(secs + micros / 1e6 - time.time()) < 5


# -------------------------------------------------------------------- CONFIG

def test_config_get_probed_settings(conn):
    assert conn.cmd("CONFIG", "GET", "save") == b"*2\r\n$4\r\nsave\r\n$0\r\n\r\n"
    assert conn.cmd("CONFIG", "GET", "appendonly") == b"*2\r\n$10\r\nappendonly\r\n$2\r\nno\r\n"
    assert conn.cmd("CONFIG", "GET", "maxmemory") == b"*2\r\n$9\r\nmaxmemory\r\n$1\r\n0\r\n"
    name, val = conn.call("CONFIG", "GET", "databases")
    assert name == b"databases" and int(val) >= 1
    assert conn.cmd("CONFIG", "GET", "nosuchsetting") == b"*0\r\n"
    # an exact (non-glob) name is echoed back as the client spelled it
    assert conn.cmd("CONFIG", "GET", "MAXMEMORY") == b"*2\r\n$9\r\nMAXMEMORY\r\n$1\r\n0\r\n"
    # a glob matches case-insensitively and replies with the canonical lower-case names
    reply = conn.call("CONFIG", "GET", "MAXMEM*")
    assert b"maxmemory" in reply[::2] and all(n == n.lower() for n in reply[::2])


def test_config_get_multiple_args(conn):
    reply = conn.call("CONFIG", "GET", "maxmemory", "appendonly")
    assert len(reply) == 4
    assert dict(zip(reply[::2], reply[1::2])) == {b"maxmemory": b"0", b"appendonly": b"no"}


def test_config_get_glob_pattern(conn):
    pattern = "*max-*-entries*"
    reply = conn.call("CONFIG", "GET", pattern)
    assert isinstance(reply, list) and reply and len(reply) % 2 == 0
    names = reply[::2]
    assert len(set(names)) == len(names)
    for name, val in zip(names, reply[1::2]):
        assert fnmatch.fnmatchcase(name.decode(), pattern), name
        assert int(val) >= 0
    everything = conn.call("CONFIG", "GET", "*")
    all_names = set(everything[::2])
    assert {b"save", b"appendonly", b"maxmemory", b"databases"} <= all_names
    assert set(names) <= all_names


def test_config_get_resp3_map(conn):
    conn.cmd("HELLO", "3")
    assert conn.cmd("CONFIG", "GET", "maxmemory") == b"%1\r\n$9\r\nmaxmemory\r\n$1\r\n0\r\n"
    assert conn.cmd("CONFIG", "GET", "nosuchsetting") == b"%0\r\n"
    reply = conn.call("CONFIG", "GET", "*max-*-entries*")
    assert isinstance(reply, Map) and len(reply) > 0


def test_config_set_maxmemory(conn):
    assert conn.cmd("CONFIG", "SET", "maxmemory", "100mb") == b"+OK\r\n"
    assert conn.cmd("CONFIG", "GET", "maxmemory") == b"*2\r\n$9\r\nmaxmemory\r\n$9\r\n104857600\r\n"
    assert conn.cmd("CONFIG", "SET", "maxmemory", "12345") == b"+OK\r\n"
    assert conn.cmd("CONFIG", "GET", "maxmemory") == b"*2\r\n$9\r\nmaxmemory\r\n$5\r\n12345\r\n"
    assert conn.cmd("CONFIG", "SET", "maxmemory", "1gb") == b"+OK\r\n"
    assert conn.call("CONFIG", "GET", "maxmemory")[1] == b"1073741824"
    assert conn.cmd("CONFIG", "SET", "maxmemory", "0") == b"+OK\r\n"
    assert conn.cmd("CONFIG", "SET", "maxmemory", "abc") == err_bytes(
        "ERR CONFIG SET failed (possibly related to argument 'maxmemory') - "
        "argument must be a memory value")
    assert conn.call("CONFIG", "GET", "maxmemory")[1] == b"0"


def test_config_errors(conn):
    assert conn.cmd("CONFIG", "SET", "nosuch", "1") == err_bytes(
        "ERR Unknown option or number of arguments for CONFIG SET - 'nosuch'")
    assert conn.cmd("CONFIG", "SET", "maxmemory") == err_bytes(arity("config|set"))
    assert conn.cmd("CONFIG", "GET") == err_bytes(arity("config|get"))
    assert conn.cmd("CONFIG") == err_bytes(arity("config"))
    assert conn.cmd("CONFIG", "FOO") == err_bytes("ERR unknown subcommand 'FOO'. Try CONFIG HELP.")


def test_config_set_acts_or_refuses(conn):
    """Every parameter CONFIG SET accepts acts; several are checked before
    any is applied; duplicates and immutable ones are refused."""
    assert conn.call("CONFIG", "SET", "hz", "50", "tracking-table-max-keys", "5") == "OK"
    assert conn.call("CONFIG", "GET", "hz") == [b"hz", b"50"]
    assert conn.call("CONFIG", "GET", "tracking-table-max-keys") == [b"tracking-table-max-keys", b"5"]
    assert conn.call("CONFIG", "SET", "hash-max-ziplist-entries", "16") == "OK"
    assert conn.call("CONFIG", "GET", "hash-max-listpack-entries") == [b"hash-max-listpack-entries", b"16"]
    # A small hash comes back whole from HSCAN; past the threshold it is paged.
    conn.call("HSET", "h", *[x for i in range(20) for x in (f"f{i}", "v")])
    assert conn.call("HSCAN", "h", "0", "COUNT", "5")[0] != b"0"
    assert conn.call("CONFIG", "SET", "hash-max-listpack-entries", "128") == "OK"
    conn.call("HSET", "h2", *[x for i in range(20) for x in (f"f{i}", "v")])
    assert conn.call("HSCAN", "h2", "0", "COUNT", "5")[0] == b"0"
    assert conn.call("CONFIG", "SET", "notify-keyspace-events", "KEA") == "OK"
    assert conn.call("CONFIG", "GET", "notify-keyspace-events") == [b"notify-keyspace-events", b"AKE"]
    assert conn.call("CONFIG", "SET", "notify-keyspace-events", "") == "OK"
    assert conn.call("CONFIG", "SET", "hz", "10", "hz", "11") == RespError(
        "ERR CONFIG SET failed (possibly related to argument 'hz') - duplicate parameter")
    assert conn.call("CONFIG", "SET", "hz", "20", "maxmemory", "abc") == RespError(
        "ERR CONFIG SET failed (possibly related to argument 'maxmemory') - "
        "argument must be a memory value")
    assert conn.call("CONFIG", "GET", "hz") == [b"hz", b"50"]      # nothing applied
    assert conn.call("CONFIG", "SET", "databases", "4") == RespError(
        "ERR CONFIG SET failed (possibly related to argument 'databases') - can't set immutable config")
    assert conn.call("CONFIG", "SET", "hz", "10") == "OK"


@pytest.mark.deltagrid_only  # Redis has these features
@pytest.mark.parametrize("name,value", [("maxmemory-policy", "most-recent"), ("appendonly", "yes"),
                                        ("save", "900 1"), ("tcp-keepalive", "300"),
                                        ("maxmemory-clients", "10mb")])
def test_config_set_refuses_what_would_be_ignored(conn, name, value):
    before = conn.call("CONFIG", "GET", name)
    reply = conn.call("CONFIG", "SET", name, value)
    assert isinstance(reply, RespError), reply
    assert str(reply).startswith(f"ERR CONFIG SET failed (possibly related to argument '{name}') - "), reply
    assert conn.call("CONFIG", "GET", name) == before


def test_redis_py_config(r):
    got = r.config_get("maxmemory")
    assert got == {"maxmemory": "0"}  # redis-py always decodes CONFIG GET
    assert r.config_set("maxmemory", "100mb") is True
    assert r.config_get("maxmemory") == {"maxmemory": "104857600"}
    many = r.config_get("*max-*-entries*")
    assert isinstance(many, dict) and many
    assert all(fnmatch.fnmatchcase(k, "*max-*-entries*") for k in many)


# ---------------------------------------------------- unknown commands, protocol

def test_unknown_command_texts(conn):
    assert conn.cmd("foo", "a", "b") == err_bytes(
        "ERR unknown command 'foo', with args beginning with: 'a' 'b' ")
    assert conn.cmd("foo") == err_bytes("ERR unknown command 'foo', with args beginning with: ")
    assert conn.cmd("FOO", "A") == err_bytes("ERR unknown command 'FOO', with args beginning with: 'A' ")
    assert conn.cmd("foo", "a b", "c'd") == err_bytes(
        "ERR unknown command 'foo', with args beginning with: 'a b' 'c'd' ")
    assert conn.cmd("", "a") == err_bytes("ERR unknown command '', with args beginning with: 'a' ")


def test_unknown_command_args_are_truncated(conn):
    # the args part stops once it reaches 128 bytes, and each arg is cut to what is left of 128
    long_arg = "a" * 150
    assert conn.cmd("foo", long_arg, "b") == err_bytes(
        "ERR unknown command 'foo', with args beginning with: '" + "a" * 128 + "' ")
    letters = [chr(c) for c in range(ord("a"), ord("z") + 1)]
    args = letters + [c * 2 for c in letters]
    expected = "".join(f"'{a}' " for a in letters) + "'aa' 'bb' 'cc' 'dd' 'ee' "
    assert conn.cmd("foo", *args) == err_bytes(
        "ERR unknown command 'foo', with args beginning with: " + expected)
    assert conn.cmd("x" * 200) == err_bytes(
        "ERR unknown command '" + "x" * 128 + "', with args beginning with: ")


def test_unknown_command_newlines_become_spaces(conn):
    assert conn.cmd("get\nx", "a") == err_bytes(
        "ERR unknown command 'get x', with args beginning with: 'a' ")
    assert conn.cmd("foo", "a\nb", "c\r\nd") == err_bytes(
        "ERR unknown command 'foo', with args beginning with: 'a b' 'c  d' ")
    assert conn.cmd("PING") == b"+PONG\r\n"


def test_unknown_command_via_redis_py(r):
    with pytest.raises(redis.ResponseError) as ei:
        r.execute_command("FOO", "a", "b")
    assert str(ei.value) == "unknown command 'FOO', with args beginning with: 'a' 'b' "


def test_inline_protocol(conn):
    conn.send_raw(b"PING\r\nping x\r\n  ping   \"a b\"  \r\nECHO 'c d'\r\nECHO \"a\\x41\"\r\n")
    assert conn.read_raw() == b"+PONG\r\n"
    assert conn.read_raw() == b"$1\r\nx\r\n"
    assert conn.read_raw() == b"$3\r\na b\r\n"
    assert conn.read_raw() == b"$3\r\nc d\r\n"
    assert conn.read_raw() == b"$2\r\naA\r\n"
    # empty lines are ignored; a bare \n also terminates an inline command
    conn.send_raw(b"\r\n\r\nPING\n")
    assert conn.read_raw() == b"+PONG\r\n"


def test_empty_multibulk_is_ignored(conn):
    conn.send_raw(b"*0\r\n*-1\r\n*1\r\n$4\r\nPING\r\n")
    assert conn.read_raw() == b"+PONG\r\n"


def test_command_split_across_packets(conn):
    msg = b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\nhello\r\n"
    for i in range(len(msg)):
        conn.send_raw(msg[i:i + 1])
    assert conn.read_raw() == b"+OK\r\n"
    assert conn.cmd("GET", "k") == b"$5\r\nhello\r\n"


@pytest.mark.parametrize("payload,error", [
    (b"*a\r\n", "ERR Protocol error: invalid multibulk length"),
    (b"*1\r\n$x\r\n", "ERR Protocol error: invalid bulk length"),
    (b"*1\r\n+PING\r\n", "ERR Protocol error: expected '$', got '+'"),
    (b"ECHO \"unbalanced\r\n", "ERR Protocol error: unbalanced quotes in request"),
])
def test_protocol_errors_close_connection(server, payload, error):
    with RespConn.to(server) as c:
        assert c.cmd("PING") == b"+PONG\r\n"
        c.send_raw(payload)
        assert c.read_raw() == err_bytes(error)
        assert c.is_closed()
    with RespConn.to(server) as c:  # the server itself is fine
        assert c.cmd("PING") == b"+PONG\r\n"


def test_subcommand_arity_names(conn):
    assert conn.cmd("CONFIG", "GET") == err_bytes("ERR wrong number of arguments for 'config|get' command")
    assert conn.cmd("CLIENT", "KILL") == err_bytes("ERR wrong number of arguments for 'client|kill' command")
    assert conn.cmd("COMMAND", "INFO") != b""  # COMMAND INFO with no names is allowed
