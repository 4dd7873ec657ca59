"""MULTI / EXEC / DISCARD / WATCH: replies, errors, and that a watched key
changed by another client aborts EXEC. Runs against redis-server too."""
import redis

from helpers import arity
from helpers_net import RespConn, RespError, err_bytes


def test_multi_exec_queues_and_replies_in_order(server):
    with RespConn.to(server) as c:
        assert c.cmd("MULTI") == b"+OK\r\n"
        assert c.cmd("SET", "k", "1") == b"+QUEUED\r\n"
        assert c.cmd("INCR", "k") == b"+QUEUED\r\n"
        assert c.cmd("GET", "k") == b"+QUEUED\r\n"
        assert c.cmd("EXEC") == b"*3\r\n+OK\r\n:2\r\n$1\r\n2\r\n"


def test_runtime_errors_do_not_abort_the_rest(server):
    with RespConn.to(server) as c:
        c.cmd("SET", "s", "x")
        c.cmd("MULTI")
        c.cmd("INCR", "s")
        c.cmd("SET", "t", "1")
        reply = c.cmd("EXEC")
        assert reply.startswith(b"*2\r\n-ERR value is not an integer or out of range\r\n+OK\r\n")


def test_queueing_errors_abort_exec(server):
    with RespConn.to(server) as c:
        c.cmd("MULTI")
        assert c.cmd("GET") == err_bytes(arity("get"))
        assert c.cmd("NOSUCHCMD").startswith(b"-ERR unknown command")
        c.cmd("SET", "never", "1")
        assert c.cmd("EXEC") == err_bytes("EXECABORT Transaction discarded because of previous errors.")
        assert c.cmd("EXISTS", "never") == b":0\r\n"


def test_control_errors(server):
    with RespConn.to(server) as c:
        assert c.cmd("EXEC") == err_bytes("ERR EXEC without MULTI")
        assert c.cmd("DISCARD") == err_bytes("ERR DISCARD without MULTI")
        c.cmd("MULTI")
        assert c.cmd("MULTI") == err_bytes("ERR MULTI calls can not be nested")
        assert c.cmd("WATCH", "x") == err_bytes("ERR WATCH inside MULTI is not allowed")
        c.cmd("SET", "d", "1")
        assert c.cmd("DISCARD") == b"+OK\r\n"
        assert c.cmd("EXISTS", "d") == b":0\r\n"


def test_watch_aborts_when_another_client_writes(server):
    a = redis.Redis(port=server.port)
    b = redis.Redis(port=server.port)
    a.set("w", "1")
    with RespConn.to(server) as c:
        assert c.cmd("WATCH", "w") == b"+OK\r\n"
        b.set("w", "2")
        c.cmd("MULTI")
        c.cmd("SET", "w", "from-c")
        assert c.cmd("EXEC") == b"*-1\r\n"
        assert a.get("w") == b"2"
        # unchanged watched key: EXEC runs
        c.cmd("WATCH", "w")
        c.cmd("MULTI")
        c.cmd("SET", "w", "from-c")
        assert c.cmd("EXEC") == b"*1\r\n+OK\r\n"
        assert a.get("w") == b"from-c"


def test_redis_py_transactional_pipeline_and_transaction_helper(server):
    r = redis.Redis(port=server.port, decode_responses=True)
    with r.pipeline() as p:  # transaction=True by default: MULTI/EXEC
        p.set("a", 1).incr("a").hset("h", "f", "v").hgetall("h")
        assert p.execute() == [True, 2, 1, {"f": "v"}]

    def add_one(pipe):
        v = int(pipe.get("counter") or 0)
        pipe.multi()
        pipe.set("counter", v + 1)

    for _ in range(5):
        r.transaction(add_one, "counter")
    assert r.get("counter") == "5"


def test_exec_is_refused_when_memory_or_replicas_changed_since_queueing(server):
    """As Redis: EXEC of queued writes aborts when the node went over
    maxmemory, or min-replicas-to-write asks for replicas it lacks, after
    they were queued; reads alone still run."""
    with RespConn.to(server) as c, RespConn.to(server) as admin:
        c.call("SET", "x", "value")
        c.call("MULTI")
        c.call("GET", "x")
        admin.call("CONFIG", "SET", "maxmemory", "1")
        assert c.call("EXEC") == [b"value"]
        admin.call("CONFIG", "SET", "maxmemory", "0")
        c.call("MULTI")
        c.call("SET", "x", "1")
        admin.call("CONFIG", "SET", "maxmemory", "1")
        reply = c.call("EXEC")
        admin.call("CONFIG", "SET", "maxmemory", "0")
        assert str(reply).startswith("EXECABORT Transaction discarded because of: OOM"), reply
        c.call("MULTI")
        c.call("INCR", "n")
        admin.call("CONFIG", "SET", "min-replicas-to-write", "2")
        reply = c.call("EXEC")
        assert str(reply) == ("EXECABORT Transaction discarded because of: "
                              "NOREPLICAS Not enough good replicas to write."), reply
        assert c.call("SET", "y", "1") == RespError("NOREPLICAS Not enough good replicas to write.")
        assert c.call("GET", "n") is None
        admin.call("CONFIG", "SET", "min-replicas-to-write", "0")
        assert c.call("SET", "y", "1") == "OK"
