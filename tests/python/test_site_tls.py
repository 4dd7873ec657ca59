"""Node-to-node mutual TLS (`[site] tls = true`): every connection between
the nodes of a site (replication, metadata, joins) is TLS, each node's
certificate from the site's CA naming the site. A site so configured
forms, replicates and fails over; a node with a certificate from another
CA cannot join it (it is refused, and says so)."""
import subprocess

import pytest
import redis

from conftest import Server, binary, free_port
from helpers import wait_until
from test_cluster import cluster_info, site_config, started_site
from helpers_certs import issue, make_ca, tls_keys

pytestmark = pytest.mark.deltagrid_only


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    d = tmp_path_factory.mktemp("site-certs")
    ca = make_ca(d, "ca")
    other = make_ca(d, "other-ca")
    issue(d, ca, "london")
    issue(d, other, "london", file="london-other-ca")
    issue(d, ca, "paris", file="paris")
    return d


def tls_lines(certs, cert, ca="ca"):
    return "\n".join(tls_keys(certs, cert, ca)) + "\n"


def test_a_site_over_mutual_tls_forms_replicates_and_fails_over(tmp_path, certs):
    with started_site(tmp_path, site_extra=tls_lines(certs, "london")) as nodes:
        rc = redis.RedisCluster(host="127.0.0.1", port=nodes[0].port)
        for i in range(300):
            rc.set(f"k{i}", i)
        assert rc.execute_command("WAIT", 1, 5000, target_nodes=redis.RedisCluster.ALL_NODES)
        nodes[2].proc.kill()
        nodes[2].proc.wait()
        wait_until(lambda: b"cluster_state:ok" in cluster_info(nodes[0]), timeout=30,
                   message="the site serves again after the kill")
        rc = redis.RedisCluster(host="127.0.0.1", port=nodes[0].port)

        def all_there():
            try:
                return all(rc.get(f"k{i}") == str(i).encode() for i in range(300))
            except redis.RedisError:
                return False
        wait_until(all_there, timeout=30, message="every acknowledged write readable after failover")
        log = nodes[0].log_path.read_text(errors="replace")
        assert "TLS handshake failed" not in log


@pytest.mark.parametrize("cert,ca,why", [
    ("london-other-ca", "ca", "TLS handshake failed"),
    ("paris", "ca", "does not name site"),
])
def test_a_node_without_the_sites_certificate_cannot_join(tmp_path, certs, cert, ca, why):
    with started_site(tmp_path, site_extra=tls_lines(certs, "london")) as nodes:
        seed_ports = [n.cluster_port for n in nodes]
        port, cport = free_port(), free_port()
        ports, cports = [0, 0, 0, port], [0, 0, 0, cport]
        config = site_config(3, ports, cports, seed_ports=seed_ports, site_extra=tls_lines(certs, cert, ca))
        d = tmp_path / "intruder"
        d.mkdir()
        (d / "node.toml").write_text(config)
        log = d / "server.log"
        with open(log, "wb") as out:
            p = subprocess.Popen([binary(), "server", "--config", str(d / "node.toml"), "--data-dir",
                                  str(d / "data"), "--admin-listen", f"127.0.0.1:{free_port()}"],
                                 stdout=out, stderr=subprocess.STDOUT)
        try:
            # It gives up (another CA: the seeds' refusal is final) or keeps
            # being refused; either way it never becomes a member.
            wait_until(lambda: why in "".join(n.log_path.read_text(errors="replace") for n in nodes),
                       timeout=30, message=f"a seed logs the refusal ({why})")
            try:
                assert p.wait(timeout=10) != 0, "the node with the wrong certificate started"
            except subprocess.TimeoutExpired:
                pass
        finally:
            if p.poll() is None:
                p.kill()
            p.wait()
        assert "joined the site" not in log.read_text(errors="replace")
        seen = "".join(n.log_path.read_text(errors="replace") for n in nodes)
        assert why in seen, seen[-3000:]
        for n in nodes:
            with redis.Redis(port=n.port) as r:
                nodes_line = r.execute_command("CLUSTER", "NODES")
            text = nodes_line.decode() if isinstance(nodes_line, bytes) else str(nodes_line)
            assert f":{port}" not in text, text
