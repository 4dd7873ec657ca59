"""Helpers shared by the per-command-family black-box tests.

RawConn speaks RESP over a plain socket so tests can assert exact wire bytes
(redis-py hides them). `cmd()` sends one command and returns the raw bytes of
exactly one complete reply; `parse()` turns raw reply bytes into Python
values that keep the RESP type visible (see the classes below).
"""
import socket
import time

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

CRLF = b"\r\n"


class Err(str):
    """A RESP error reply ('-...' or '!...'): the text without the prefix byte."""


class Simple(str):
    """A RESP simple string ('+...')."""


class Verbatim(bytes):
    """A RESP3 verbatim string ('=...'): `fmt` is the 3-letter format."""

    def __new__(cls, data, fmt):
        obj = super().__new__(cls, data)
        obj.fmt = fmt
        return obj


class Map(list):
    """A RESP3 map ('%'): list of (key, value) pairs, order as sent."""


class Set(list):
    """A RESP3 set ('~'), order as sent."""


class Push(list):
    """A RESP3 push ('>')."""


class Attr(list):
    """A RESP3 attribute ('|'), rarely used."""


class Double(float):
    """A RESP3 double (',')."""


class BigNum(int):
    """A RESP3 big number ('(')."""


def encode(*args):
    """Encode a command as a RESP array of bulk strings."""
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        if isinstance(a, str):
            a = a.encode()
        elif isinstance(a, (int, float)):
            a = str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


class _Reader:
    def __init__(self, recv):
        self._recv = recv
        self.buf = b""

    def _fill(self):
        chunk = self._recv()
        if not chunk:
            raise ConnectionError("connection closed by server")
        self.buf += chunk

    def _line(self, pos):
        while True:
            i = self.buf.find(CRLF, pos)
            if i >= 0:
                return i
            self._fill()

    def _need(self, end):
        while len(self.buf) < end:
            self._fill()

    def reply_end(self, pos=0):
        """Return the offset just past the reply starting at `pos` (reads as needed)."""
        self._need(pos + 1)
        t = self.buf[pos:pos + 1]
        eol = self._line(pos)
        head = self.buf[pos + 1:eol]
        nxt = eol + 2
        if t in b"+-:,_#(":
            return nxt
        if t in b"$=!":
            n = int(head)
            if n < 0:
                return nxt
            self._need(nxt + n + 2)
            return nxt + n + 2
        if t in b"*~>":
            n = int(head)
            for _ in range(max(n, 0)):
                nxt = self.reply_end(nxt)
            return nxt
        if t in b"%|":
            n = int(head)
            for _ in range(2 * n):
                nxt = self.reply_end(nxt)
            if t == b"|":  # attribute precedes the real reply
                nxt = self.reply_end(nxt)
            return nxt
        raise ValueError(f"bad RESP type byte {t!r} in {self.buf[pos:pos + 80]!r}")

    def read_raw(self):
        end = self.reply_end(0)
        raw, self.buf = self.buf[:end], self.buf[end:]
        return raw


def parse(raw):
    """Parse one complete RESP2/RESP3 reply from bytes; returns (value, rest)."""
    t = raw[:1]
    eol = raw.index(CRLF)
    head = raw[1:eol]
    rest = raw[eol + 2:]
    if t == b"+":
        return Simple(head.decode()), rest
    if t == b"-":
        return Err(head.decode()), rest
    if t == b":":
        return int(head), rest
    if t == b",":
        return Double(float(head)), rest
    if t == b"(":
        return BigNum(int(head)), rest
    if t == b"#":
        return head == b"t", rest
    if t == b"_":
        return None, rest
    if t in b"$=!":
        n = int(head)
        if n < 0:
            return None, rest
        data, rest = rest[:n], rest[n + 2:]
        if t == b"!":
            return Err(data.decode()), rest
        if t == b"=":
            return Verbatim(data[4:], data[:3].decode()), rest
        return data, rest
    if t in b"*~>":
        n = int(head)
        if n < 0:
            return None, rest
        items = []
        for _ in range(n):
            v, rest = parse(rest)
            items.append(v)
        cls = {b"*": list, b"~": Set, b">": Push}[t]
        return cls(items), rest
    if t in b"%|":
        n = int(head)
        pairs = []
        for _ in range(n):
            k, rest = parse(rest)
            v, rest = parse(rest)
            pairs.append((k, v))
        if t == b"|":
            return parse(rest)  # skip attributes
        return Map(pairs), rest
    raise ValueError(f"bad RESP type byte {t!r}")


def parse_one(raw):
    v, rest = parse(raw)
    assert rest == b"", f"trailing bytes after reply: {rest!r}"
    return v


