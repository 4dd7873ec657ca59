"""Joining and leaving a site under write load: a node that is not a seed
joins and receives its share of partitions (live migration: snapshot,
catch-up, fenced handover), a member leaves with `deltagrid cluster leave`
and its process ends once drained; every acknowledged write survives and
clients follow MOVED to the new owners."""
import re
import subprocess

import pytest
import redis
from redis.cluster import RedisCluster
from redis.crc import key_slot

from conftest import Server, binary, free_port
from helpers import wait_until
from helpers_net import RespConn
from helpers_wire import wire_frame, wire_hello
from test_cluster import assert_no_acknowledged_write_lost, ledger_writers, site_config

pytestmark = pytest.mark.deltagrid_only

PARTITIONS = 32


def node_config(name, seed_ports, cluster_port=None, secret=None):
    """(client port, config) of node `name` ("n4")."""
    i = int(name[1:]) - 1
    ports, cluster_ports = {i: free_port()}, {i: cluster_port or free_port()}
    cfg = site_config(i, ports, cluster_ports, seed_ports=seed_ports, partitions=PARTITIONS)
    if secret:
        cfg += f'secret = "{secret}"\n'  # [site] is the last table
    return ports[i], cfg


def start(tmp_path, name, seed_ports, cluster_port=None, secret=None):
    """Node `name` ("n4"); a seed when its cluster port is among `seed_ports`."""
    port, cfg = node_config(name, seed_ports, cluster_port, secret)
    d = tmp_path / name
    d.mkdir()
    node = Server(d, config=cfg, port=port)
    node.name = name
    return node


