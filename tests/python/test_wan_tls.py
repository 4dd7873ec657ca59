"""WAN links over mutual TLS (`[wan] tls = true`): each site's certificate,
from the CA both sites trust, names the site. Sites replicate both ways; a
plaintext peer, a publisher showing another site's certificate, an expired
certificate or one from another CA are refused with a log line saying why;
a man in the middle flipping one byte breaks the connection, never the
data (the link comes back and the sites converge)."""
import socket
import threading

import pytest

from helpers import wait_until
from helpers_wan import WanSite, client, hello, read_frames, wait_converged

pytestmark = pytest.mark.deltagrid_only

from helpers_certs import DAY, NOW, issue, make_ca, tls_keys


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    d = tmp_path_factory.mktemp("wan-certs")
    ca = make_ca(d, "ca")
    other = make_ca(d, "other-ca")
    issue(d, ca, "london")
    issue(d, ca, "newyork")
    issue(d, ca, "london", file="london-expired", not_before=NOW - 3 * DAY, not_after=NOW - DAY)
    issue(d, other, "london", file="london-other-ca")
    return d


def pair(tmp_path, certs, london_cert="london", newyork_cert="newyork"):
    a = WanSite(tmp_path, 1, "london", wan_settings=tls_keys(certs, london_cert))
    b = WanSite(tmp_path, 2, "newyork", wan_settings=tls_keys(certs, newyork_cert))
    a.target(b)
    b.target(a)
    return a.start(), b.start()


def log_of(site):
    return site.nodes[0].log_path.read_text(errors="replace")


def test_sites_replicate_both_ways_over_mutual_tls_and_plaintext_is_refused(tmp_path, certs):
    london, newyork = pair(tmp_path, certs)
    try:
        a, b = client(london.nodes[0]), client(newyork.nodes[0])
        for i in range(200):
            a.set(f"from-london:{i}", "x" * 50)
            b.hset(f"from-newyork:{i}", mapping={"f": i})
        assert wait_converged([london, newyork], min_keys=400)
        # A peer speaking the protocol in the clear gets no welcome.
        with socket.create_connection(("127.0.0.1", newyork.wan_ports[0]), timeout=5) as s:
            s.sendall(hello(1, "london"))
            frames, closed = read_frames(s, timeout=5)
        assert closed and not frames, frames
        wait_until(lambda: "TLS handshake failed" in log_of(newyork), timeout=5,
                   message="the plaintext peer's refusal logged")
    finally:
        london.stop()
        newyork.stop()


@pytest.mark.parametrize("cert,why", [
    ("newyork", 'does not name site "london"'),
    ("london-expired", "certificate expired"),
    ("london-other-ca", "UnknownIssuer"),
])
def test_a_publisher_without_a_good_certificate_for_its_site_is_refused(tmp_path, certs, cert, why):
    london, newyork = pair(tmp_path, certs, london_cert=cert)
    try:
        client(london.nodes[0]).set("k", "v")
        wait_until(lambda: why in log_of(newyork), timeout=20,
                   message=f"site 2 logs the refusal ({why})")
        assert "refused WAN connection" in log_of(newyork)
        assert client(newyork.nodes[0]).get("k") is None
    finally:
        london.stop()
        newyork.stop()


class FlippingProxy:
    """Forwards TCP to `target`; flips one bit of the byte at offset
    `flip_at` of the client-to-server stream of the first connection that
    gets that far (once)."""

    def __init__(self, target, flip_at):
        self.target, self.flip_at = target, flip_at
        self.flipped = False
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                down, _ = self.listener.accept()
            except OSError:
                return
            try:
                up = socket.create_connection(self.target)
            except OSError:
                down.close()
                continue
            threading.Thread(target=self._pump, args=(down, up, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(up, down, False), daemon=True).start()

    def _pump(self, src, dst, flip):
        seen = 0
        try:
            while data := src.recv(65536):
                if flip and not self.flipped and seen <= self.flip_at < seen + len(data):
                    i = self.flip_at - seen
                    data = data[:i] + bytes([data[i] ^ 0x01]) + data[i + 1:]
                    self.flipped = True
                seen += len(data)
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self):
        self.listener.close()


def test_a_byte_flipped_on_the_link_breaks_the_connection_not_the_data(tmp_path, certs):
    a = WanSite(tmp_path, 1, "london", wan_settings=tls_keys(certs, "london"))
    b = WanSite(tmp_path, 2, "newyork", wan_settings=tls_keys(certs, "newyork"))
    proxy = FlippingProxy(("127.0.0.1", b.wan_ports[0]), flip_at=20_000)
    a.target(b)
    b.target(a)
    a.via["newyork"] = [f"127.0.0.1:{proxy.port}"]  # London reaches New York through the proxy
    b.start()
    a.start()
    try:
        r = client(a.nodes[0])
        for i in range(2000):
            r.set(f"k{i}", f"value-{i}-" + "y" * 80)
        wait_until(lambda: proxy.flipped, timeout=20, message="a byte flipped on the link")
        wait_until(lambda: client(b.nodes[0]).dbsize() == 2000, timeout=60,
                   message="every key crossed after the link came back")
        got = client(b.nodes[0])
        for i in range(0, 2000, 7):
            assert got.get(f"k{i}") == f"value-{i}-".encode() + b"y" * 80
        # TLS refused the changed record: the connection broke, no data changed.
        log = log_of(b)
        assert "cannot decrypt peer's message" in log, log[-2000:]
    finally:
        proxy.close()
        a.stop()
        b.stop()
