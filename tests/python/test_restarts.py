"""Restarts are not departures. SIGTERM (or SIGINT) stops a node: it stops
taking clients, lets its replicas take its partitions if the site can,
flushes what must be flushed and exits; started again on the same data_dir
it rejoins as the same member and catches up. Only `deltagrid cluster leave`
takes a node out of its site. A member that never connects (a phantom, e.g.
left by a join whose node never came) is marked dead after the failure
detection time like any other, and a node's identity cannot be taken over
by a second process claiming it: refused and logged.

Some tests speak the node-to-node protocol from Python (helpers_wire.py,
after crates/cluster/src/wire.rs: frames, Hello, the join and its
answer). A site without `site.secret` has no authentication step
(crates/cluster/src/auth.rs `accept`: nothing is said without a secret),
which test_a_raw_hello_claiming_a_live_members_address_is_refused checks.
"""
import re
import signal
import socket
import struct
import subprocess
import time

import pytest
from redis.cluster import RedisCluster
from redis.crc import key_slot

from conftest import binary, free_port
from helpers import wait_until
from helpers_net import http_json
from test_cluster import (assert_no_acknowledged_write_lost, ledger_writers, restart, site_config,
                          started_site)
from helpers_wire import KIND_HELLO, KIND_JOINED, KIND_REFUSED, decode_join_answer, wire_hello, wire_join

pytestmark = pytest.mark.deltagrid_only

PARTITIONS = 271  # started_site's default

def read_frames_until_closed(sock, timeout):
    """Every frame the peer sends until it closes the connection:
    (closed within `timeout`, [(kind, payload)], trailing partial bytes)."""
    deadline = time.monotonic() + timeout
    data, closed = b"", False
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            break
        sock.settimeout(left)
        try:
            chunk = sock.recv(65536)
        except socket.timeout:
            break
        except (ConnectionResetError, BrokenPipeError):
            closed = True
            break
        if not chunk:
            closed = True
            break
        data += chunk
    frames = []
    while len(data) >= 5:
        (ln,) = struct.unpack_from("<I", data)
        if len(data) < 4 + ln:
            break
        frames.append((data[4], data[5:4 + ln]))
        data = data[4 + ln:]
    return closed, frames, data


def read_one_frame(sock, timeout):
    """The next complete frame (kind, payload); fails on close or timeout."""
    deadline = time.monotonic() + timeout
    data = b""
    while len(data) < 4 or len(data) < 4 + struct.unpack_from("<I", data)[0]:
        left = deadline - time.monotonic()
        if left <= 0:
            pytest.fail(f"no complete frame within {timeout}s (got {data!r})")
        sock.settimeout(left)
        try:
            chunk = sock.recv(65536)
        except socket.timeout:
            continue
        if not chunk:
            pytest.fail(f"connection closed before a complete frame (got {data!r})")
        data += chunk
    (ln,) = struct.unpack_from("<I", data)
    return data[4], data[5:4 + ln]


# -- site views from /status -------------------------------------------------

def site_view(node):
    """The `cluster` object of the node's /status (crates/server/src/admin.rs)."""
    return http_json("127.0.0.1", node.admin_port, "/status")["cluster"]


def roster(node):
    """[(node_id, cluster_addr)] of the members, in member id order (the
    order /status lists them in: Cluster::status walks member indexes)."""
    return [(m["node_id"], m["cluster_addr"]) for m in site_view(node)["members"]]


def name_of(node):
    return node.restart_args[1].split('id = "')[1].split('"')[0]


def what_is_unhealthy(nodes, expected_roster, backups=1):
    """None when every node's /status lists exactly `expected_roster` (same
    names, addresses and ids), every member active and connected, holding
    some partitions, every partition's backups in sync; else what is not."""
    for node in nodes:
        me = name_of(node)
        if node.proc.poll() is not None:
            pytest.fail(f"{me} exited with {node.proc.returncode}: {log_tail(node.log_path.read_text())}")
        try:
            site = site_view(node)
        except (OSError, ValueError) as e:
            return f"{me}: /status unavailable: {e!r}"
        members = site["members"]
        got = [(m["node_id"], m["cluster_addr"]) for m in members]
        if got != expected_roster:
            return f"{me} lists members {got}, want {expected_roster}"
        mine = [m["node_id"] for m in members if m["myself"]]
        if mine != [me]:
            return f"{me} says it is {mine}"
        for m in members:
            if m["state"] != "active" or not m["connected"]:
                return f"{me} sees {m['node_id']} {m['state']}, connected: {m['connected']}"
            if m["primaries"] + m["backups"] == 0:
                return f"{me} sees {m['node_id']} holding no partition"
        in_sync = sum(m["in_sync"] for m in members)
        assigned = sum(m["backups"] for m in members)
        if in_sync != PARTITIONS * backups or assigned != in_sync:
            return f"{me}: {in_sync} in-sync backups of {assigned} assigned, want {PARTITIONS * backups}"
    return None


