"""TLS on the client port (`tls_listen`, Redis's `tls-port`): real clients
(redis-py with ssl=True, redis-cli --tls) over rustls, client certificates
as `tls_auth_clients` says, the plain port beside it, certificates read
again on SIGHUP. Runs against real Redis too (DELTAGRID_TEST_TARGET=redis),
with the same certificates."""

import signal
import socket
import ssl
import subprocess
import time

import pytest
import redis

from conftest import Server, binary, free_port
from helpers import wait_until


def openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def issue(d, name, ca, ext):
    """A key and a certificate for `name` signed by `ca` (x509 v3, with `ext`)."""
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.csr",
            "-subj", f"/CN={name}", cwd=d)
    (d / f"{name}.ext").write_text(ext + "\n")
    openssl("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.crt", "-CAkey", f"{ca}.key",
            "-CAcreateserial", "-out", f"{name}.crt", "-days", "2", "-extfile", f"{name}.ext", cwd=d)


def make_ca(d, name):
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out",
            f"{name}.crt", "-days", "2", "-subj", f"/CN={name}", cwd=d)


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    d = tmp_path_factory.mktemp("certs")
    make_ca(d, "ca")
    make_ca(d, "other-ca")
    issue(d, "server", "ca", "subjectAltName=IP:127.0.0.1,DNS:localhost")
    issue(d, "server2", "ca", "subjectAltName=IP:127.0.0.1,DNS:localhost")
    issue(d, "client", "ca", "extendedKeyUsage=clientAuth")
    issue(d, "stranger", "other-ca", "extendedKeyUsage=clientAuth")
    return d


def tls_server(tmp_path, certs, auth=None):
    tls_port = free_port()
    args = ["--tls-listen", f"127.0.0.1:{tls_port}", "--tls-cert-file", str(certs / "server.crt"),
            "--tls-key-file", str(certs / "server.key"), "--tls-ca-cert-file", str(certs / "ca.crt")]
    if auth is not None:
        args += ["--tls-auth-clients", auth]
    s = Server(tmp_path, extra_args=args)
    s.tls_port = tls_port
    return s


def tls_client(server, certs, cert="client", **kw):
    extra = {}
    if cert is not None:
        extra = {"ssl_certfile": str(certs / f"{cert}.crt"), "ssl_keyfile": str(certs / f"{cert}.key")}
    return redis.Redis(host="127.0.0.1", port=server.tls_port, ssl=True,
                       ssl_ca_certs=str(certs / "ca.crt"), socket_timeout=5, **extra, **kw)


def test_clients_speak_tls_on_tls_listen_and_plain_beside_it(tmp_path, certs):
    s = tls_server(tmp_path, certs)
    try:
        r = tls_client(s, certs)
        assert r.ping()
        assert r.set("k", "v") and r.get("k") == b"v"
        # A value larger than a TLS record (16 KiB) and than a read, both ways.
        big = bytes(range(256)) * 8192  # 2 MiB
        assert r.set("big", big) and r.get("big") == big
        # Pipelined requests arrive in a few records, replies likewise.
        pipe = r.pipeline(transaction=False)
        for i in range(2000):
            pipe.set(f"p{i}", i)
        for i in range(2000):
            pipe.get(f"p{i}")
        out = pipe.execute()
        assert out[:2000] == [True] * 2000
        assert out[2000:] == [str(i).encode() for i in range(2000)]
        # The plain port serves the same data.
        plain = redis.Redis(port=s.port)
        assert plain.get("k") == b"v"
        # redis-cli --tls, as a user would run it.
        cli = subprocess.run(
            ["redis-cli", "-p", str(s.tls_port), "--tls", "--cacert", str(certs / "ca.crt"),
             "--cert", str(certs / "client.crt"), "--key", str(certs / "client.key"), "GET", "k"],
            capture_output=True, text=True, timeout=10)
        assert cli.stdout.strip() == "v", cli
        # Pub/sub over TLS: a message published on the plain port arrives.
        p = tls_client(s, certs).pubsub()
        p.subscribe("ch")
        wait_until(lambda: p.get_message(timeout=0.1) is not None, message="subscribe confirmation")
        assert plain.publish("ch", "hello") == 1
        msg = None
        deadline = time.monotonic() + 5
        while msg is None and time.monotonic() < deadline:
            msg = p.get_message(timeout=0.2)
        assert msg and msg["data"] == b"hello"
        p.close()
    finally:
        s.stop()


