"""Helpers for the WAN replication tests (test_wan.py): sites of one or
more real nodes on loopback with a [wan] section, the admin endpoints of
the publishers and receivers, a digest of a site's whole contents, RSS of a
process, raw WAN protocol frames for the bad-input tests, and a remote
site played by the test (FakeSite) where a real one cannot be made to
answer at a chosen moment.
"""
import hashlib
import hmac
import socket
import struct
import threading
import time
import urllib.error
import urllib.request

import lz4.block
import pytest
import redis
from prometheus_client.parser import text_string_to_metric_families
from redis.crc import key_slot

from conftest import Server, free_port
from helpers import wait_until
from helpers_net import RespConn, http_get, http_json

PARTITIONS = 271  # the default site.partitions


# -- sites -----------------------------------------------------------------

def fresh_port():
    """See conftest.free_port: never a port handed out before in this run."""
    return free_port()


class WanSite:
    """One site: `size` nodes (a single-node site has no cluster section).
    Ports are chosen up front so peers can list this site's WAN endpoints
    before it runs and a node restarts on the same ports."""

    def __init__(self, tmp_path, site_id, name, size=1, memory_budget=None, disk_budget=None, backups=1,
                 secret=None, partitions=None, log_memory=None, tombstone_memory=None, node_settings=(),
                 wan_settings=()):
        self.tmp_path = tmp_path
        self.node_settings = list(node_settings)  # more lines of [node], e.g. 'maxmemory = "32MiB"'
        self.wan_settings = list(wan_settings)  # more lines of [wan], e.g. 'tls = true'
        self.tombstone_memory = tombstone_memory
        self.partitions = partitions
        self.log_memory = log_memory
        self.secret = secret
        self.id, self.name, self.size = site_id, name, size
        self.memory_budget, self.disk_budget, self.backups = memory_budget, disk_budget, backups
        self.ports = [fresh_port() for _ in range(size)]
        self.cluster_ports = [fresh_port() for _ in range(size)]
        self.wan_ports = [fresh_port() for _ in range(size)]
        self.targets = []  # (WanSite, delta, ack)
        self.via = {}  # target site name -> endpoints to use instead of its own (a proxy)
        self.nodes = [None] * size
        self.incarnation = [0] * size
        self.retired = []  # stopped Server objects (logs kept)

    @property
    def endpoints(self):
        return [f"127.0.0.1:{p}" for p in self.wan_ports]

    def target(self, other, delta=True, ack="pipelined"):
        self.targets.append((other, delta, ack))
        return self

    def config(self, i):
        lines = [
            "[node]",
            f'id = "{self.name}-n{i + 1}"',
            f'listen = "127.0.0.1:{self.ports[i]}"',
        ]
        if self.size > 1:
            lines.append(f'cluster_listen = "127.0.0.1:{self.cluster_ports[i]}"')
        if self.log_memory is not None:
            lines.append(f'log_memory = "{self.log_memory}"')
        lines += self.node_settings
        lines.append(f'aclfile = "{backup_users(self.tmp_path)}"')
        lines += ["[site]", f"id = {self.id}", f'name = "{self.name}"']
        if self.partitions:
            lines.append(f"partitions = {self.partitions}")
        if self.size > 1:
            seeds = ", ".join(f'"127.0.0.1:{p}"' for p in self.cluster_ports)
            lines += [f"seeds = [{seeds}]", f"backups = {self.backups}"]
        lines += ["[wan]", f'listen = "127.0.0.1:{self.wan_ports[i]}"']
        if self.memory_budget:
            lines.append(f'memory_budget = "{self.memory_budget}"')
        if self.disk_budget:
            lines.append(f'disk_budget = "{self.disk_budget}"')
        if self.secret:
            lines.append(f'secret = "{self.secret}"')
        if self.tombstone_memory:
            lines.append(f'tombstone_memory = "{self.tombstone_memory}"')
        lines += self.wan_settings
        # Backups (test_backup, test_encodings_roundtrip) go under the test's directory.
        lines += ["[backup]", f'allowed_urls = ["file://{self.tmp_path}"]']
        for other, delta, ack in self.targets:
            eps = ", ".join(f'"{e}"' for e in self.via.get(other.name, other.endpoints))
            lines += ["[[wan.targets]]", f'name = "{other.name}"', f"endpoints = [{eps}]",
                      f"delta = {'true' if delta else 'false'}", f'ack = "{ack}"']
        return "\n".join(lines) + "\n"

    def start_node(self, i, same_dir=False):
        """Node i in a new data directory, or (`same_dir`) in its last one,
        as a restarted process finds it."""
        if same_dir:
            d = self.tmp_path / f"{self.name}-n{i + 1}-{self.incarnation[i] - 1}"
            self.nodes[i] = Server(d, config=self.config(i), port=self.ports[i])
            return self.nodes[i]
        d = self.tmp_path / f"{self.name}-n{i + 1}-{self.incarnation[i]}"
        self.incarnation[i] += 1
        d.mkdir()
        self.nodes[i] = Server(d, config=self.config(i), port=self.ports[i])
        return self.nodes[i]

    def start(self):
        for i in range(self.size):
            self.start_node(i)
        if self.size > 1:
            for s in self.nodes:
                wait_until(lambda s=s: b"cluster_state:ok" in cluster_info(s), timeout=20,
                           message=f"site {self.name} did not form")
        return self

    def stop_node(self, i):
        if self.nodes[i] is not None:
            self.nodes[i].stop()
            self.retired.append(self.nodes[i])
            self.nodes[i] = None

    def kill_node(self, i):
        """kill -9."""
        s = self.nodes[i]
        s.proc.kill()
        s.proc.wait()
        s.stop()
        self.retired.append(s)
        self.nodes[i] = None

    def stop(self):
        for i in range(self.size):
            self.stop_node(i)

    @property
    def live(self):
        return [s for s in self.nodes if s is not None]

    def logs(self):
        return b"".join(s.log_path.read_bytes() for s in self.live + self.retired)


