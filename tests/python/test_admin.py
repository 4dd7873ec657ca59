"""Admin HTTP endpoint (health, status, Prometheus metrics) and the change /
delta accounting it exposes. deltagrid only: redis-server has no admin port."""
import json
import random

import pytest
from prometheus_client.parser import text_string_to_metric_families

from helpers import wait_until
from helpers_net import RespConn, http_get, http_json

pytestmark = pytest.mark.deltagrid_only


class Metrics:
    """One scrape: samples by (sample name, labels)."""

    def __init__(self, text):
        self.text = text
        self.families = {}
        self.samples = {}
        for fam in text_string_to_metric_families(text):
            self.families[fam.name] = fam
            for s in fam.samples:
                self.samples[(s.name, frozenset(s.labels.items()))] = s.value

    def get(self, name, default=None, **labels):
        return self.samples.get((name, frozenset(labels.items())), default)

    def has(self, name, **labels):
        return (name, frozenset(labels.items())) in self.samples

    def total(self, name):
        """Sum over every label set of one sample name."""
        return sum(v for (n, _), v in self.samples.items() if n == name)

    def names(self):
        return {n for n, _ in self.samples}


def scrape(server):
    status, headers, body = http_get(server.host, server.admin_port, "/metrics")
    assert status == 200, (status, body[:500])
    ctype = {k.lower(): v for k, v in headers.items()}.get("content-type", "")
    assert ctype.startswith("text/plain"), ctype
    return Metrics(body.decode())


def test_health(server):
    status, _, _ = http_get(server.host, server.admin_port, "/health")
    assert status == 200


def test_unknown_path_404(server):
    status, _, _ = http_get(server.host, server.admin_port, "/no/such/path")
    assert status == 404


def test_status_json(server):
    with RespConn.to(server) as c:
        for i in range(7):
            c.ok("SET", f"s{i}", "v")
        st = wait_until(lambda: (lambda j: j if j.get("keys") == 7 else None)(
            http_json(server.host, server.admin_port, "/status")), timeout=5, message="status keys == 7")
        for field in ("node_id", "version", "keys", "connected_clients", "used_memory"):
            assert field in st, (field, st)
        assert isinstance(st["node_id"], str) and st["node_id"]
        assert isinstance(st["version"], str) and st["version"]
        assert st["keys"] == c.call("DBSIZE") == 7
        assert isinstance(st["connected_clients"], int) and st["connected_clients"] >= 1
        assert isinstance(st["used_memory"], int) and st["used_memory"] > 0


def test_metrics_parse_and_series_exist(server):
    m = scrape(server)  # fresh server: series are registered up front
    for name, labels in [
        ("deltagrid_changes_total", {"kind": "full"}),
        ("deltagrid_changes_total", {"kind": "delta"}),
        ("deltagrid_change_bytes_total", {"kind": "full"}),
        ("deltagrid_change_bytes_total", {"kind": "delta"}),
        ("deltagrid_delta_bytes_saved_total", {}),
        ("deltagrid_connected_clients", {}),
        ("deltagrid_keys", {}),
        ("deltagrid_memory_used_bytes", {}),
    ]:
        assert m.has(name, **labels), (name, labels, sorted(m.names()))
    assert m.families["deltagrid_connected_clients"].type == "gauge"
    assert m.families["deltagrid_keys"].type == "gauge"


def test_command_counters_and_histogram(server):
    with RespConn.to(server) as c:
        c.ok("SET", "warm", "1")  # make sure per-command series exist
        c.call("GET", "warm")
        before = scrape(server)
        for i in range(10):
            c.ok("SET", f"k{i}", str(i))
        for i in range(5):
            assert c.call("GET", f"k{i}") == str(i).encode()

        count = "deltagrid_command_duration_seconds_count"

        def grew(m, name, n, **labels):
            return m.get(name, 0, **labels) >= before.get(name, 0, **labels) + n

        def moved():
            m = scrape(server)
            done = (grew(m, "deltagrid_commands_total", 10, command="set")
                    and grew(m, "deltagrid_commands_total", 5, command="get")
                    and m.total(count) >= before.total(count) + 15)
            return m if done else None

        after = wait_until(moved, timeout=5, message="command counters and histogram moved")
        assert after.get("deltagrid_commands_total", command="set") - \
            before.get("deltagrid_commands_total", 0, command="set") == 10
        assert after.get("deltagrid_commands_total", command="get") - \
            before.get("deltagrid_commands_total", 0, command="get") == 5

        fam = after.families.get("deltagrid_command_duration_seconds")
        assert fam is not None and fam.type == "histogram", sorted(after.families)
        names = {s.name for s in fam.samples}
        assert {"deltagrid_command_duration_seconds_bucket",
                "deltagrid_command_duration_seconds_sum",
                "deltagrid_command_duration_seconds_count"} <= names
        assert after.total(count) - before.total(count) >= 15
        assert after.total("deltagrid_command_duration_seconds_sum") > 0
        assert any(s.labels.get("le") == "+Inf" for s in fam.samples)


