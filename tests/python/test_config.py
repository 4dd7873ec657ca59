"""The TOML config file and the command line: what a node reads at start."""
import os
import subprocess

import pytest
import redis

from conftest import binary, free_port

pytestmark = pytest.mark.deltagrid_only


def run_with_config(tmp_path, text):
    cfg = tmp_path / "bad.toml"
    cfg.write_text(text)
    return subprocess.run([binary(), "server", "--config", str(cfg)],
                          capture_output=True, text=True, timeout=30)


@pytest.mark.parametrize("text,named", [
    ('[node]\nlisten_addr = "127.0.0.1:1"\n', "listen_addr"),
    ('[nodes]\nid = "x"\n', "nodes"),
    ('[node]\nmaxmemory = "lots"\n', "lots"),
    ('[site]\npartitions = 20000\n', "partitions"),
    ('[wan]\nsecret = ""\n', "wan.secret"),
    ('[node]\ncluster_listen = "127.0.0.1:1"\n[site]\nseeds = ["127.0.0.1:1"]\nsecret = ""\n', "site.secret"),
])
def test_bad_config_names_the_key_and_exits_nonzero(tmp_path, text, named):
    r = run_with_config(tmp_path, text)
    assert r.returncode != 0
    assert named in r.stderr, r.stderr


def test_config_file_settings_take_effect(make_server):
    port = free_port()
    srv = make_server(config=f'''
[node]
id = "n7"
listen = "127.0.0.1:{port}"
maxmemory = "64MiB"
requirepass = "pw"
[site]
id = 3
name = "london"
partitions = 16
''')
    # The harness's --listen flag overrides the file's listen address.
    c = redis.Redis(port=srv.port, password="pw")
    assert c.ping()
    info = c.info("server")
    assert info["node_id"] == "n7" and info["site_name"] == "london" and info["partitions"] == 16
    assert c.config_get("maxmemory") == {"maxmemory": str(64 << 20)}


def test_version_and_help():
    out = subprocess.run([binary(), "--version"], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0 and out.stdout.startswith("deltagrid ")
    out = subprocess.run([binary(), "--help"], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0 and "server" in out.stdout


@pytest.mark.parametrize("how", ["flag", "config"])
def test_threads_sets_the_worker_count(make_server, how):
    if how == "flag":
        srv = make_server(extra_args=["--threads", "3"])
    else:
        srv = make_server(config="[node]\nthreads = 3\n")
    c = redis.Redis(port=srv.port)
    assert c.info("server")["threads"] == 3
    default = make_server()
    assert redis.Redis(port=default.port).info("server")["threads"] == len(os.sched_getaffinity(0))
