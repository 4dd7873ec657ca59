"""Wire-level helpers for the black-box tests: one RESP2/RESP3 client over a raw
socket (exact reply bytes or decoded values; no read without a deadline), the
expected wire forms of replies, and HTTP helpers for the admin port.

Decoded value types (so tests can tell RESP types apart):
  +simple        -> str
  $bulk          -> bytes
  =verbatim      -> Verbatim (bytes without the 3-byte format prefix; `.fmt` is it)
  -error / !err  -> RespError (returned, not raised)
  :int / (big    -> int
  ,double        -> float
  #bool          -> bool
  _ / $-1 / *-1  -> None
  *array         -> list
  ~set           -> RespSet (a list subclass, order as sent)
  %map           -> Map (a dict subclass, order as sent; unhashable keys become
                    tuples; a repeated key is a protocol error here)
  >push          -> Push (a list subclass)
  |attribute     -> skipped; the value that follows is returned
"""
import json
import socket
import time
import urllib.error
import urllib.request

CRLF = b"\r\n"


class RespError(Exception):
    """An error reply. `str(e)` is the text without the leading '-'."""

    def __eq__(self, other):
        return isinstance(other, RespError) and str(self) == str(other)

    def __hash__(self):
        return hash(str(self))

    def __repr__(self):
        return f"RespError({str(self)!r})"


class Push(list):
    def __repr__(self):
        return f"Push({list.__repr__(self)})"


class RespSet(list):
    def __repr__(self):
        return f"RespSet({list.__repr__(self)})"


class Map(dict):
    """A RESP3 map, keys in the order sent."""


class Verbatim(bytes):
    """A RESP3 verbatim string: the text, with the 3-letter format in `fmt`."""

    def __new__(cls, data, fmt):
        obj = super().__new__(cls, data)
        obj.fmt = fmt
        return obj


class ConnectionClosed(ConnectionError):
    pass


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


def err_bytes(text):
    """Exact wire form of an error reply."""
    return b"-" + text.encode() + CRLF


def bulk(b):
    """Exact wire form of a bulk string reply."""
    if isinstance(b, str):
        b = b.encode()
    return b"$%d\r\n%s\r\n" % (len(b), b)


def _hashable(v):
    if isinstance(v, list):
        return tuple(_hashable(x) for x in v)
    if isinstance(v, dict):
        return tuple((k, _hashable(x)) for k, x in v.items())
    return v


class _Reader:
    """Decodes RESP values from `buf` starting at `pos`; `_fill()` appends more
    bytes or raises."""

    def __init__(self, data=b""):
        self.buf = bytearray(data)
        self.pos = 0

    def _fill(self):
        raise ValueError(f"incomplete RESP reply: {bytes(self.buf[:80])!r}")

    def _line(self):
        while True:
            i = self.buf.find(CRLF, self.pos)
            if i >= 0:
                line = bytes(self.buf[self.pos:i])
                self.pos = i + 2
                return line
            self._fill()

    def _exact(self, n):
        while len(self.buf) - self.pos < n + 2:
            self._fill()
        data = bytes(self.buf[self.pos:self.pos + n])
        if self.buf[self.pos + n:self.pos + n + 2] != CRLF:
            raise ValueError("bulk not terminated by CRLF")
        self.pos += n + 2
        return data

    def _value(self):
        line = self._line()
        if not line:
            raise ValueError("empty RESP line")
        t, rest = line[:1], line[1:]
        if t == b"+":
            return rest.decode()
        if t == b"-":
            return RespError(rest.decode())
        if t in (b":", b"("):
            return int(rest)
        if t == b",":
            return float(rest.decode())
        if t == b"#":
            return rest == b"t"
        if t == b"_":
            return None
        if t in (b"$", b"=", b"!"):
            n = int(rest)
            if n < 0:
                return None
            data = self._exact(n)
            if t == b"=":
                return Verbatim(data[4:], data[:3].decode())
            if t == b"!":
                return RespError(data.decode())
            return data
        if t in (b"*", b"~", b">"):
            n = int(rest)
            if n < 0:
                return None
            items = [self._value() for _ in range(n)]
            if t == b"~":
                return RespSet(items)
            if t == b">":
                return Push(items)
            return items
        if t == b"%":
            d = Map()
            for _ in range(int(rest)):
                k = _hashable(self._value())
                if k in d:
                    raise ValueError(f"RESP3 map repeats the key {k!r}")
                d[k] = self._value()
            return d
        if t == b"|":
            for _ in range(2 * int(rest)):
                self._value()
            return self._value()
        raise ValueError(f"unknown RESP type byte {t!r} in line {line!r}")


def parse_one(raw):
    """Decode the one complete reply in `raw` (bytes)."""
    r = _Reader(raw)
    v = r._value()
    assert r.pos == len(r.buf), f"trailing bytes after reply: {bytes(r.buf[r.pos:])!r}"
    return v


