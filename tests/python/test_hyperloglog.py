"""HyperLogLog commands on strings: PFADD, PFCOUNT, PFMERGE, PFDEBUG and
PFSELFTEST, with Redis 7's replies, errors, byte encoding and counts.

Every expectation here was checked against redis-server 7.0 with
DELTAGRID_TEST_TARGET=redis. The counts are those redis-server 7.0.15 gave
for the same elements, and the tests marked `reference` compare the bytes
deltagrid stores with those of a redis-server the test starts itself
(skipped when none is installed). Keyspace events are in
test_notifications.py.
"""

import random
import shutil
import signal
import socket
import subprocess
import time

import pytest

from conftest import free_port
from helpers import WRONGTYPE, arity
from helpers_net import RespConn, err_bytes

pytestmark = pytest.mark.shared_server

NOT_HLL = "WRONGTYPE Key is not a valid HyperLogLog string value."
CORRUPTED = "INVALIDOBJ Corrupted HLL object detected"
DENSE_LEN = 16 + 16384 * 6 // 8
# A sparse header whose cached count is marked stale: PFCOUNT computes it.
STALE_HEADER = b"HYLL\x01" + b"\x00" * 10 + b"\x80"

# PFADD k item-0 .. item-(n-1), then PFCOUNT k, on redis-server 7.0.15.
REDIS_COUNTS = [(1, 1), (3, 3), (20, 20), (100, 100), (200, 199), (500, 497), (1000, 996),
                (1500, 1496), (2000, 2005), (3000, 2993), (5000, 4987), (10000, 9991),
                (20000, 19865), (50000, 50071)]

# GET k after PFADD k item-0 .. item-19 on redis-server 7.0.15: sparse,
# the cached cardinality marked stale (byte 15).
REDIS_SPARSE_20 = bytes.fromhex(
    "48594c4c01000000000000000000008045de8440718440bd98404888420c8046bb8c4a468443238440c488"
    "42838041228042948047bf8444238042f78041bb8042ad8443d984426e80404380418b")


def items(start, end, prefix="item-"):
    return [f"{prefix}{i}" for i in range(start, end)]


def pfadd_many(conn, key, elements, batch=1000):
    for i in range(0, len(elements), batch):
        conn.call("PFADD", key, *elements[i:i + batch])


# ------------------------------------------------------------------- PFADD

def test_pfadd_creates_and_reports_register_changes(conn):
    assert conn.cmd("PFADD", "h") == b":1\r\n"        # created, no elements
    assert conn.call("EXISTS", "h") == 1
    assert conn.call("TYPE", "h") == "string"
    assert conn.call("PFCOUNT", "h") == 0
    assert conn.call("PFADD", "h") == 0
    assert conn.call("PFADD", "h", "a", "b", "c") == 1
    assert conn.call("PFADD", "h", "a", "b", "c") == 0
    assert conn.call("PFADD", "h", "") == 1
    assert conn.call("PFCOUNT", "h") == 4


def test_an_empty_hyperloglog_is_redis_bytes(conn):
    conn.call("PFADD", "h")
    # Created: the cached cardinality is marked stale (byte 15).
    assert conn.call("GET", "h") == STALE_HEADER + b"\x7f\xff"
    assert conn.call("PFDEBUG", "DECODE", "h") == b"Z:16384"


def test_values_are_byte_for_byte_redis_encoding(conn):
    conn.call("PFADD", "h", *items(0, 20))
    assert conn.call("GET", "h") == REDIS_SPARSE_20
    assert conn.call("PFCOUNT", "h") == 20


def test_counts_match_redis(conn):
    added = 0
    for n, count in REDIS_COUNTS:
        pfadd_many(conn, "h", items(added, n))
        added = n
        assert conn.call("PFCOUNT", "h") == count, n


def test_sparse_turns_dense_past_3000_bytes(conn):
    pfadd_many(conn, "h", items(0, 1500))
    assert conn.call("PFDEBUG", "ENCODING", "h") == "sparse"
    assert conn.call("STRLEN", "h") <= 3000
    pfadd_many(conn, "h", items(1500, 2000))
    assert conn.call("PFDEBUG", "ENCODING", "h") == "dense"
    assert conn.call("STRLEN", "h") == DENSE_LEN
    assert conn.call("CONFIG", "GET", "hll-sparse-max-bytes") == [b"hll-sparse-max-bytes", b"3000"]


