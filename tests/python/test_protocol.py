"""Protocol robustness over raw sockets: pipelining, inline commands, malformed
frames, size limits, client limits, garbage, maxmemory. Every socket has a
timeout; nothing here can hang."""
import random
import socket
import threading
import time

import pytest

from helpers import wait_until
from helpers_net import ConnectionClosed, RespConn, RespError, encode, raw_exchange


def alive(server):
    assert server.proc.poll() is None, "server process died"
    with RespConn.to(server) as c:
        assert c.call("PING") == "PONG"


# -- pipelining ------------------------------------------------------------------------

@pytest.fixture(params=[271, 16384], ids=["271-partitions", "16384-partitions"])
def pipeline_server(request, make_server):
    # At 16,384 partitions the server loads the next request's partition
    # header while one runs (Keyspace::prefetch); at 271 it does not.
    return make_server(config=f"[site]\npartitions = {request.param}\n")


def test_pipeline_10k_in_one_send(pipeline_server):
    server = pipeline_server
    n = 10_000
    parts = []
    expected = []
    counter = 0
    for i in range(n):
        if i % 3 == 0:
            parts.append(encode("SET", f"k{i}", f"v{i}"))
            expected.append("OK")
        elif i % 3 == 1:
            parts.append(encode("GET", f"k{i - 1}"))
            expected.append(f"v{i - 1}".encode())
        else:
            counter += 1
            parts.append(encode("INCR", "ctr"))
            expected.append(counter)
    payload = b"".join(parts)
    with RespConn.to(server, timeout=20) as c:
        # send from a thread so a server that writes while we are still
        # sending cannot deadlock us; the payload still goes in one sendall
        sender = threading.Thread(target=c.sock.sendall, args=(payload,), daemon=True)
        sender.start()
        got = [c.read(timeout=20) for _ in range(n)]
        sender.join(timeout=20)
        assert got == expected
        assert c.call("GET", "ctr") == str(counter).encode()
        assert c.call("DBSIZE") == n // 3 + 1 + (1 if n % 3 else 0)


def test_frame_split_byte_by_byte(server):
    with RespConn.to(server) as c:
        for b in encode("SET", "frag", "hello"):
            c.send_raw(bytes([b]))
        assert c.read() == "OK"
        assert c.call("GET", "frag") == b"hello"


def test_large_value_roundtrip(server):
    value = random.Random(1).randbytes(1 << 20)
    with RespConn.to(server, timeout=20) as c:
        assert c.call("SET", "big", value) == "OK"
        assert c.call("GET", "big") == value


# -- inline commands -----------------------------------------------------------------

def test_inline_commands(server):
    with RespConn.to(server) as c:
        c.send_raw(b"PING\r\n")
        assert c.read() == "PONG"
        c.send_raw(b"SET a b\r\n")
        assert c.read() == "OK"
        c.send_raw(b"GET a\r\n")
        assert c.read() == b"b"
        c.send_raw(b'SET q "hello world"\r\nGET q\r\n')
        assert c.read() == "OK"
        assert c.read() == b"hello world"
        c.send_raw(b"SET sq 'single quoted'\r\nGET sq\r\n")
        assert c.read() == "OK"
        assert c.read() == b"single quoted"
        c.send_raw(b'SET e "x\\x41\\n"\r\nGET e\r\n')
        assert c.read() == "OK"
        assert c.read() == b"xA\n"
        c.send_raw(b"SET   spaced    out   \r\nGET spaced\r\n")
        assert c.read() == "OK"
        assert c.read() == b"out"
        # bare LF terminator and empty lines are accepted
        c.send_raw(b"\r\n\r\nPING\n")
        assert c.read() == "PONG"
        # inline and multibulk may be mixed on one connection
        c.send_raw(b"ECHO inline\r\n" + encode("ECHO", "multi"))
        assert c.read() == b"inline"
        assert c.read() == b"multi"


def test_command_errors_keep_connection(server):
    with RespConn.to(server) as c:
        assert c.call("FOO", "a", "b") == RespError("ERR unknown command 'FOO', with args beginning with: 'a' 'b' ")
        assert c.call("GET") == RespError("ERR wrong number of arguments for 'get' command")
        c.send_raw(b"get\r\n")
        assert c.read() == RespError("ERR wrong number of arguments for 'get' command")
        assert c.call("PING") == "PONG"