def wait_for(check, timeout, what):
    """Polls `check` (None when satisfied, else why not) for up to `timeout`
    seconds; fails with its last answer."""
    deadline = time.monotonic() + timeout
    while True:
        why = check()
        if why is None:
            return
        if time.monotonic() >= deadline:
            pytest.fail(f"timed out after {timeout}s waiting for {what}: {why}")
        time.sleep(0.2)


def holds_for(check, seconds, what):
    """`check` (None when fine, else what is wrong) stays satisfied for
    `seconds`, polled all along."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        why = check()
        if why is not None:
            pytest.fail(f"{what}: {why}")
        time.sleep(0.2)


def one_key_per_partition():
    keys = {}
    for i in range(1_000_000):
        keys.setdefault(key_slot(f"p{i}".encode()) * PARTITIONS // 16384, f"p{i}")
        if len(keys) == PARTITIONS:
            return list(keys.values())
    raise AssertionError("not every partition got a key")


def every_partition_takes_a_write(port, timeout):
    """Writes a key of every partition through a cluster client until each
    was acknowledged once (a partition left stuck fails the test)."""
    pending = set(one_key_per_partition())
    rc = RedisCluster(host="127.0.0.1", port=port, decode_responses=True, socket_timeout=8)

    def write_each():
        for k in list(pending):
            try:
                if rc.set(k, "x"):
                    pending.discard(k)
            except Exception:  # a partition still moving: next round
                pass
        return None if not pending else f"{len(pending)} partitions refuse writes, e.g. {sorted(pending)[:5]}"
    try:
        wait_for(write_each, timeout, "every partition to take a write")
    finally:
        rc.close()


def restart_or_fail(node, why):
    """test_cluster.restart, failing with the end of the node's log (not
    all of it) when the process does not come up."""
    try:
        return restart(node)
    except RuntimeError as e:
        error = str(e)
    pytest.fail(f"{name_of(node)} did not start again on its data_dir after {why}: {log_tail(error)}")


def log_tail(text, lines=4):
    """The last lines of a node's log, without colour codes."""
    return "\n".join(re.sub(r"\x1b\[[0-9;]*m", "", text).splitlines()[-lines:])


def log_lines_since(node, offset):
    return node.log_path.read_bytes()[offset:].decode(errors="replace").splitlines()


# -- tests -------------------------------------------------------------------

def test_a_rolling_sigterm_restart_keeps_every_acknowledged_write_and_every_member(tmp_path):
    """Each node in turn gets SIGTERM, exits by itself (status 0), is
    started again on its data_dir and ports, and the site is whole again
    (same three members, active, connected, every backup in sync) before
    the next one. Writers run throughout: writes go on after every
    restart and every acknowledged one is there at the end."""
    with started_site(tmp_path) as nodes:
        expected = roster(nodes[0])
        assert [n for n, _ in expected] == ["n1", "n2", "n3"], expected
        wait_for(lambda: what_is_unhealthy(nodes, expected), 30, "the site to settle")
        with ledger_writers([n.port for n in nodes], 3, "roll") as ledgers:
            written = lambda: sum(len(l) for l in ledgers)
            wait_until(lambda: written() > 300, timeout=20, message="writers got going")
            for i in range(len(nodes)):
                old, name = nodes[i], name_of(nodes[i])
                old.proc.send_signal(signal.SIGTERM)
                try:
                    code = old.proc.wait(timeout=40)
                except subprocess.TimeoutExpired:
                    pytest.fail(f"{name} did not exit within 40 s of SIGTERM")
                assert code == 0, f"{name} exited with {code} after SIGTERM"
                old.stop()  # closes its log file
                nodes[i] = restart_or_fail(old, "SIGTERM")
                wait_for(lambda: what_is_unhealthy(nodes, expected), 45,
                         f"the site to be whole again after {name} was restarted (SIGTERM)")
                at = written()
                wait_until(lambda: written() > at + 200, timeout=30,
                           message=f"writes acknowledged after {name} was restarted")
        assert_no_acknowledged_write_lost(ledgers, nodes[0].port)
        assert what_is_unhealthy(nodes, expected) is None


