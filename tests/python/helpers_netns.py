"""Network namespaces for tests that cut nodes off from each other with
real packet loss (test_partition.py): one namespace per node, all joined
by a bridge in the root namespace, which also holds the host's address
on it so the test's clients reach every node, cut off or not:

    root ns: bridge br_dgp 10.79.0.254/24
      +-- vdgp1h <-> veth_dgp1 10.79.0.1/24 in ns_dgp1
      +-- vdgp2h <-> veth_dgp2 10.79.0.2/24 in ns_dgp2
      +-- vdgp3h <-> veth_dgp3 10.79.0.3/24 in ns_dgp3

A cut of node X is a blackhole route on both sides (`ip route add
blackhole 10.79.0.A/32` in X's namespace for every other node A, and one
to X in each other node's namespace): packets between X and the others
are dropped without an answer, so established connections go silent
(what a failed switch port or a partitioned rack looks like) while the
host's traffic to X still flows.

Names (br_dgp, ns_dgp*, vdgp*, 10.79.0.0/24) differ from bench/netns.sh's
(br_dg, ns_dg*, 10.77.0.0/24) so both can be up at once. Everything needs
root (CAP_NET_ADMIN and CAP_SYS_ADMIN); `NetnsUnavailable` says why when
the namespaces cannot be made here.

The second half runs test_partition.py's site in them: node i (NsNode)
runs inside namespace i with its own address (client port 7000 + i,
cluster 17000 + i, admin 9000 + i), config from test_cluster.site_config;
ns_site() starts the three, health_problems()/wait_healthy() say whether
the site is whole again, current_leader() names the Raft leader.
"""
import collections
import contextlib
import os
import shutil
import signal
import subprocess
import time

import pytest

from conftest import binary
from helpers_net import RespConn, http_json
from test_cluster import site_config

BRIDGE = "br_dgp"
SUBNET = "10.79.0"
HOST_IP = f"{SUBNET}.254"
PREFIX = "dgp"
# Setup errors that mean "this machine cannot make namespaces/bridges"
# (not root, a container without the capabilities, a kernel without the
# feature), as opposed to a broken setup, which is a failure.
_UNAVAILABLE = ("Operation not permitted", "Permission denied", "Unknown device type",
                "not supported")


class NetnsUnavailable(Exception):
    """Namespaces cannot be made here; the text says why."""


class NetnsError(Exception):
    """A namespace command failed for another reason."""


def _run(*args, check=True):
    """Runs one command; returns its stdout, or raises NetnsError with its
    stderr."""
    out = subprocess.run(args, capture_output=True, text=True, timeout=30)
    if check and out.returncode != 0:
        raise NetnsError(f"`{' '.join(args)}` failed ({out.returncode}): {out.stderr.strip()}")
    return out.stdout