def test_pfadd_keeps_the_time_to_live(conn):
    conn.call("PFADD", "h", "a")
    conn.call("EXPIRE", "h", 100)
    assert conn.call("PFADD", "h", "b", "c") == 1
    assert 0 < conn.call("TTL", "h") <= 100


# ----------------------------------------------------------------- PFCOUNT

def test_pfcount_of_several_keys_counts_the_union(conn):
    conn.call("PFADD", "a{t}", "a", "b", "c")
    conn.call("PFADD", "b{t}", "b", "c", "d")
    assert conn.call("PFCOUNT", "a{t}", "b{t}") == 4
    assert conn.call("PFCOUNT", "a{t}", "b{t}", "missing{t}") == 4
    assert conn.call("PFCOUNT", "missing{t}", "other{t}") == 0
    assert conn.call("PFCOUNT", "missing") == 0
    pfadd_many(conn, "d{t}", items(0, 5000))
    pfadd_many(conn, "e{t}", items(2500, 7500))
    assert conn.call("PFDEBUG", "ENCODING", "d{t}") == "dense"
    assert abs(conn.call("PFCOUNT", "d{t}", "e{t}", "a{t}") - 7503) < 7503 * 0.05


def test_a_valid_cached_count_is_answered_as_it_is(conn):
    # A value whose header caches 1234 as valid: PFCOUNT answers the cache.
    value = bytearray(REDIS_SPARSE_20)
    value[8:16] = (1234).to_bytes(8, "little")
    conn.call("SET", "h", bytes(value))
    assert conn.call("PFCOUNT", "h") == 1234
    assert conn.call("PFCOUNT", "h", "missing") == 20   # a union is always computed


@pytest.mark.deltagrid_only
def test_pfcount_does_not_write_its_cache(conn):
    # Redis stores the count it computed in the header (byte 15 becomes 0);
    # deltagrid's PFCOUNT is a read and leaves the value alone.
    conn.call("PFADD", "h", "a", "b", "c")
    before = conn.call("GET", "h")
    assert conn.call("PFCOUNT", "h") == 3
    assert conn.call("GET", "h") == before
    assert before[15] == 0x80


def test_type_and_corruption_errors(conn):
    conn.call("HSET", "hash{t}", "f", "v")
    conn.call("SET", "str{t}", "not an hll")
    conn.call("PFADD", "ok{t}", "a")
    for cmd in [("PFADD", "hash{t}", "a"), ("PFCOUNT", "hash{t}"), ("PFCOUNT", "ok{t}", "hash{t}"),
                ("PFMERGE", "hash{t}", "ok{t}"), ("PFMERGE", "ok{t}", "hash{t}"),
                ("PFDEBUG", "ENCODING", "hash{t}")]:
        assert conn.cmd(*cmd) == err_bytes(WRONGTYPE), cmd
    for cmd in [("PFADD", "str{t}", "a"), ("PFCOUNT", "str{t}"), ("PFCOUNT", "ok{t}", "str{t}"),
                ("PFMERGE", "ok{t}", "str{t}"), ("PFMERGE", "str{t}", "ok{t}"),
                ("PFDEBUG", "GETREG", "str{t}")]:
        assert conn.cmd(*cmd) == err_bytes(NOT_HLL), cmd
    assert conn.call("GET", "str{t}") == b"not an hll"


@pytest.mark.parametrize("corrupt, error", [
    (lambda c: c.call("APPEND", "h", "hello"), CORRUPTED),        # a tail past the registers
    (lambda c: c.call("SETRANGE", "h", 0, "0123"), NOT_HLL),      # broken magic
    (lambda c: c.call("SETRANGE", "h", 4, "x"), NOT_HLL),         # unknown encoding
    (lambda c: c.call("SETRANGE", "h", 4, "\x00"), NOT_HLL),      # "dense" of the wrong length
    (lambda c: c.call("SET", "h", STALE_HEADER + b"\x7f\xfe"), CORRUPTED),  # a register short
    (lambda c: c.call("SET", "h", b"HYLL"), NOT_HLL),
])
def test_corrupted_values_are_detected(conn, corrupt, error):
    conn.call("PFADD", "h", "a", "b", "c")
    corrupt(conn)
    assert conn.cmd("PFCOUNT", "h") == err_bytes(error)
    assert conn.cmd("PFCOUNT", "h", "h") == err_bytes(error)
    assert conn.cmd("PFMERGE", "d", "h") == err_bytes(error)