def status(node):
    out = subprocess.run([binary(), "cluster", "status", "--admin", f"127.0.0.1:{node.admin_port}"],
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    text = out.stdout
    rows = {l.split()[0].rstrip("*"): l.split() for l in text.splitlines() if re.match(r"n\d", l)}
    migrating = int(re.search(r"migrating: (\d+)", text).group(1))
    return rows, migrating


def settled(node, members):
    """Every member up, active, with its even share, nothing migrating."""
    rows, migrating = status(node)
    if migrating or set(rows) != set(members):
        return False
    share = PARTITIONS // len(members)
    return all(r[3] == "up" and r[4] == "active" and int(r[5]) in (share, share + 1)
               and int(r[6]) in (share, share + 1) for r in rows.values())


@pytest.fixture
def seeds(tmp_path):
    cluster_ports = [free_port() for _ in range(3)]
    nodes = [start(tmp_path, f"n{i + 1}", cluster_ports, cluster_ports[i]) for i in range(3)]
    try:
        wait_until(lambda: settled(nodes[0], ["n1", "n2", "n3"]), timeout=20, message="site formed")
        yield nodes, cluster_ports
    finally:
        for s in nodes:
            s.stop()


def test_a_node_joins_and_another_leaves_under_write_load(seeds, tmp_path):
    nodes, cluster_ports = seeds
    n1, n2, n3 = nodes
    n4 = None
    with ledger_writers([n1.port], 4, "j") as ledgers:
        written = lambda: sum(len(l) for l in ledgers)
        wait_until(lambda: written() > 300, timeout=20, message="writers got going")
        # A node that is not a seed joins through the seeds.
        n4 = start(tmp_path, "n4", cluster_ports)
        wait_until(lambda: settled(n1, ["n1", "n2", "n3", "n4"]), timeout=60,
                   message="the joined node never got its share")
        rows, _ = status(n4)
        assert rows["n4"][3:5] == ["up", "active"]
        at_join = written()
        wait_until(lambda: written() > at_join + 300, timeout=20, message="writes after the join")

        # A slot now served by n4: the others answer MOVED to it.
        with RespConn.to(n1) as c:
            ranges = c.call("CLUSTER", "SLOTS")
        first = next(f for f, l, p, *_ in ranges if p[1] == n4.port)
        key = next(f"m{i}" for i in range(1_000_000) if key_slot(f"m{i}".encode()) == first)
        with RespConn.to(n1) as c:
            assert c.cmd("SET", key, "x") == f"-MOVED {first} 127.0.0.1:{n4.port}\r\n".encode()

        # n2 leaves: drained, removed, and its process ends by itself.
        out = subprocess.run([binary(), "cluster", "leave", "--admin", f"127.0.0.1:{n1.admin_port}",
                              "--node", "n2"], capture_output=True, text=True, timeout=30)
        assert out.returncode == 0 and "leaving" in out.stdout, out
        assert n2.proc.wait(timeout=60) == 0
        wait_until(lambda: settled(n1, ["n1", "n3", "n4"]), timeout=60,
                   message="the site never settled after n2 left")
        at_leave = written()
        wait_until(lambda: written() > at_leave + 300, timeout=20, message="writes after the leave")

        # SIGTERM only stops n4: it hands its partitions over and ends, and
        # stays a member (down) that a restart brings back (test_restarts).
        n4.proc.terminate()
        assert n4.proc.wait(timeout=60) == 0
        def n4_down_and_replaced():
            rows, migrating = status(n1)
            return (set(rows) == {"n1", "n3", "n4"} and rows["n4"][4] == "dead"
                    and rows["n4"][5:7] == ["0", "0"] and not migrating)
        wait_until(n4_down_and_replaced, timeout=60, message="n4 was not replaced after SIGTERM")
        at_term = written()
        wait_until(lambda: written() > at_term + 300, timeout=20, message="writes after n4 stopped")
    assert_no_acknowledged_write_lost(ledgers, n3.port)
    assert b"left its site" in n2.log_path.read_bytes()
    assert b"partitions handed over" in n4.log_path.read_bytes()
    # Handovers are counted; nothing is left migrating or lagging.
    info = redis.Redis(port=n1.port).info("replication")
    assert info["partitions_migrating"] == 0
    handovers = sum(redis.Redis(port=s.port).info("replication")["handovers"] for s in (n1, n3))
    assert handovers > 0
    from helpers_net import http_get
    metrics = http_get("127.0.0.1", n3.admin_port, "/metrics")[2].decode()
    assert re.search(r"^deltagrid_partitions_migrating 0", metrics, re.M), metrics
    assert re.search(r'^deltagrid_replication_lag_changes\{node="n1"\} 0', metrics, re.M), metrics


def test_a_stranger_without_a_join_is_refused(seeds):
    nodes, cluster_ports = seeds
    import socket
    # A well-formed hello from an unknown address, then no join frame.
    frame = wire_hello("x9", "127.0.0.1:1", "127.0.0.1:2")
    ping = wire_frame(2)
    with socket.create_connection(("127.0.0.1", cluster_ports[0]), timeout=10) as sock:
        sock.sendall(frame + ping)
        assert sock.recv(100) == b""  # closed without an answer
    wait_until(lambda: b"not a member of this site and did not ask to join" in nodes[0].log_path.read_bytes(),
               timeout=5, message="refusal logged")


def test_a_site_with_a_secret_admits_only_nodes_that_know_it(tmp_path):
    import socket
    cluster_ports = [free_port() for _ in range(3)]
    nodes = [start(tmp_path, f"n{i + 1}", cluster_ports, cluster_ports[i], secret="s3cret") for i in range(3)]
    try:
        wait_until(lambda: settled(nodes[0], ["n1", "n2", "n3"]), timeout=30, message="site formed with a secret")
        rc = RedisCluster(host="127.0.0.1", port=nodes[0].port, socket_timeout=20)
        for i in range(64):
            rc.set(f"k{i}", i)
        assert [rc.get(f"k{i}") for i in range(64)] == [str(i).encode() for i in range(64)]

        # A node with another secret cannot join: it says why and exits.
        cfg_path = tmp_path / "n4.toml"
        cfg_path.write_text(node_config("n4", cluster_ports, secret="guess")[1])
        out = subprocess.run([binary(), "server", "--config", str(cfg_path)],
                             capture_output=True, text=True, timeout=60)
        assert out.returncode != 0
        assert "authentication failed" in out.stdout + out.stderr, out.stdout + out.stderr
        wait_until(lambda: b"refused connection on cluster_listen: authentication failed"
                   in nodes[0].log_path.read_bytes(), timeout=5, message="refusal logged at the seed")

        # A stranger that speaks the protocol but not the secret gets the
        # challenge and the refusal, nothing else.
        hello = wire_hello("x9", "127.0.0.1:1", "127.0.0.1:2")
        before = nodes[1].log_path.read_bytes().count(b"does not match site.secret")
        with socket.create_connection(("127.0.0.1", cluster_ports[1]), timeout=10) as sock:
            challenge = b""
            while len(challenge) < 20:
                challenge += sock.recv(20 - len(challenge))
            assert challenge[:4] == b"DGAU"
            sock.sendall(hello.ljust(48, b"\0"))
            rest = b""
            while chunk := sock.recv(100):
                rest += chunk
            assert rest == b"DGNO: proof of site.secret wrong"  # then closed
        wait_until(lambda: nodes[1].log_path.read_bytes().count(b"does not match site.secret") == before + 1,
                   timeout=5, message="stranger refused and logged")

        rows, _ = status(nodes[0])
        assert set(rows) == {"n1", "n2", "n3"}
        assert rc.get("k7") == b"7"
    finally:
        for n in nodes:
            n.stop()