class Netns:
    """`n` namespaces on one bridge (see the module docstring). Node i is
    numbered from 1: `ns(i)`, `ip(i)`. Use as a context manager, or call
    create() and cleanup(); both remove leftovers of an earlier run that
    did not get to clean up."""

    def __init__(self, n=3):
        self.n = n
        self.cuts = set()  # nodes currently cut off

    def ns(self, i):
        return f"ns_{PREFIX}{i}"

    def ip(self, i):
        return f"{SUBNET}.{i}"

    def veth(self, i):
        """(end inside the namespace, end on the bridge)."""
        return f"veth_{PREFIX}{i}", f"v{PREFIX}{i}h"

    def exec_args(self, i, args):
        """A command line that runs `args` inside node i's namespace (`ip
        netns exec` execs it: the process's pid is the command's)."""
        return ["ip", "netns", "exec", self.ns(i), *args]

    # -- setup / teardown --------------------------------------------------
    @staticmethod
    def why_unavailable():
        """Why namespaces cannot be made here at all, or None."""
        if os.geteuid() != 0:
            return f"needs root to create network namespaces (running as uid {os.geteuid()})"
        if shutil.which("ip") is None:
            return "no 'ip' command (apt-get install -y iproute2)"
        return None

    def create(self):
        why = self.why_unavailable()
        if why:
            raise NetnsUnavailable(why)
        self.cleanup()
        try:
            self._create()
        except NetnsError as e:
            self.cleanup()
            if any(s in str(e) for s in _UNAVAILABLE):
                raise NetnsUnavailable(f"cannot create network namespaces here: {e}") from None
            raise

    def _create(self):
        for i in range(1, self.n + 1):
            _run("ip", "netns", "add", self.ns(i))
        _run("ip", "link", "add", BRIDGE, "type", "bridge")
        _run("ip", "addr", "add", f"{HOST_IP}/24", "dev", BRIDGE)
        _run("ip", "link", "set", BRIDGE, "up")
        for i in range(1, self.n + 1):
            inner, outer = self.veth(i)
            _run("ip", "link", "add", outer, "type", "veth", "peer", "name", inner, "netns", self.ns(i))
            _run("ip", "link", "set", outer, "master", BRIDGE)
            _run("ip", "link", "set", outer, "up")
            _run("ip", "-n", self.ns(i), "addr", "add", f"{self.ip(i)}/24", "dev", inner)
            _run("ip", "-n", self.ns(i), "link", "set", inner, "up")
            _run("ip", "-n", self.ns(i), "link", "set", "lo", "up")

    def cleanup(self):
        """Removes the namespaces (and the veth pairs with them) and the
        bridge; kills what still runs inside the namespaces (they are this
        module's own, so whatever is in them was started here). Safe to
        call twice."""
        self.cuts.clear()
        listed = _run("ip", "netns", "list", check=False).split()
        for i in range(1, self.n + 1):
            ns = self.ns(i)
            if ns not in listed:
                continue
            # A namespace lives on while a process is in it, and its veth
            # end with it: the bridge-side name could not be made again.
            for pid in _run("ip", "netns", "pids", ns, check=False).split():
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except (ProcessLookupError, ValueError):
                    pass
            _run("ip", "netns", "del", ns, check=False)
        _run("ip", "link", "del", BRIDGE, check=False)
        # Bridge-side veth ends go with their namespace's end; wait for it.
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            links = _run("ip", "-o", "link", "show", check=False)
            if not any(f" {self.veth(i)[1]}@" in links or f" {self.veth(i)[1]}:" in links
                       for i in range(1, self.n + 1)):
                break
            time.sleep(0.1)

    def __enter__(self):
        self.create()
        return self

    def __exit__(self, *exc):
        self.cleanup()

    # -- partitions --------------------------------------------------------
    def _blackholes(self, x):
        """(namespace, destination) of every route that cuts node x off."""
        others = [a for a in range(1, self.n + 1) if a != x]
        return ([(self.ns(x), self.ip(a)) for a in others] +
                [(self.ns(a), self.ip(x)) for a in others])

    def cut(self, x):
        """Cuts node x off from the other nodes, both ways (the host still
        reaches it)."""
        for ns, dst in self._blackholes(x):
            _run("ip", "-n", ns, "route", "add", "blackhole", f"{dst}/32")
        self.cuts.add(x)

    def heal(self, x):
        """Undoes cut(x)."""
        for ns, dst in self._blackholes(x):
            _run("ip", "-n", ns, "route", "del", "blackhole", f"{dst}/32")
        self.cuts.discard(x)

    def heal_all(self):
        for x in list(self.cuts):
            self.heal(x)

    def routes(self):
        """Every namespace's routing table, for reports."""
        return {self.ns(i): _run("ip", "-n", self.ns(i), "route", "show", check=False).strip()
                for i in range(1, self.n + 1)}


def bridge_netfilter_note():
    """A hint for when nodes on the bridge cannot reach each other: with
    br_netfilter loaded and net.bridge.bridge-nf-call-iptables = 1,
    bridged packets cross iptables' FORWARD chain, which a DROP policy
    (Docker sets one) turns into a silent partition of its own."""
    try:
        with open("/proc/sys/net/bridge/bridge-nf-call-iptables") as f:
            value = f.read().strip()
    except OSError:
        return "br_netfilter is not loaded (bridged traffic does not cross iptables)"
    if value == "1":
        return ("net.bridge.bridge-nf-call-iptables = 1: bridged traffic crosses iptables' FORWARD "
                "chain; a DROP policy there (Docker sets one) blocks the nodes from each other "
                "(sysctl -w net.bridge.bridge-nf-call-iptables=0, or accept 10.79.0.0/24 in FORWARD)")
    return f"net.bridge.bridge-nf-call-iptables = {value}"


# -- a site in the namespaces ----------------------------------------------

NODES = 3
PARTITIONS = 64
BACKUPS = 1
# Every node has its own address; distinct ports too make logs easier to read.
CLIENT_PORT, CLUSTER_PORT, ADMIN_PORT = 7000, 17000, 9000


@contextlib.contextmanager
def namespaces_or_skip():
    """The NODES nodes' namespaces, removed after; skips the test, saying
    why, where they cannot be made."""
    net = Netns(NODES)
    try:
        net.create()
    except NetnsUnavailable as e:
        pytest.skip(f"partition test needs network namespaces: {e}")
    try:
        yield net
    finally:
        net.cleanup()


def node_index(addr):
    """i of node n<i> for its client address (10.79.0.<i>:port), 0 if unknown."""
    try:
        return int(addr[0].rsplit(".", 1)[1]) if addr and addr[0].startswith(SUBNET + ".") else 0
    except ValueError:
        return 0


def node_name(index):
    return f"n{index}" if index else "?"