def test_runs_past_the_last_register_are_corrupted(conn):
    # 16384 zeros then one more run: refused by every reader (Redis since
    # the fix of CVE-2025-32023), however long the runs add up to.
    header = STALE_HEADER
    for body in [b"\x7f\xff\xbc", b"\x7f\xff" * 3000 + b"\xff", b"\x3f" * 70000 + b"\xff"]:
        conn.call("SET", "h", header + body)
        assert conn.cmd("PFCOUNT", "h") == err_bytes(CORRUPTED)
        assert conn.cmd("PFCOUNT", "h", "h") == err_bytes(CORRUPTED)
        assert conn.cmd("PFDEBUG", "GETREG", "h") == err_bytes(CORRUPTED)
        assert conn.cmd("PING") == b"+PONG\r\n"


def test_corrupted_values_never_break_the_server(conn):
    rnd = random.Random(7)
    for i in range(200):
        conn.call("DEL", "h")
        pfadd_many(conn, "h", items(0, rnd.randrange(3000), prefix=f"{i}-"))
        for _ in range(rnd.randrange(1, 6)):
            pos = rnd.randrange(conn.call("STRLEN", "h"))
            conn.call("SETRANGE", "h", pos, bytes([rnd.randrange(256)]))
        for cmd in [("PFCOUNT", "h"), ("PFADD", "h", "x", "y"), ("PFCOUNT", "h", "h")]:
            reply = conn.call(*cmd)
            assert isinstance(reply, int) or str(reply) in (NOT_HLL, CORRUPTED), (cmd, reply)
    assert conn.cmd("PING") == b"+PONG\r\n"


# ----------------------------------------------------------------- PFMERGE

def test_pfmerge_takes_the_union_into_the_destination(conn):
    conn.call("PFADD", "a{t}", "a", "b", "c")
    conn.call("PFADD", "b{t}", "b", "c", "d")
    conn.call("PFADD", "c{t}", "c", "d", "e")
    assert conn.cmd("PFMERGE", "d{t}", "a{t}", "b{t}", "c{t}") == b"+OK\r\n"
    assert conn.call("PFCOUNT", "d{t}") == 5
    # The destination is one of the inputs.
    conn.call("PFADD", "d{t}", "f")
    assert conn.call("PFMERGE", "d{t}", "a{t}") == "OK"
    assert conn.call("PFCOUNT", "d{t}") == 6
    assert conn.call("PFMERGE", "new{t}") == "OK"
    assert conn.call("PFCOUNT", "new{t}") == 0
    assert conn.call("PFMERGE", "new2{t}", "missing{t}") == "OK"
    assert conn.call("EXISTS", "new2{t}") == 1


def test_pfmerge_of_a_dense_input_is_dense(conn):
    pfadd_many(conn, "a{t}", items(0, 3000))
    conn.call("PFADD", "b{t}", "x")
    conn.call("EXPIRE", "b{t}", 100)
    conn.call("PFMERGE", "b{t}", "a{t}")
    assert conn.call("PFDEBUG", "ENCODING", "b{t}") == "dense"
    assert conn.call("PFCOUNT", "b{t}") == conn.call("PFCOUNT", "a{t}", "b{t}")
    assert 0 < conn.call("TTL", "b{t}") <= 100


# ----------------------------------------------------------------- PFDEBUG

def test_pfdebug(conn):
    conn.call("PFADD", "h", "a", "b")
    assert conn.cmd("PFDEBUG", "ENCODING", "h") == b"+sparse\r\n"
    assert conn.call("PFDEBUG", "DECODE", "h") == b"Z:12711 v:2,1 Z:3068 v:1,1 Z:603"
    regs = conn.call("PFDEBUG", "GETREG", "h")
    assert len(regs) == 16384 and sorted(regs)[-2:] == [1, 2] and sum(regs) == 3
    assert conn.call("PFDEBUG", "ENCODING", "h") == "dense"     # GETREG turned it dense
    assert conn.cmd("PFDEBUG", "DECODE", "h") == err_bytes("ERR HLL encoding is not sparse")
    assert conn.call("PFDEBUG", "TODENSE", "h") == 0
    conn.call("PFADD", "s", "a")
    assert conn.call("PFDEBUG", "todense", "s") == 1
    assert conn.call("STRLEN", "s") == DENSE_LEN
    assert conn.call("PFCOUNT", "s") == 1