def link_all(sites, **kw):
    """Full mesh: every site targets every other one."""
    for a in sites:
        for b in sites:
            if a is not b:
                a.target(b, **kw)


def wait_failed_over(port, victim, timeout=30, interval=0.1):
    """Until the site answering on `port` has every slot served by a node
    other than the one that listened on `victim` (its partitions have new
    primaries)."""
    def failed_over():
        try:
            slots = redis.Redis(port=port).execute_command("CLUSTER", "SLOTS")
        except redis.RedisError:
            return False
        covered = sum(int(s[1]) - int(s[0]) + 1 for s in slots)
        return covered == 16384 and all(int(s[2][1]) != victim for s in slots)
    wait_until(failed_over, timeout=timeout, interval=interval,
               message="the killed node's partitions have new primaries")


def cluster_info(s):
    with RespConn.to(s) as c:
        return bytes(c.call("CLUSTER", "INFO"))


def client(s, **kw):
    kw.setdefault("socket_timeout", 20)
    return redis.Redis(host="127.0.0.1", port=s.port, **kw)


# -- admin -------------------------------------------------------------------

def wan_status(node):
    return http_json("127.0.0.1", node.admin_port, "/wan/status")


def target_status(node, name):
    return next(t for t in wan_status(node)["targets"] if t["name"] == name)


def source_status(node, name):
    """The receiver's counters for source site `name` (zeros if none yet)."""
    for s in wan_status(node)["sources"]:
        if s["site_name"] == name:
            return s
    return {"events_received": 0, "applied": 0, "duplicates": 0, "conflicts_lost": 0,
            "need_full": 0, "refused": 0, "bytes_received": 0}


def wan_control(node, action, target):
    req = urllib.request.Request(f"http://127.0.0.1:{node.admin_port}/wan/{action}?target={target}",
                                 data=b"", method="POST")
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            status, body = r.status, r.read()
    except urllib.error.HTTPError as e:
        status, body = e.code, e.read()
    assert status == 200, (action, target, status, body)
    return body