def test_client_certificates_as_tls_auth_clients_says(tmp_path, certs):
    # yes (the default, as Redis): no certificate or one from another CA: refused.
    for mode in ("yes", "optional", "no"):
        (tmp_path / mode).mkdir()
    s = tls_server(tmp_path / "yes", certs)
    try:
        assert tls_client(s, certs).ping()
        for cert in (None, "stranger"):
            with pytest.raises(redis.exceptions.ConnectionError):
                tls_client(s, certs, cert=cert).ping()
        assert tls_client(s, certs).ping(), "the node keeps serving after refusing"
    finally:
        s.stop()
    s = tls_server(tmp_path / "optional", certs, auth="optional")
    try:
        assert tls_client(s, certs, cert=None).ping()
        assert tls_client(s, certs).ping()
        with pytest.raises(redis.exceptions.ConnectionError):
            tls_client(s, certs, cert="stranger").ping()
    finally:
        s.stop()
    s = tls_server(tmp_path / "no", certs, auth="no")
    try:
        assert tls_client(s, certs, cert=None).ping()
    finally:
        s.stop()


def test_plaintext_and_a_stalled_handshake_on_the_tls_port_cost_nothing_else(tmp_path, certs):
    s = tls_server(tmp_path, certs)
    try:
        # Plain text on the TLS port, and a half-open handshake.
        with socket.create_connection(("127.0.0.1", s.tls_port)) as raw:
            raw.sendall(b"PING\r\n")
            raw.settimeout(5)
            try:
                got = raw.recv(64)
            except OSError:
                got = b""
            assert b"PONG" not in got, "a plaintext client on the TLS port is refused"
            if got:
                assert got[0] == 0x15, f"a TLS alert, not {got!r}"
        half = socket.create_connection(("127.0.0.1", s.tls_port))
        half.sendall(b"\x16\x03\x01\x00\x05")  # a record header, then nothing
        r = tls_client(s, certs)
        assert r.set("still", "here") and r.get("still") == b"here"
        half.close()
    finally:
        s.stop()


def server_cert_serial(port, certs):
    ctx = ssl.create_default_context(cafile=str(certs / "ca.crt"))
    ctx.load_cert_chain(str(certs / "client.crt"), str(certs / "client.key"))
    with socket.create_connection(("127.0.0.1", port)) as raw:
        with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as t:
            der = t.getpeercert(binary_form=True)
    return der


@pytest.mark.deltagrid_only
def test_sighup_reads_the_certificates_again_and_open_connections_stay(tmp_path, certs):
    live = tmp_path / "live"
    live.mkdir()
    for f in ("server.crt", "server.key"):
        (live / f).write_bytes((certs / f).read_bytes())
    tls_port = free_port()
    s = Server(tmp_path, extra_args=[
        "--tls-listen", f"127.0.0.1:{tls_port}", "--tls-cert-file", str(live / "server.crt"),
        "--tls-key-file", str(live / "server.key"), "--tls-ca-cert-file", str(certs / "ca.crt")])
    s.tls_port = tls_port
    try:
        before = server_cert_serial(tls_port, certs)
        kept = tls_client(s, certs)
        assert kept.set("a", 1)
        for f in ("crt", "key"):
            (live / f"server.{f}").write_bytes((certs / f"server2.{f}").read_bytes())
        s.proc.send_signal(signal.SIGHUP)
        wait_until(lambda: server_cert_serial(tls_port, certs) != before, timeout=10,
                   message="the new certificate was not served after SIGHUP")
        assert kept.get("a") == b"1", "an open connection keeps working"
        # A broken file on the next SIGHUP: the certificate in use stays.
        (live / "server.key").write_text("not a key")
        s.proc.send_signal(signal.SIGHUP)
        wait_until(lambda: b"not reloaded" in s.log_path.read_bytes(), message="reload error logged")
        assert tls_client(s, certs).ping()
        assert s.proc.poll() is None
    finally:
        s.stop()


@pytest.mark.deltagrid_only
def test_bad_tls_settings_stop_the_node_with_a_clear_error(tmp_path, certs):
    port = free_port()
    cases = [
        (["--tls-listen", f"127.0.0.1:{free_port()}"], "tls_cert_file"),
        (["--tls-listen", f"127.0.0.1:{free_port()}", "--tls-cert-file", str(certs / "nope.crt"),
          "--tls-key-file", str(certs / "server.key"), "--tls-ca-cert-file", str(certs / "ca.crt")],
         "nope.crt"),
        (["--tls-listen", f"127.0.0.1:{free_port()}", "--tls-cert-file", str(certs / "server.crt"),
          "--tls-key-file", str(certs / "server.key")], "tls_ca_cert_file"),
        (["--tls-listen", f"127.0.0.1:{free_port()}", "--tls-cert-file", str(certs / "server.crt"),
          "--tls-key-file", str(certs / "server.key"), "--tls-ca-cert-file", str(certs / "ca.crt"),
          "--tls-auth-clients", "maybe"], "maybe"),
    ]
    for args, named in cases:
        out = subprocess.run([binary(), "server", "--listen", f"127.0.0.1:{port}", "--persistence", "off",
                              "--admin-listen", f"127.0.0.1:{free_port()}", *args],
                             capture_output=True, text=True, timeout=30)
        assert out.returncode != 0
        assert named in out.stderr + out.stdout, (args, out.stderr)