def test_gauges_follow_state(server):
    def clients():
        return scrape(server).get("deltagrid_connected_clients")

    c = RespConn.to(server)
    assert c.call("PING") == "PONG"
    # exactly our connection once the harness's readiness probe is gone
    wait_until(lambda: clients() == 1, timeout=5, message="connected_clients == 1")
    extra = [RespConn.to(server) for _ in range(3)]
    for e in extra:
        assert e.call("PING") == "PONG"
    wait_until(lambda: clients() == 4, timeout=5, message="connected_clients == 4")
    for e in extra:
        e.close()
    wait_until(lambda: clients() == 1, timeout=5, message="connected_clients back to 1 after close")

    for i in range(25):
        c.ok("SET", f"g{i}", "x" * 100)
    dbsize = c.call("DBSIZE")
    assert dbsize == 25
    wait_until(lambda: scrape(server).get("deltagrid_keys") == dbsize,
               timeout=5, message="deltagrid_keys == DBSIZE")
    assert scrape(server).get("deltagrid_memory_used_bytes") > 0
    c.call("DEL", "g0", "g1")
    wait_until(lambda: scrape(server).get("deltagrid_keys") == 23, timeout=5,
               message="deltagrid_keys follows DEL")
    c.close()


# -- delta accounting --------------------------------------------------------------------------

def _delta_state(m):
    return (m.get("deltagrid_changes_total", 0, kind="delta"),
            m.get("deltagrid_change_bytes_total", 0, kind="delta"),
            m.get("deltagrid_delta_bytes_saved_total", 0))


def _after_one_delta(server, before):
    def grown():
        m = scrape(server)
        return m if _delta_state(m)[0] >= before[0] + 1 else None
    return _delta_state(wait_until(grown, timeout=5, message="delta change counted"))


def test_hash_field_update_is_a_small_delta(server):
    rng = random.Random(7)
    with RespConn.to(server) as c:
        assert c.call("HSET", "h", "payload", rng.randbytes(10240), "id", "1",
                      "count", "0", "timestamp", "0") == 4
        before = _delta_state(scrape(server))
        assert c.call("HSET", "h", "count", "1", "timestamp", "12345") == 0
        after = _after_one_delta(server, before)
        assert after[0] - before[0] == 1
        assert after[1] - before[1] < 100, after[1] - before[1]
        assert after[2] - before[2] > 10000, after[2] - before[2]
        assert c.call("HGET", "h", "timestamp") == b"12345"


def test_string_small_edit_is_a_small_delta(server):
    rng = random.Random(8)
    value = bytearray(rng.randbytes(10275))
    with RespConn.to(server) as c:
        c.ok("SET", "s", bytes(value))
        before = _delta_state(scrape(server))
        mid = len(value) // 2
        value[mid:mid + 12] = bytes((b ^ 0xFF) for b in value[mid:mid + 12])
        c.ok("SET", "s", bytes(value))
        after = _after_one_delta(server, before)
        assert after[0] - before[0] == 1
        assert after[1] - before[1] < 100, after[1] - before[1]
        assert after[2] - before[2] > 10000, after[2] - before[2]
        assert c.call("GET", "s") == bytes(value)


def test_new_key_counts_as_full_change(server):
    with RespConn.to(server) as c:
        before = scrape(server)
        full0 = before.get("deltagrid_changes_total", 0, kind="full")
        bytes0 = before.get("deltagrid_change_bytes_total", 0, kind="full")
        c.ok("SET", "fresh", "x" * 1000)
        m = wait_until(lambda: (lambda s: s if s.get("deltagrid_changes_total", 0, kind="full") > full0
                                else None)(scrape(server)), timeout=5, message="full change counted")
        assert m.get("deltagrid_change_bytes_total", 0, kind="full") - bytes0 >= 1000


def admin_post(server, path, token=None):
    """(status, body) of POST `path` on the admin port, with `token` as
    `Authorization: Bearer` when given."""
    import urllib.error
    import urllib.request
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    req = urllib.request.Request(f"http://127.0.0.1:{server.admin_port}{path}", data=b"",
                                 method="POST", headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


@pytest.mark.parametrize("flags,token", [(["--requirepass", "s3cret"], "s3cret"),
                                         (["--admin-token", "t0ken"], "t0ken")])
def test_state_changing_admin_requests_need_the_token(make_server, flags, token):
    """With a requirepass (or an admin_token) set, POST /cluster/leave,
    /cluster/revoke and /wan/... without `Authorization: Bearer <token>` are
    refused (401, counted) and change nothing; /metrics, /health and
    /status stay open to scrapers."""
    s = make_server(extra_args=flags)
    for path in ("/cluster/leave?node=n1", "/cluster/revoke?node=n1", "/wan/stop?target=x"):
        for given in (None, "wrong", token + "x"):
            status, body = admin_post(s, path, given)
            assert status == 401 and b"admin token" in body, (path, given, status, body)
        # With the token the request is heard (this lone node has no site
        # or WAN, so it answers that instead).
        status, body = admin_post(s, path, token)
        assert status != 401, (path, status, body)
    assert scrape(s).get("deltagrid_admin_refused_total") == 9
    for path in ("/metrics", "/health", "/status"):
        assert http_get("127.0.0.1", s.admin_port, path)[0] == 200


def test_without_a_password_or_token_admin_requests_are_open(server):
    status, body = admin_post(server, "/wan/stop?target=x")
    assert status != 401, (status, body)