def wait_state(node, target, state, timeout=10):
    wait_until(lambda: target_status(node, target)["state"] == state, timeout=timeout, interval=0.05,
               message=f"{target} publisher state {state!r}")


def metric(node, name, **labels):
    """Sum of the samples of metric `name` (full sample name, e.g.
    deltagrid_wan_bytes_sent_total) whose labels include `labels`."""
    text = http_get("127.0.0.1", node.admin_port, "/metrics")[2].decode()
    total, seen = 0.0, False
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
                total += s.value
                seen = True
    assert seen, f"no sample {name}{labels} in /metrics"
    return total


def rss_bytes(server, field="VmRSS"):
    """The server's resident set (VmHWM: its peak since it started or since
    `reset_peak_rss`)."""
    return pid_rss(server.proc.pid, field)


def pid_rss(pid, field="VmRSS"):
    """A process's resident set (or another /proc status field), bytes."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(f"{field}:"):
                return int(line.split()[1]) * 1024
    raise AssertionError(f"no {field}")


@pytest.fixture
def sites(tmp_path):
    """make(site_id, name, size=1, **options) -> WanSite (not started);
    every site made is stopped at the end. (A fixture: a test module
    imports it.)"""
    made = []

    def make(site_id, name, size=1, **kw):
        s = WanSite(tmp_path, site_id, name, size, **kw)
        made.append(s)
        return s

    yield make
    for s in made:
        s.stop()


# `deltagrid backup` logs in as a user allowed the internal BACKUPJOB
# (environment of the CLI).
BACKUP_ENV = {"DELTAGRID_USER": "backup", "DELTAGRID_PASSWORD": "backup"}


def backup_users(directory):
    """An ACL file with the default user and `backup` (password `backup`,
    +@internal), as an operator would give `deltagrid backup`."""
    path = directory / "backup-users.acl"
    if not path.exists():
        path.write_text("user default on nopass ~* &* +@all\n"
                        "user backup on >backup ~* &* +@all +@internal\n")
    return path


def reset_peak_rss(server):
    """Makes the server's peak resident set its current one (Linux >= 4.0)."""
    with open(f"/proc/{server.proc.pid}/clear_refs", "w") as f:
        f.write("5")


# -- contents ----------------------------------------------------------------

def slot_copies(nodes):
    """slot -> (primary, [backups]) as Servers of `nodes` (a site's live
    nodes), per CLUSTER SLOTS; a copy on none of them is None / left out."""
    with RespConn.to(nodes[0]) as c:
        ranges = c.call("CLUSTER", "SLOTS")
    by_port = {s.port: s for s in nodes}
    table = {}
    for first, last, primary, *backups in ranges:
        copies = (by_port.get(primary[1]), [by_port[b[1]] for b in backups if b[1] in by_port])
        for slot in range(first, last + 1):
            table[slot] = copies
    return table


def _primary_router(nodes):
    """key -> node that is primary for it (single node: that node)."""
    if len(nodes) == 1:
        return lambda key: nodes[0]
    table = slot_copies(nodes)

    def route(key):
        node = table.get(key_slot(key), (None, []))[0]
        if node is None:
            raise redis.ConnectionError(f"slot {key_slot(key)} has no live primary")
        return node
    return route


def _pipelined(r, cmds, chunk=500):
    out = []
    for i in range(0, len(cmds), chunk):
        p = r.pipeline(transaction=False)
        for c in cmds[i:i + chunk]:
            p.execute_command(*c)
        out += p.execute(raise_on_error=True)
    return out