def test_a_node_killed_with_9_and_restarted_on_its_data_dir_rejoins_as_the_same_member(tmp_path):
    """kill -9, then the same process started again on the same data_dir:
    the site still has the same three members (same name, address and
    member id; no fourth one), all active, and the restarted node holds
    partitions again; no acknowledged write lost."""
    with started_site(tmp_path) as nodes:
        expected = roster(nodes[0])
        wait_for(lambda: what_is_unhealthy(nodes, expected), 30, "the site to settle")
        with ledger_writers([nodes[0].port, nodes[2].port], 2, "k") as ledgers:
            written = lambda: sum(len(l) for l in ledgers)
            wait_until(lambda: written() > 300, timeout=20, message="writers got going")
            victim = nodes[1]
            victim.proc.kill()
            victim.proc.wait()
            victim.stop()
            nodes[1] = restart_or_fail(victim, "kill -9")
            wait_for(lambda: what_is_unhealthy(nodes, expected), 60,
                     "the restarted n2 to be back as the same member, holding partitions")
            at = written()
            wait_until(lambda: written() > at + 200, timeout=30, message="writes after the restart")
        assert_no_acknowledged_write_lost(ledgers, nodes[0].port)
        for node in nodes:
            assert roster(node) == expected
        mine = [m for m in site_view(nodes[1])["members"] if m["myself"]]
        assert [(m["node_id"], m["cluster_addr"]) for m in mine] == [expected[1]]
        assert mine[0]["primaries"] + mine[0]["backups"] > 0


def test_a_second_process_claiming_a_live_nodes_identity_is_refused(tmp_path):
    """A fourth process configured as `node.id = "n2"` (n2 is a live member)
    on its own ports, not a seed, asks the seeds to join: refused (it exits
    non-zero or keeps being refused, and says so). The site keeps its three
    members and n2 its place."""
    with started_site(tmp_path) as nodes:
        expected = roster(nodes[0])
        wait_for(lambda: what_is_unhealthy(nodes, expected), 30, "the site to settle")
        seed_ports = [n.cluster_port for n in nodes]
        port, cport, admin = free_port(), free_port(), free_port()
        cfg = site_config(1, {1: port}, {1: cport}, seed_ports=seed_ports)
        d = tmp_path / "impostor"
        d.mkdir()
        (d / "deltagrid.toml").write_text(cfg)
        log_path = d / "server.log"
        with open(log_path, "wb") as log:
            proc = subprocess.Popen([binary(), "server", "--config", str(d / "deltagrid.toml"),
                                     "--admin-listen", f"127.0.0.1:{admin}", "--data-dir", str(d / "data")],
                                    stdout=log, stderr=subprocess.STDOUT)
        try:
            def outcome():
                if proc.poll() is not None:
                    return f"exited with {proc.returncode}"
                if b"refused" in log_path.read_bytes():
                    return "refused"
                if len(roster(nodes[0])) != len(expected):
                    return "admitted"
                return None
            result = wait_until(outcome, timeout=30, interval=0.1,
                                message="the impostor's join to be refused or admitted")
            members = roster(nodes[0])
            assert members == expected, \
                f"a second process named n2 was admitted ({result}): members {members}, want {expected}"
            assert result != "exited with 0", "the impostor exited 0"
            assert b"refused" in log_path.read_bytes(), \
                f"the impostor does not say it was refused:\n{log_path.read_text()[-3000:]}"
            # Nothing changes while it keeps asking: still three members,
            # n2 in its place, active and connected everywhere.
            holds_for(lambda: what_is_unhealthy(nodes, expected), 4, "the site changed after the impostor's join")
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
        every_partition_takes_a_write(nodes[0].port, 30)


def test_a_raw_hello_claiming_a_live_members_address_is_refused(tmp_path):
    """A connection to n1's cluster_listen says hello as n2 (its name, its
    cluster address, its client address) while n2 is alive and connected:
    n1 refuses it (closes it without a hello back, or answers a refusal)
    and logs that, naming the claimed address; the real n2 stays connected
    and active, and the site keeps taking writes."""
    with started_site(tmp_path) as nodes:
        n1, n2, _ = nodes
        expected = roster(n1)
        wait_for(lambda: what_is_unhealthy(nodes, expected), 30, "the site to settle")
        claimed = f"127.0.0.1:{n2.cluster_port}"
        assert expected[1] == ("n2", claimed), expected
        offset = len(n1.log_path.read_bytes())
        with socket.create_connection(("127.0.0.1", n1.cluster_port), timeout=10) as sock:
            # Without site.secret the acceptor says nothing before our hello
            # (auth::accept): no challenge to answer.
            closed, frames, rest = read_frames_until_closed(sock, 0.5)
            assert not closed and not frames and rest == b"", (closed, frames, rest)
            sock.sendall(wire_hello("n2", claimed, f"127.0.0.1:{n2.port}"))
            closed, frames, rest = read_frames_until_closed(sock, 10)
        kinds = [k for k, _ in frames]
        assert KIND_HELLO not in kinds, \
            f"n1 answered a hello claiming live n2's address with its own hello: {frames[:2]!r}"
        assert closed, f"n1 kept the impostor's connection open for 10 s (frames {frames!r})"
        assert set(kinds) <= {KIND_REFUSED}, frames
        wait_until(lambda: any("refused" in l and claimed in l for l in log_lines_since(n1, offset)),
                   timeout=5, message=f"a log line at n1 with 'refused' and {claimed}")
        # The real n2 was never disconnected nor declared dead: watched for
        # longer than failure detection takes (1.5 s).
        holds_for(lambda: what_is_unhealthy(nodes, expected), 4, "the real n2 suffered from the impostor")
        every_partition_takes_a_write(n1.port, 30)