# -- malformed frames ----------------------------------------------------------------

MALFORMED = [
    (b"*1\r\n$x\r\n", b"-ERR Protocol error: invalid bulk length\r\n"),
    (b"*abc\r\n", b"-ERR Protocol error: invalid multibulk length\r\n"),
    (b"*1\r\n$-5\r\n", b"-ERR Protocol error: invalid bulk length\r\n"),
    (b"*1\r\n+PING\r\n", b"-ERR Protocol error: expected '$', got '+'\r\n"),
    (b"*1\r\n:4\r\n", b"-ERR Protocol error: expected '$', got ':'\r\n"),
    (b'SET a "b c\r\n', b"-ERR Protocol error: unbalanced quotes in request\r\n"),
    (b'SET a "b"c\r\n', b"-ERR Protocol error: unbalanced quotes in request\r\n"),
    # commands before the bad frame still run
    (b"PING\r\n*1\r\n$x\r\nPING\r\n", b"+PONG\r\n-ERR Protocol error: invalid bulk length\r\n"),
    (b"*1\r\n$4\r\nPING\r\n*1\r\n$x\r\n*1\r\n$4\r\nPING\r\n",
     b"+PONG\r\n-ERR Protocol error: invalid bulk length\r\n"),
    (b"*2\r\n$4\r\nECHO\r\n$1\r\na\r\nECHO b\r\n*2\r\n$4\r\nECHO\r\n$1\r\nc\r\n*1\r\n$x\r\n",
     b"$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n-ERR Protocol error: invalid bulk length\r\n"),
]


@pytest.mark.parametrize("payload,reply", MALFORMED, ids=[str(i) for i in range(len(MALFORMED))])
def test_malformed_frame_closes_only_that_client(server, payload, reply):
    other = RespConn.to(server)
    assert other.call("SET", "other", "1") == "OK"
    assert raw_exchange(server.host, server.port, payload) == reply
    assert other.call("GET", "other") == b"1"
    assert other.call("PING") == "PONG"
    other.close()
    alive(server)


LIMITS = [
    # over proto-max-bulk-len (512 MB default): refused on the header alone
    (b"*1\r\n$600000000\r\n", b"-ERR Protocol error: invalid bulk length\r\n"),
    (b"*1\r\n$536870913\r\n", b"-ERR Protocol error: invalid bulk length\r\n"),
    # a multibulk count above INT_MAX
    (b"*3000000000\r\n", b"-ERR Protocol error: invalid multibulk length\r\n"),
    # over 64 KiB without a newline
    (b"x" * 70000, b"-ERR Protocol error: too big inline request\r\n"),
    (b"*" + b"1" * 70000, b"-ERR Protocol error: too big mbulk count string\r\n"),
    (b"*1\r\n$" + b"1" * 70000, b"-ERR Protocol error: too big bulk count string\r\n"),
]


@pytest.mark.parametrize("payload,reply", LIMITS, ids=["bulk600M", "bulk512M+1", "mbulk3G",
                                                        "inline70k", "mbulkcount70k", "bulkcount70k"])
def test_over_limit_refused_at_once(server, payload, reply):
    # the reply comes without the server waiting for any payload
    assert raw_exchange(server.host, server.port, payload, timeout=5) == reply
    alive(server)