def digest(site_or_nodes):
    """{key: (type, value, ttl in whole seconds or -1)} of a whole site
    (a WanSite, a Server, or a list of live nodes of one site). Keys come
    from SCAN on every node; values are read from each key's primary."""
    if isinstance(site_or_nodes, WanSite):
        nodes = site_or_nodes.live
    elif isinstance(site_or_nodes, Server):
        nodes = [site_or_nodes]
    else:
        nodes = list(site_or_nodes)
    keys = set()
    for n in nodes:
        r = client(n)
        cursor = 0
        while True:
            cursor, batch = r.scan(cursor, count=1000)
            keys.update(batch)
            if int(cursor) == 0:
                break
    route = _primary_router(nodes)
    groups = {}
    for k in keys:
        groups.setdefault(route(k).port, (route(k), []))[1].append(k)
    out = {}
    for node, ks in groups.values():
        r = client(node)
        meta = _pipelined(r, [c for k in ks for c in (("TYPE", k), ("PTTL", k))])
        kinds = {}
        for k, t, ttl in zip(ks, meta[0::2], meta[1::2]):
            t = t.decode() if isinstance(t, bytes) else t
            if t != "none":
                kinds[k] = (t, ttl)
        read_of = {"hash": ("HGETALL",), "set": ("SMEMBERS",),
                   "zset": ("ZRANGE", 0, -1, "WITHSCORES"), "list": ("LRANGE", 0, -1)}
        reads = [(read_of.get(t, ("GET",))[0], k, *read_of.get(t, ("GET",))[1:])
                 for k, (t, _) in kinds.items()]
        values = _pipelined(r, reads)
        for (k, (t, ttl)), v in zip(kinds.items(), values):
            if v is None or v == {} or v == set() or v == []:
                continue  # gone between the reads
            if t == "hash":
                v = tuple(sorted(v.items()))
            elif t == "set":
                v = tuple(sorted(v))
            elif t == "list":
                v = tuple(v)
            elif t == "zset":
                # a flat [member, score, ...] reply (raw command, RESP2)
                if v and not isinstance(v[0], (tuple, list)):
                    v = list(zip(v[0::2], (float(x) for x in v[1::2])))
                v = tuple(sorted((m, float(sc)) for m, sc in v))
            out[k] = (t, v, -1 if ttl < 0 else round(ttl / 1000))
    return out


def digest_diff(a, b, ttl_slack=1):
    """Keys on which two digests differ (TTLs within `ttl_slack` s are equal)."""
    diff = []
    for k in set(a) | set(b):
        x, y = a.get(k), b.get(k)
        if x is None or y is None or x[:2] != y[:2]:
            diff.append(k)
        elif (x[2] < 0) != (y[2] < 0) or abs(x[2] - y[2]) > ttl_slack:
            diff.append(k)
    return sorted(diff)


def describe_diff(a, b, diff, n=3):
    def short(v):
        r = repr(v)
        return r if len(r) < 120 else r[:117] + "..."
    return "; ".join(f"{k!r}: {short(a.get(k))} vs {short(b.get(k))}" for k in diff[:n])


def wait_converged(sites, timeout=30, ttl_slack=1, min_keys=0):
    """Polls until every site's digest equals the first's; returns it."""
    deadline = time.monotonic() + timeout
    last = "no digest taken"
    while True:
        try:
            ds = [digest(s) for s in sites]
            diffs = [digest_diff(ds[0], d, ttl_slack) for d in ds[1:]]
            if not any(diffs) and len(ds[0]) >= min_keys:
                return ds[0]
            last = "; ".join(f"{len(d)} keys differ between {sites[0].name} and {s.name} "
                             f"({len(ds[0])} vs {len(x)} keys), e.g. {describe_diff(ds[0], x, d)}"
                             for d, s, x in zip(diffs, sites[1:], ds[1:]) if d) or f"{len(ds[0])} keys only"
        except (redis.RedisError, OSError) as e:
            last = f"reading failed: {e!r}"
        if time.monotonic() >= deadline:
            pytest.fail(f"sites did not converge in {timeout}s: {last}")
        time.sleep(0.1)