def test_a_join_under_another_name_at_a_live_members_address_is_refused(tmp_path):
    """A hello and a join frame claiming live n2's cluster address under
    another name and with another client address (an attacker's port, to
    take n2's slots' clients and their AUTH): refused, n2 keeps its name and
    its client address in every node's view, and stays active."""
    with started_site(tmp_path) as nodes:
        n1, n2, _ = nodes
        expected = roster(n1)
        wait_for(lambda: what_is_unhealthy(nodes, expected), 30, "the site to settle")
        claimed = f"127.0.0.1:{n2.cluster_port}"
        trap = f"127.0.0.1:{free_port()}"
        with socket.create_connection(("127.0.0.1", n1.cluster_port), timeout=10) as sock:
            sock.sendall(wire_hello("attacker", claimed, trap) + wire_join())
            closed, frames, _ = read_frames_until_closed(sock, 10)
        assert KIND_JOINED not in [k for k, _ in frames], frames
        for node in nodes:
            assert roster(node) == expected
            view = [m for m in site_view(node)["members"] if m["cluster_addr"] == claimed]
            assert [m["client_addr"] for m in view] == [f"127.0.0.1:{n2.port}"], view
        holds_for(lambda: what_is_unhealthy(nodes, expected), 3, "the site changed after the forged join")


def test_a_phantom_member_that_never_connects_is_marked_dead(tmp_path):
    """A join committed for a node that then never connects: from Python, a
    hello for an address where nothing listens, the join frame, its answer
    (the new member's id), and silence. The phantom is listed and marked
    dead within failure detection plus slack, and the site keeps taking
    writes on every partition, losing none that it acknowledged."""
    with started_site(tmp_path) as nodes:
        n1 = nodes[0]
        expected = roster(n1)
        wait_for(lambda: what_is_unhealthy(nodes, expected), 30, "the site to settle")
        phantom_addr = f"127.0.0.1:{free_port()}"  # nothing ever listens there
        with ledger_writers([n.port for n in nodes], 2, "ph") as ledgers:
            written = lambda: sum(len(l) for l in ledgers)
            wait_until(lambda: written() > 200, timeout=20, message="writers got going")
            with socket.create_connection(("127.0.0.1", n1.cluster_port), timeout=10) as sock:
                sock.sendall(wire_hello("ph1", phantom_addr, f"127.0.0.1:{free_port()}") + wire_join())
                kind, payload = read_one_frame(sock, 20)
            assert kind == KIND_JOINED, f"the join was not answered as joined: kind {kind}, {payload!r}"
            joined_at = time.monotonic()
            new_id, members = decode_join_answer(payload)
            real_ids = [i for i, a in members if a != phantom_addr]
            assert len(real_ids) == 3 and new_id not in real_ids and (new_id, phantom_addr) in members, \
                (new_id, members)

            def phantom_state():
                rows = [m for m in site_view(n1)["members"] if m["cluster_addr"] == phantom_addr]
                return rows[0]["state"] if rows else "not listed"
            wait_until(lambda: phantom_state() != "not listed", timeout=5, message="the phantom listed")
            wait_for(lambda: None if (s := phantom_state()) == "dead" else f"it is {s}", 15,
                     "the phantom member (it never connected) to be marked dead")
            assert time.monotonic() - joined_at < 15, "marked dead, but more than 15 s after its join"
            at = written()
            wait_until(lambda: written() > at + 300, timeout=30, message="writes after the phantom was marked dead")
        every_partition_takes_a_write(n1.port, 30)
        assert_no_acknowledged_write_lost(ledgers, n1.port)
        # The real members are untouched.
        real = [m for m in site_view(n1)["members"] if m["cluster_addr"] != phantom_addr]
        assert [(m["node_id"], m["cluster_addr"]) for m in real] == expected
        assert all(m["state"] == "active" and m["connected"] for m in real), real