class RawConn:
    """A raw RESP connection: exact bytes in, exact bytes out."""

    def __init__(self, server, timeout=5.0):
        self.sock = socket.create_connection((server.host, server.port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.reader = _Reader(lambda: self.sock.recv(65536))

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def send(self, data):
        self.sock.sendall(data)

    def read_raw(self):
        return self.reader.read_raw()

    def cmd(self, *args):
        """Send one command (as a RESP array) and return the raw bytes of its reply."""
        self.send(encode(*args))
        return self.read_raw()

    def inline(self, line):
        """Send an inline command (plain text line) and return the raw reply."""
        if isinstance(line, str):
            line = line.encode()
        self.send(line + CRLF)
        return self.read_raw()

    def call(self, *args):
        """Like cmd() but returns the parsed value."""
        return parse_one(self.cmd(*args))

    def read(self):
        return parse_one(self.read_raw())

    def is_closed(self, timeout=2.0):
        """True if the server closed the connection (EOF) within `timeout`."""
        self.sock.settimeout(timeout)
        try:
            data = self.sock.recv(1)
        except (ConnectionResetError, BrokenPipeError):
            return True
        except socket.timeout:
            return False
        return data == b""


def err_bytes(text):
    """Exact wire form of an error reply."""
    return b"-" + text.encode() + CRLF


def bulk(b):
    if isinstance(b, str):
        b = b.encode()
    return b"$%d\r\n%s\r\n" % (len(b), b)


def client(server, **kw):
    """A redis-py client on the test server (no retries: errors surface)."""
    kw.setdefault("socket_timeout", 10)
    kw.setdefault("retry", Retry(NoBackoff(), 0))
    return redis.Redis(host=server.host, port=server.port, **kw)


def wait_until(pred, timeout=5.0, interval=0.01, msg="condition"):
    """Poll `pred` until truthy or fail after `timeout` seconds; returns its value."""
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() >= deadline:
            pytest.fail(f"timed out after {timeout}s waiting for {msg}")
        time.sleep(interval)


# (protocol, decode_responses) combinations used to parametrize client fixtures.
CLIENT_PARAMS = [
    pytest.param((2, False), id="resp2-bytes"),
    pytest.param((2, True), id="resp2-str"),
    pytest.param((3, False), id="resp3-bytes"),
    pytest.param((3, True), id="resp3-str"),
]


def make_client(server, protocol=2, decode=False, **kw):
    """redis-py client tagged with .proto and .decode so tests can build expected values."""
    c = client(server, protocol=protocol, decode_responses=decode, **kw)
    c.proto = protocol
    c.decode = decode
    return c


def v(r, x):
    """Expected value in the form redis-py returns for client `r` (str or bytes)."""
    if x is None:
        return None
    if isinstance(x, (list, tuple)):
        return type(x)(v(r, i) for i in x)
    if isinstance(x, set):
        return {v(r, i) for i in x}
    if isinstance(x, dict):
        return {v(r, k): v(r, val) for k, val in x.items()}
    if isinstance(x, bytes):
        return x.decode() if r.decode else x
    if isinstance(x, str):
        return x if r.decode else x.encode()
    return x


WRONGTYPE = "WRONGTYPE Operation against a key holding the wrong kind of value"
NOT_INT = "ERR value is not an integer or out of range"
NOT_FLOAT = "ERR value is not a valid float"
SYNTAX = "ERR syntax error"


def arity(cmd):
    return f"ERR wrong number of arguments for '{cmd}' command"


class _SharedServer:
    """One server process reused by every test of a module (restarted if it died)."""

    def __init__(self, tmp_path_factory):
        self.factory = tmp_path_factory
        self.current = None

    def get(self):
        from conftest import Server  # the shared harness's process wrapper
        if self.current is None or self.current.proc.poll() is not None:
            if self.current is not None:
                self.current.stop()
            self.current = Server(self.factory.mktemp("shared"))
        return self.current

    def stop(self):
        if self.current is not None:
            self.current.stop()


def shared_server_fixtures():
    """Return (module-scoped holder fixture, function-scoped `server` fixture).

    The `server` fixture replaces conftest's per-test server with one process
    per module that is FLUSHALLed before each test. Use it only in modules whose
    tests change nothing but the keyspace (no CONFIG SET, DEBUG, CLIENT KILL...).
    """

    @pytest.fixture(scope="module")
    def shared_server_holder(tmp_path_factory):
        holder = _SharedServer(tmp_path_factory)
        yield holder
        holder.stop()

    @pytest.fixture
    def server(shared_server_holder):
        s = shared_server_holder.get()
        with RawConn(s) as c:
            assert c.cmd("FLUSHALL") == b"+OK\r\n"
        return s

    return shared_server_holder, server