def wait_drained(site, target, timeout=30):
    """Until every node's publisher to `target` has had all it queued applied."""
    def drained():
        for n in site.live:
            t = target_status(n, target)
            if t["events_distributed"] < t["events_queued"] or t["queue_events"]:
                return False
        return True
    wait_until(drained, timeout=timeout, interval=0.05, message=f"{site.name} -> {target} drained")


def write_pipelined(r, cmds, chunk=200):
    """Runs commands in pipelines; returns the replies (errors raise)."""
    return _pipelined(r, cmds, chunk)


# -- raw WAN protocol ----------------------------------------------------------

def frame(kind, body):
    return struct.pack("<IB", 1 + len(body), kind) + body


def wstr(s):
    if isinstance(s, str):
        s = s.encode()
    return struct.pack("<H", len(s)) + s


def hello(site_id, site_name, version=3, magic=b"DGWN", partitions=PARTITIONS, node_id="intruder",
          incarnation=7, nonce=b"N" * 16):
    return frame(1, magic + struct.pack("<HH", version, site_id) + wstr(site_name)
                 + struct.pack("<H", partitions) + wstr(node_id) + struct.pack("<Q", incarnation) + nonce)


def proof_frame(proof):
    return frame(8, proof)


def welcome_challenge(body):
    """A welcome frame body's challenge: (nonce, proof) or None."""
    n = struct.unpack_from("<H", body, 2)[0]
    at = 4 + n
    pairs = struct.unpack_from("<I", body, at)[0]
    at += 4 + 10 * pairs + 8
    if body[at] == 0:
        return None
    return body[at + 1:at + 17], body[at + 17:at + 49]


def wan_proof(secret, role, publisher_nonce, receiver_nonce):
    """HMAC-SHA256 proof of wan.secret, as crates/wan/src/auth.rs computes it."""
    label = b"deltagrid wan receiver\0" if role == "receiver" else b"deltagrid wan publisher"
    return hmac.new(secret.encode(), label + publisher_nonce + receiver_nonce, hashlib.sha256).digest()


def batch(batch_id, body, flags=0, raw_len=None):
    return frame(4, struct.pack("<QBI", batch_id, flags, len(body) if raw_len is None else raw_len) + body)


def varint(n):
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def now_hlc(ahead_ms=0):
    """An HLC of this machine's clock `ahead_ms` from now (milliseconds in
    the high 48 bits)."""
    return (int(time.time() * 1000) + ahead_ms) << 16


def delete_change(key, hlc, site):
    """A keyspace codec Change: key, version (hlc, site), kind Delete."""
    return varint(len(key)) + key + varint(hlc) + varint(site) + b"\x02"


def partition_of(key, partitions=PARTITIONS):
    return key_slot(key) * partitions // 16384


def entry(partition, seq, change, length=None):
    """A batch body entry: partition u16 LE | seq varint | len varint | change."""
    return (struct.pack("<H", partition) + varint(seq) + varint(len(change) if length is None else length)
            + change)


def read_frames(sock, timeout=5.0):
    """Frames the peer sends until it closes (or the deadline): [(kind, body)],
    and whether it closed."""
    sock.settimeout(timeout)
    deadline = time.monotonic() + timeout
    buf = b""
    closed = False
    while time.monotonic() < deadline:
        try:
            data = sock.recv(65536)
        except TimeoutError:
            break
        except (ConnectionResetError, BrokenPipeError):
            closed = True
            break
        if not data:
            closed = True
            break
        buf += data
    return split_frames(buf)[0], closed


def split_frames(buf):
    """The whole frames `buf` starts with, [(kind, body)], and how many
    bytes they take."""
    frames, at = [], 0
    while len(buf) - at >= 5:
        n = struct.unpack_from("<I", buf, at)[0]
        if len(buf) - at < 4 + n:
            break
        frames.append((buf[at + 4], bytes(buf[at + 5:at + 4 + n])))
        at += 4 + n
    return frames, at


def refusal_text(frames):
    for kind, body in frames:
        if kind == 3:
            n = struct.unpack_from("<H", body)[0]
            return body[2:2 + n].decode(errors="replace")
    return None