def test_query_buffer_limit(server):
    with RespConn.to(server) as admin:
        assert admin.call("CONFIG", "SET", "client-query-buffer-limit", "1mb") == "OK"
        c = RespConn.to(server)
        c.send_raw(b"*3\r\n$3\r\nSET\r\n$5\r\nqbufk\r\n$3000000\r\n")
        chunk = b"x" * 65536
        got = b""
        try:
            for _ in range(3000000 // len(chunk) + 1):  # bounded: at most the whole value
                c.sock.sendall(chunk)
        except OSError:
            pass  # the server may already have dropped us
        try:
            got = c.expect_closed(timeout=10)
        except ConnectionClosed:
            pass
        c.close()
        assert not got.startswith(b"+"), got
        assert admin.call("EXISTS", "qbufk") == 0
        assert admin.call("PING") == "PONG"
    alive(server)


# -- max clients --------------------------------------------------------------------------

def test_maxclients(make_server):
    srv = make_server(extra_args=["--maxclients", "3"])

    def connect_ok():
        c = RespConn.to(srv)
        r = c.call("PING")
        if r == "PONG":
            return c
        c.close()  # the readiness probe's slot may not be free yet
        return None

    held = []
    for _ in range(3):
        held.append(wait_until(connect_ok, timeout=5, message="connection slot"))
    fourth = RespConn.to(srv)
    assert fourth.expect_closed(timeout=5) == b"-ERR max number of clients reached\r\n"
    fourth.close()
    for c in held:
        assert c.call("PING") == "PONG"
    held.pop().close()
    held.append(wait_until(connect_ok, timeout=5, message="slot freed after close"))
    for c in held:
        c.close()


# -- garbage -------------------------------------------------------------------------------

def _garbage(rng):
    kind = rng.randrange(4)
    if kind == 0:
        return bytes(rng.getrandbits(8) for _ in range(rng.randrange(1, 4096)))
    if kind == 1:  # RESP-looking noise
        alphabet = b"*$+-:\r\n0123456789-abcXYZ"
        return bytes(rng.choice(alphabet) for _ in range(rng.randrange(1, 512)))
    if kind == 2:  # a valid frame with a few bytes flipped
        frame = bytearray(encode(rng.choice(["SET", "GET", "ECHO", "HSET", "PING"]),
                                 "key", "x" * rng.randrange(0, 100)))
        for _ in range(rng.randrange(1, 4)):
            frame[rng.randrange(len(frame))] = rng.getrandbits(8)
        return bytes(frame)
    # a truncated valid frame
    frame = encode("SET", "key", "y" * rng.randrange(0, 200))
    return frame[: rng.randrange(1, len(frame))]


def test_random_garbage_never_crashes(server):
    rng = random.Random(20240501)
    payloads = [[_garbage(rng) for _ in range(rng.randrange(1, 6))] for _ in range(20)]
    errors = []

    def client(chunks):
        try:
            with socket.create_connection((server.host, server.port), timeout=5) as s:
                for ch in chunks:
                    try:
                        s.sendall(ch)
                    except OSError:
                        return  # closed on us: fine
                try:
                    s.shutdown(socket.SHUT_WR)
                except OSError:
                    return
                deadline = time.monotonic() + 10
                while time.monotonic() < deadline:  # read until the server closes
                    try:
                        if not s.recv(65536):
                            return
                    except socket.timeout:
                        continue
                    except OSError:
                        return
                errors.append("server kept a half-closed garbage connection open for 10 s")
        except Exception as e:  # noqa: BLE001
            errors.append(repr(e))

    threads = [threading.Thread(target=client, args=(p,), daemon=True) for p in payloads]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=20)
    assert not any(t.is_alive() for t in threads)
    assert errors == []
    alive(server)
    with RespConn.to(server) as c:
        assert c.call("SET", "after", "garbage") == "OK"
        assert c.call("GET", "after") == b"garbage"


# -- maxmemory ------------------------------------------------------------------------------

OOM = "OOM command not allowed when used memory > 'maxmemory'."


def test_maxmemory_noeviction(make_server):
    srv = make_server(extra_args=["--maxmemory", "2mb"])
    value = b"v" * 10_000
    with RespConn.to(srv) as c:
        written = 0
        err = None
        for i in range(5000):  # bounded: 50 MB of writes at most
            r = c.call("SET", f"mm:{i}", value)
            if isinstance(r, RespError):
                err = r
                break
            assert r == "OK"
            written += 1
        assert err is not None, "never hit maxmemory"
        assert str(err).startswith(OOM), err
        assert written > 0
        # further writes that need memory keep failing
        r = c.call("SET", "another", value)
        assert isinstance(r, RespError) and str(r).startswith(OOM), r
        # reads and deletes still work
        assert c.call("GET", "mm:0") == value
        assert c.call("DBSIZE") == written
        assert c.call("EXISTS", "another") == 0
        assert c.call("DEL", "mm:0") == 1
        assert c.call("DBSIZE") == written - 1
        # freeing memory makes writes possible again (Redis: at once; a poll
        # allows for memory accounting that refreshes periodically)
        assert c.call("FLUSHALL") == "OK"
        wait_until(lambda: c.call("SET", "after", "ok") == "OK", timeout=5,
                   interval=0.05, message="SET succeeds after FLUSHALL freed memory")
