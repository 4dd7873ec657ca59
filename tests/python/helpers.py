"""Helpers shared by the black-box tests that are not about the wire format:
polling, redis-py clients and the values they return, Redis error texts.
(Raw RESP connections and exact reply bytes are in helpers_net.py.)
"""
import time

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from helpers_net import err_bytes


def client(server, **kw):
    """A redis-py client on the test server (no retries: errors surface)."""
    kw.setdefault("socket_timeout", 10)
    kw.setdefault("retry", Retry(NoBackoff(), 0))
    return redis.Redis(host=server.host, port=server.port, **kw)


def wait_until(pred, timeout=5.0, interval=0.01, message="condition"):
    """Poll `pred` until it returns a truthy value; return that value, or fail
    after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        last = pred()
        if last:
            return last
        if time.monotonic() >= deadline:
            pytest.fail(f"timed out after {timeout}s waiting for {message} (last: {last!r})")
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


def invalid_expire(cmd):
    """Exact wire form of the error for an out-of-range expire time."""
    return err_bytes(f"ERR invalid expire time in '{cmd}' command")
