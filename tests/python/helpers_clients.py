"""Raw-connection helpers shared by the tests of blocked clients
(test_blocking, test_lists) and of keyspace notifications
(test_notifications, test_lists)."""
from helpers import wait_until
from helpers_net import RespConn


def blocked_ids(conn):
    """The ids of the clients CLIENT LIST shows blocked (flag `b`)."""
    ids = set()
    for line in conn.call("CLIENT", "LIST").decode().splitlines():
        fields = dict(f.split("=", 1) for f in line.split(" ") if "=" in f)
        if "b" in fields["flags"]:
            ids.add(int(fields["id"]))
    return ids


def blocked_clients(conn):
    info = conn.call("INFO", "clients").decode()
    return int(info.split("blocked_clients:")[1].split("\r\n")[0])


def wait_blocked(conn, *clients):
    """Waits until every client of `clients` (RespConns, by id) is blocked."""
    want = {c.id for c in clients}
    wait_until(lambda: want <= blocked_ids(conn), message=f"clients {want} blocked")


def connect(server, resp3=False):
    """A raw connection that knows its client id (RESP3 with `resp3`)."""
    c = RespConn.to(server)
    if resp3:
        c.call("HELLO", "3")
    c.id = c.client_id()
    return c


def got(listener, n):
    """The next `n` notifications as (channel, payload) text pairs."""
    out = []
    for _ in range(n):
        m = listener.read(timeout=5)
        assert m[0] == b"pmessage", m
        out.append((m[2].decode(), m[3].decode()))
    return out
