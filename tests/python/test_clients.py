"""Real Redis tools against the server: redis-cli (one-shot, stdin, --pipe,
RESP3) and redis-benchmark (plain, pipelined, CSV)."""
import csv
import io
import re
import shutil
import subprocess

import pytest

from helpers_net import RespConn, encode


def tool(name):
    path = shutil.which(name)
    assert path, f"{name} not installed (apt-get install redis-tools)"
    return path


def cli(server, *args, stdin=None, timeout=30, raw_out=False):
    cmd = [tool("redis-cli"), "-h", server.host, "-p", str(server.port), *args]
    p = subprocess.run(cmd, input=stdin, capture_output=True, timeout=timeout)
    assert p.returncode == 0, (cmd, p.returncode, p.stdout[-2000:], p.stderr[-2000:])
    return p.stdout if raw_out else p.stdout.decode()


# -- redis-cli ---------------------------------------------------------------------------

def test_cli_one_shot_commands(server):
    assert cli(server, "SET", "a", "1") == "OK\n"
    assert cli(server, "GET", "a") == "1\n"
    assert cli(server, "--no-raw", "GET", "a") == '"1"\n'
    assert cli(server, "--no-raw", "INCR", "a") == "(integer) 2\n"
    assert cli(server, "--no-raw", "GET", "missing") == "(nil)\n"
    assert cli(server, "HSET", "h", "f1", "v1", "f2", "v2") == "2\n"
    assert cli(server, "--raw", "HGETALL", "h") == "f1\nv1\nf2\nv2\n"
    assert cli(server, "--no-raw", "HGETALL", "h") == '1) "f1"\n2) "v1"\n3) "f2"\n4) "v2"\n'
    out = cli(server, "--no-raw", "NOSUCHCOMMAND", "x")
    assert out == "(error) ERR unknown command 'NOSUCHCOMMAND', with args beginning with: 'x' \n"


def test_cli_commands_on_stdin(server):
    assert cli(server, stdin=b"SET x 1\nINCR x\n") == "OK\n2\n"
    out = cli(server, stdin=b'SET sp "with space"\nGET sp\nDEL sp\nEXISTS sp\n')
    assert out == "OK\nwith space\n1\n0\n"


def test_cli_resp3_session(server):
    out = cli(server, "-3", "--no-raw", "HELLO", "3")
    assert '"proto" => (integer) 3' in out, out
    assert re.search(r'"server" => "', out), out
    assert cli(server, "-3", "HSET", "h3", "f", "v") == "1\n"
    # RESP3 HGETALL is a map, shown by redis-cli with "#" indexes
    assert cli(server, "-3", "--no-raw", "HGETALL", "h3") == '1# "f" => "v"\n'
    assert cli(server, "-3", "--no-raw", "GET", "missing") == "(nil)\n"
    out = cli(server, "-3", stdin=b"SET r3 1\nINCR r3\nGET r3\n")
    assert out == "OK\n2\n2\n"


def test_cli_pipe_mass_insertion(server):
    n = 10_000
    data = b"".join(encode("SET", f"key:{i}", f"value:{i}") for i in range(n))
    out = cli(server, "--pipe", stdin=data, timeout=60)
    assert re.search(r"errors: 0, replies: 10000\b", out), out
    with RespConn.to(server) as c:
        assert c.call("DBSIZE") == n
        assert c.call("GET", "key:9999") == b"value:9999"


def test_cli_pipe_counts_errors(server):
    data = encode("SET", "a", "1") + encode("INCR", "a") + encode("HSET", "a", "f", "v") + encode("GET", "a")
    p = subprocess.run([tool("redis-cli"), "-h", server.host, "-p", str(server.port), "--pipe"],
                       input=data, capture_output=True, timeout=30)
    out = p.stdout.decode()
    assert re.search(r"errors: 1, replies: 4\b", out), out
    assert "WRONGTYPE Operation against a key holding the wrong kind of value" in out + p.stderr.decode()
    assert p.returncode != 0  # redis-cli --pipe exits 1 when a reply was an error


# -- redis-benchmark ----------------------------------------------------------------------

TESTS = ["SET", "GET", "INCR", "HSET", "MSET (10 keys)"]


def bench(server, *args, timeout=120):
    cmd = [tool("redis-benchmark"), "-h", server.host, "-p", str(server.port),
           "-t", "set,get,incr,hset,mset", "-n", "20000", *args]
    p = subprocess.run(cmd, capture_output=True, timeout=timeout)
    out = p.stdout.decode(errors="replace")
    err = p.stderr.decode(errors="replace")
    assert p.returncode == 0, (cmd, p.returncode, out[-3000:], err[-3000:])
    # quiet mode rewrites a progress line with \r; keep the final lines only
    lines = [seg.strip() for line in out.splitlines() for seg in line.split("\r")]
    lines = [l for l in lines if l and not l.startswith(tuple(t + ": rps=" for t in TESTS))]
    bad = [l for l in (lines + err.splitlines()) if re.search(r"error|warn", l, re.I)]
    # "WARNING: Could not fetch server CONFIG" means CONFIG GET save/appendonly failed
    assert bad == [], bad
    return lines


@pytest.mark.parametrize("extra", [[], ["-P", "16"]], ids=["plain", "pipelined16"])
def test_benchmark_quiet(server, extra):
    lines = bench(server, "-q", *extra)
    for t in TESTS:
        found = [l for l in lines if l.startswith(t + ": ") and "requests per second" in l]
        assert len(found) == 1, (t, lines)
        rps = float(found[0].split(": ", 1)[1].split()[0])
        assert rps > 0


def test_benchmark_csv(server):
    lines = bench(server, "--csv")
    rows = list(csv.DictReader(io.StringIO("\n".join(lines))))
    assert [r["test"] for r in rows] == TESTS
    for r in rows:
        assert float(r["rps"]) > 0
        assert float(r["max_latency_ms"]) >= float(r["min_latency_ms"]) >= 0
    with RespConn.to(server) as c:
        assert c.call("DBSIZE") > 0