class RespConn(_Reader):
    """One connection. `cmd()` returns a reply's exact bytes, `call()` its
    decoded value (pushes met on the way are queued in `pushes`). Every read
    takes a timeout and raises TimeoutError when nothing complete arrives in
    time, ConnectionClosed on EOF."""

    def __init__(self, host, port, timeout=5.0):
        super().__init__()
        self.default_timeout = timeout
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.pushes = []  # pushes that arrived while waiting for a reply
        self._deadline = None

    @classmethod
    def to(cls, server, timeout=5.0):
        return cls(server.host, server.port, timeout)

    # -- plumbing ----------------------------------------------------------
    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def send_raw(self, data):
        self.sock.settimeout(self.default_timeout)  # a read may have left a short one
        self.sock.sendall(data)

    def send(self, *args):
        self.send_raw(encode(*args))

    def _fill(self):
        remaining = self._deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError("no complete reply before the deadline")
        self.sock.settimeout(remaining)
        try:
            data = self.sock.recv(1 << 16)
        except socket.timeout:
            raise TimeoutError("no complete reply before the deadline") from None
        except ConnectionResetError:
            raise ConnectionClosed("connection reset by peer") from None
        if not data:
            raise ConnectionClosed("server closed the connection")
        self.buf += data

    def _frame(self, timeout):
        """Decode the next frame; returns (value, its exact bytes)."""
        if self.pos > 1 << 20:  # drop consumed bytes, only between frames
            del self.buf[: self.pos]
            self.pos = 0
        self._deadline = time.monotonic() + (self.default_timeout if timeout is None else timeout)
        start = self.pos
        try:
            v = self._value()
        except TimeoutError:
            self.pos = start  # keep the partial frame for a later read
            raise
        return v, bytes(self.buf[start:self.pos])

    # -- exact bytes -------------------------------------------------------
    def read_raw(self, timeout=None):
        """The exact bytes of the next frame (reply or push)."""
        return self._frame(timeout)[1]

    def cmd(self, *args):
        """Send one command (as a RESP array) and return the raw bytes of its reply."""
        self.send(*args)
        return self.read_raw()

    def inline(self, line):
        """Send an inline command (plain text line) and return the raw reply."""
        if isinstance(line, str):
            line = line.encode()
        self.send_raw(line + CRLF)
        return self.read_raw()

    def wait_buffered(self, n, timeout=None):
        """Wait until at least `n` unread bytes are buffered (leaving them unread)."""
        self._deadline = time.monotonic() + (self.default_timeout if timeout is None else timeout)
        while len(self.buf) - self.pos < n:
            self._fill()

    # -- decoded values ----------------------------------------------------
    def read_any(self, timeout=None):
        """Next value of any kind (push or reply)."""
        return self._frame(timeout)[0]

    def read(self, timeout=None):
        """Next reply that is not a push; pushes seen on the way are queued."""
        deadline = time.monotonic() + (self.default_timeout if timeout is None else timeout)
        while True:
            v = self.read_any(max(0.0, deadline - time.monotonic()))
            if isinstance(v, Push):
                self.pushes.append(v)
                continue
            return v

    def call(self, *args, timeout=None):
        self.send(*args)
        return self.read(timeout)

    def ok(self, *args):
        r = self.call(*args)
        assert r == "OK", f"{args!r} -> {r!r}"
        return r

    def next_push(self, timeout=5.0):
        """The next push message (queued or arriving before the deadline)."""
        if self.pushes:
            return self.pushes.pop(0)
        deadline = time.monotonic() + timeout
        while True:
            v = self.read_any(max(0.0, deadline - time.monotonic()))
            if isinstance(v, Push):
                return v
            raise AssertionError(f"expected a push, got reply {v!r}")

    def barrier(self):
        """Round-trip a PING; pushes the server queued for us before answering
        it end up in self.pushes. Returns (and clears) those pushes."""
        r = self.call("PING")
        assert r in ("PONG", [b"pong", b""]), r
        got, self.pushes = self.pushes, []
        return got

    def client_id(self):
        return self.call("CLIENT", "ID")

    # -- connection end ----------------------------------------------------
    def _until_eof(self, timeout):
        """(closed within `timeout`, unread bytes received before the close or the deadline)."""
        deadline = time.monotonic() + timeout
        got = bytes(self.buf[self.pos:])
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False, got
            self.sock.settimeout(remaining)
            try:
                data = self.sock.recv(1 << 16)
            except socket.timeout:
                continue
            except (ConnectionResetError, BrokenPipeError):
                return True, got
            if not data:
                return True, got
            got += data

    def expect_closed(self, timeout=5.0):
        """Read until EOF; returns everything unread that came before the close."""
        closed, got = self._until_eof(timeout)
        if not closed:
            raise AssertionError(f"connection still open after {timeout}s; got {got!r}")
        return got

    def is_closed(self, timeout=2.0):
        """True if the server closed the connection within `timeout`, nothing unread before."""
        closed, got = self._until_eof(timeout)
        return closed and got == b""


def raw_exchange(host, port, payload, timeout=5.0):
    """Send raw bytes, return everything received until the server closes."""
    with RespConn(host, port, timeout) as c:
        c.send_raw(payload)
        return c.expect_closed(timeout)


def http_get(host, port, path, timeout=5.0):
    """(status, headers, body bytes); HTTP errors are returned, not raised."""
    url = f"http://{host}:{port}{path}"
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


def http_json(host, port, path, timeout=5.0):
    status, _, body = http_get(host, port, path, timeout)
    assert status == 200, (status, body[:500])
    return json.loads(body)


def bulks(*items):
    """The RESP2 array of bulk strings `items` (ints and strs encoded)."""
    out = b"*%d\r\n" % len(items)
    for i in items:
        i = i if isinstance(i, bytes) else str(i).encode()
        out += b"$%d\r\n%s\r\n" % (len(i), i)
    return out