def test_config_set_tls_files_swaps_the_certificate_and_refuses_a_bad_one(tmp_path, certs):
    s = tls_server(tmp_path, certs)
    try:
        plain = redis.Redis(port=s.port, decode_responses=True)
        assert plain.config_get("tls-port") == {"tls-port": str(s.tls_port)}
        assert plain.config_get("tls-auth-clients")["tls-auth-clients"] == "yes"
        kept = tls_client(s, certs)
        assert kept.set("a", 1)
        before = server_cert_serial(s.tls_port, certs)
        # Certificate and key together: read as a pair.
        assert plain.config_set("tls-cert-file", str(certs / "server2.crt"),
                                "tls-key-file", str(certs / "server2.key"))
        assert server_cert_serial(s.tls_port, certs) != before
        assert plain.config_get("tls-cert-file")["tls-cert-file"] == str(certs / "server2.crt")
        assert kept.get("a") == b"1", "an open connection keeps working"
        # A key that does not match the certificate: refused, nothing changes.
        with pytest.raises(redis.exceptions.ResponseError, match="CONFIG SET failed"):
            plain.config_set("tls-key-file", str(certs / "server.key"))
        assert plain.config_get("tls-key-file")["tls-key-file"] == str(certs / "server2.key")
        assert tls_client(s, certs).ping()
        # tls-auth-clients at run time: optional lets a client without one in.
        assert plain.config_set("tls-auth-clients", "optional")
        assert tls_client(s, certs, cert=None).ping()
        with pytest.raises(redis.exceptions.ResponseError):
            plain.config_set("tls-auth-clients", "sometimes")
    finally:
        s.stop()


@pytest.mark.deltagrid_only
def test_a_cluster_client_over_tls_is_sent_to_tls_ports(tmp_path, certs):
    """A 3-node site, each node with a TLS port: redis-py's RedisCluster
    over TLS learns the TLS ports from CLUSTER SLOTS and MOVED, writes and
    reads keys of every node; plain clients still get the plain ports."""
    from redis.cluster import RedisCluster
    from test_cluster import started_site
    tls_ports = [free_port() for _ in range(3)]

    def tls_args(i):
        return ["--tls-listen", f"127.0.0.1:{tls_ports[i]}",
                "--tls-cert-file", str(certs / "server.crt"), "--tls-key-file", str(certs / "server.key"),
                "--tls-ca-cert-file", str(certs / "ca.crt")]

    with started_site(tmp_path, extra_args=tls_args) as nodes:
        ports = [n.port for n in nodes]
        rc = RedisCluster(host="127.0.0.1", port=tls_ports[0], ssl=True,
                          ssl_ca_certs=str(certs / "ca.crt"), ssl_certfile=str(certs / "client.crt"),
                          ssl_keyfile=str(certs / "client.key"), decode_responses=True)
        written = {f"tls:{i}": f"v{i}" for i in range(300)}
        for k, v in written.items():
            assert rc.set(k, v)
        assert {k: rc.get(k) for k in written} == written
        served = {n.port for n in rc.get_nodes()}
        assert served <= set(tls_ports) and len(served) == 3, served
        rc.close()
        # Over TLS, CLUSTER SLOTS and a MOVED name TLS ports; in plain text, plain ones.
        r = tls_client(type("S", (), {"tls_port": tls_ports[0]}), certs)
        tls_slot_ports = {e[2][1] for e in r.execute_command("CLUSTER", "SLOTS")}
        assert tls_slot_ports == set(tls_ports)
        plain = redis.Redis(port=ports[0])
        plain_slot_ports = {e[2][1] for e in plain.execute_command("CLUSTER", "SLOTS")}
        assert plain_slot_ports == set(ports)
        moved = None
        for k in written:
            try:
                r.get(k)
            except redis.exceptions.ResponseError as e:
                moved = e
                break
        # redis-py's MovedError: "slot host:port".
        assert type(moved).__name__ == "MovedError", moved
        assert int(str(moved).rsplit(":", 1)[1]) in tls_ports, moved