def test_pfdebug_errors(conn):
    conn.call("PFADD", "h", "a")
    assert conn.cmd("PFDEBUG", "NOPE", "h") == err_bytes("ERR Unknown PFDEBUG subcommand 'NOPE'")
    # The key is looked up before the subcommand.
    assert conn.cmd("PFDEBUG", "NOPE", "missing") == err_bytes(
        "ERR The specified key does not exist")
    assert conn.cmd("PFDEBUG", "GETREG") == err_bytes(arity("pfdebug"))
    assert conn.cmd("PFDEBUG", "GETREG", "h", "x") == err_bytes(arity("pfdebug"))
    assert conn.cmd("PFADD") == err_bytes(arity("pfadd"))
    assert conn.cmd("PFCOUNT") == err_bytes(arity("pfcount"))
    assert conn.cmd("PFMERGE") == err_bytes(arity("pfmerge"))
    assert conn.cmd("PFSELFTEST", "x") == err_bytes(arity("pfselftest"))


def test_pfselftest(conn):
    assert conn.call("PFSELFTEST", timeout=120) == "OK"


def test_command_info(conn):
    info = {c[0]: c for c in conn.call("COMMAND", "INFO", "pfadd", "pfcount", "pfmerge",
                                        "bitop", "bitfield_ro")}
    assert info[b"pfadd"][1:6] == [-2, info[b"pfadd"][2], 1, 1, 1]
    assert {"write", "denyoom", "fast"} <= {f.decode() if isinstance(f, bytes) else f
                                            for f in info[b"pfadd"][2]}
    assert info[b"pfcount"][1] == -2 and info[b"pfcount"][3:6] == [1, -1, 1]
    assert info[b"pfmerge"][3:6] == [1, -1, 1]
    assert info[b"bitop"][1] == -4 and info[b"bitop"][3:6] == [2, -1, 1]
    assert info[b"bitfield_ro"][1] == -2
    docs = conn.call("COMMAND", "DOCS", "pfadd")
    body = dict(zip(docs[1][::2], docs[1][1::2]))
    assert body[b"group"] == b"hyperloglog" and body[b"since"] == b"2.8.9"


# ----------------------------------------------- values copied from Redis itself

@pytest.fixture(scope="module")
def reference():
    """A redis-server of its own (skipped when none is installed)."""
    if shutil.which("redis-server") is None:
        pytest.skip("no redis-server to compare with")
    port = free_port()
    proc = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1",
                             "--save", "", "--appendonly", "no"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            break
        except OSError:
            if time.monotonic() > deadline or proc.poll() is not None:
                proc.kill()
                pytest.skip("redis-server did not start")
            time.sleep(0.05)
    conn = RespConn("127.0.0.1", port)
    yield conn
    conn.close()
    proc.send_signal(signal.SIGINT)
    proc.wait(timeout=10)


@pytest.mark.parametrize("n", [5, 300, 1800, 4000, 30000])
def test_the_same_elements_make_the_same_bytes_as_redis(conn, reference, n):
    reference.call("DEL", "h")
    for c in (conn, reference):
        for i in range(0, n, 100):   # the same batches: sparse merges depend on them
            c.call("PFADD", "h", *items(i, min(i + 100, n)))
    assert conn.call("GET", "h") == reference.call("GET", "h")
    assert conn.call("PFCOUNT", "h") == reference.call("PFCOUNT", "h")


@pytest.mark.parametrize("n", [10, 1200, 25000])
def test_a_value_from_redis_counts_and_merges_the_same(conn, reference, n):
    reference.call("DEL", "r", "m{t}", "x{t}")
    pfadd_many(reference, "r", items(0, n, prefix="r-"))
    copied = reference.call("GET", "r")
    conn.call("SET", "r", copied)
    assert conn.call("PFCOUNT", "r") == reference.call("PFCOUNT", "r")
    # Merged with other elements, here and there.
    for c in (conn, reference):
        c.call("SET", "m{t}", copied)
        c.call("PFADD", "x{t}", *items(0, 50, prefix="x-"))
        c.call("PFMERGE", "m{t}", "x{t}")
        c.call("PFADD", "m{t}", *items(0, 10, prefix="y-"))
    assert conn.call("GET", "m{t}")[16:] == reference.call("GET", "m{t}")[16:]
    assert conn.call("PFCOUNT", "m{t}") == reference.call("PFCOUNT", "m{t}")


def test_redis_py_hyperloglog_calls(r):
    assert r.pfadd("h", "a", "b", "c") == 1
    assert r.pfcount("h") == 3
    r.pfadd("g", "c", "d")
    assert r.pfmerge("u", "h", "g") is True
    assert r.pfcount("u") == 4
    assert r.pfcount("h", "g") == 4