def read_varint(b, at):
    n = shift = 0
    while True:
        byte = b[at]
        at += 1
        n |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return n, at


def batch_entries(body):
    """A batch body's entries: [(partition, seq, key)] (the change's key
    is its first field)."""
    out, at = [], 0
    while at < len(body):
        p = struct.unpack_from("<H", body, at)[0]
        seq, at = read_varint(body, at + 2)
        n, at = read_varint(body, at)
        klen, k_at = read_varint(body, at)
        out.append((p, seq, bytes(body[k_at:k_at + klen])))
        at += n
    return out


class FakeSite:
    """A remote site's WAN port played by the test: it welcomes any
    publisher, records every entry it gets ([(node_id, partition, seq,
    key)]) and the size of every batch body (`bodies`), and acknowledges
    each batch as received and applied, except: the first batch logging key
    `ask` is answered with a request for its full value (or for those of
    `ask_keys`, [(partition, key)], if set; `asked` then holds (node_id,
    partition, seq)), and a batch of full values of a key in `withhold` is
    never acknowledged as applied (as if the site lost it with a node)."""

    def __init__(self, name, site_id):
        self.name, self.site_id = name, site_id
        self.listener = socket.create_server(("127.0.0.1", fresh_port()))
        self.endpoints = [f"127.0.0.1:{self.listener.getsockname()[1]}"]
        self.lock = threading.Lock()
        self.entries = []
        self.ask = None
        self.ask_keys = None
        self.asked = None
        self.bodies = []
        self.withhold = set()
        threading.Thread(target=self._accept, daemon=True).start()

    def seen(self, key, node_id=None, full=None):
        """Entries of `key` (from `node_id`; full=True: full values asked
        for or copied, seq 0; False: log entries)."""
        with self.lock:
            return [e for e in self.entries if e[3] == key and node_id in (None, e[0])
                    and (full is None or (e[2] == 0) == full)]

    def close(self):
        self.listener.close()

    def _accept(self):
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn):
        buf = bytearray()
        node_id = None
        try:
            while data := conn.recv(1 << 16):
                buf += data
                frames, used = split_frames(buf)
                del buf[:used]
                for kind, body in frames:
                    node_id = self._answer(conn, node_id, kind, body)
        except OSError:
            return
        finally:
            conn.close()

    def _answer(self, conn, node_id, kind, body):
        """Answers one frame of publisher `node_id`; returns the node id
        (from its hello)."""
        if kind == 1:  # hello: magic, version, site id, site name, partitions, node id
            name_len = struct.unpack_from("<H", body, 8)[0]
            at = 10 + name_len + 2
            id_len = struct.unpack_from("<H", body, at)[0]
            node_id = body[at + 2:at + 2 + id_len].decode()
            conn.sendall(frame(2, struct.pack("<H", self.site_id) + wstr(self.name)
                               + struct.pack("<IQB", 0, 1, 0)))
        elif kind == 4:
            batch_id, flags, raw_len = struct.unpack_from("<QBI", body)
            raw = body[13:]
            if flags & 1:
                raw = lz4.block.decompress(raw, uncompressed_size=raw_len)
            entries = batch_entries(raw)
            replies = [frame(5, struct.pack("<Q", batch_id))]
            with self.lock:
                self.entries += [(node_id, *e) for e in entries]
                self.bodies.append(raw_len)
                logged = [(p, seq) for p, seq, k in entries if seq != 0 and k == self.ask]
                if logged:
                    self.asked = (node_id, *logged[0])
                    keys = self.ask_keys or [(logged[0][0], self.ask)]
                    replies.append(frame(7, struct.pack("<I", len(keys)) + b"".join(
                        struct.pack("<HI", p, len(k)) + k for p, k in keys)))
                    self.ask = None
                if not any(seq == 0 and k in self.withhold for _, seq, k in entries):
                    replies.append(frame(6, struct.pack("<Q", batch_id)))
            conn.sendall(b"".join(replies))
        return node_id