class NsNode:
    """Node i (from 1) of the site, running inside namespace i."""

    def __init__(self, net, i, tmp_path):
        self.net, self.i, self.name = net, i, f"n{i}"
        self.host = net.ip(i)
        self.port, self.admin_port = CLIENT_PORT + i, ADMIN_PORT + i
        self.addr = (self.host, self.port)
        self.data_dir = tmp_path / self.name
        self.data_dir.mkdir()
        self.log_path = tmp_path / f"{self.name}.log"
        self.config_path = tmp_path / f"{self.name}.toml"
        ids = range(1, NODES + 1)  # site_config counts nodes from 0
        self.config_path.write_text(site_config(
            i - 1, [CLIENT_PORT + j for j in ids], [CLUSTER_PORT + j for j in ids], backups=BACKUPS,
            partitions=PARTITIONS, hosts=[net.ip(j) for j in ids], admin_ports=[ADMIN_PORT + j for j in ids],
            data_dir=self.data_dir, replication="sync"))
        self.proc = None
        self.log = None

    def start(self):
        self.log = open(self.log_path, "ab")
        args = self.net.exec_args(self.i, [binary(), "server", "--config", str(self.config_path)])
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT)

    def wait_ready(self, timeout=30):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self.proc.returncode}: "
                                   f"{self.log_path.read_text()[-3000:]}")
            try:
                with RespConn(self.host, self.port, timeout=0.5) as c:
                    if c.call("PING") == "PONG":
                        return
            except (OSError, ValueError):
                pass
            time.sleep(0.05)
        raise RuntimeError(f"{self.name} did not answer PING at {self.host}:{self.port} in {timeout} s")

    def kill(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        if self.log is not None:
            self.log.close()

    def status(self, timeout=2.0):
        """The `cluster` part of the node's /status."""
        return http_json(self.host, self.admin_port, "/status", timeout=timeout)["cluster"]


@contextlib.contextmanager
def ns_site(net, tmp_path):
    """The three nodes, started in their namespaces; killed (-9) after."""
    nodes = [NsNode(net, i, tmp_path) for i in range(1, NODES + 1)]
    try:
        for n in nodes:
            n.start()
        for n in nodes:
            n.wait_ready()
        yield nodes
    finally:
        for n in nodes:
            n.kill()


def health_problems(nodes):
    """What keeps the site from being healthy, as every node sees it
    (empty: healthy): each node's view has the site formed, one leader
    all agree on, every member active and connected, every partition a
    primary and its backups in sync, nothing migrating, and the table
    balanced again (primaries and backups per member within one of each
    other, as rebalancing leaves them), so that the next cut takes
    primaries and backups off whichever node it cuts."""
    problems, leaders = [], set()
    for n in nodes:
        try:
            c = n.status()
        except Exception as e:  # noqa: BLE001 -- any failure to answer is a problem to report
            problems.append(f"{n.name}: /status failed: {e!r}")
            continue
        if not c or not c["formed"]:
            problems.append(f"{n.name}: site not formed")
            continue
        leaders.add(c["leader"])
        for m in c["members"]:
            if m["state"] != "active" or not m["connected"]:
                problems.append(f"{n.name} sees {m['node_id']} {m['state']}"
                                f"{'' if m['connected'] else ', disconnected'}")
        primaries = sum(m["primaries"] for m in c["members"])
        in_sync = sum(m["in_sync"] for m in c["members"])
        if primaries != PARTITIONS or in_sync != PARTITIONS * BACKUPS or c["migrating"]:
            problems.append(f"{n.name}: {primaries} primaries, {in_sync} in-sync backups, "
                            f"{c['migrating']} migrating (of {PARTITIONS} partitions)")
        for what in ("primaries", "backups"):
            held = {m["node_id"]: m[what] for m in c["members"]}
            if max(held.values()) - min(held.values()) > 1:
                problems.append(f"{n.name}: {what} not balanced: {held}")
    if len(leaders) != 1 or None in leaders:
        problems.append(f"leaders seen: {sorted(map(str, leaders))}")
    return problems


def wait_healthy(nodes, timeout):
    """Seconds it took for the site to be healthy, or None (then the last
    problems are in `wait_healthy.last`)."""
    start = time.monotonic()
    while True:
        problems = health_problems(nodes)
        if not problems:
            return time.monotonic() - start
        wait_healthy.last = problems
        if time.monotonic() - start > timeout:
            return None
        time.sleep(0.25)


def current_leader(nodes):
    """The Raft leader's name as most nodes see it."""
    seen = collections.Counter()
    for n in nodes:
        try:
            seen[n.status(timeout=1.0)["leader"]] += 1
        except Exception:  # noqa: BLE001 -- a node that does not answer has no say
            pass
    return seen.most_common(1)[0][0] if seen else None
