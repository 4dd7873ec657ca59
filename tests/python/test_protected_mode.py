"""Protected mode: a node refuses to start when a port other hosts can
reach (here: bound to 0.0.0.0) asks them for no proof, naming the port and
what would protect it; with that protection, or `protected_mode = false`,
it starts. (Nothing is sent to other hosts: the refused node never
listens, the started ones are only asked PING over loopback.)"""
import socket
import subprocess
import time

import pytest

from conftest import binary, free_port

pytestmark = pytest.mark.deltagrid_only


def start(tmp_path, config, *flags):
    """Runs `deltagrid server` with `config` (TOML, [node] keys unless the
    text starts a section); returns (process, log path)."""
    d = tmp_path / f"n{free_port()}"
    d.mkdir()
    cfg = d / "node.toml"
    cfg.write_text(config)
    log = d / "server.log"
    with open(log, "wb") as out:
        p = subprocess.Popen([binary(), "server", "--config", str(cfg), "--data-dir", str(d / "data"),
                              "--persistence", "off", *flags], stdout=out, stderr=subprocess.STDOUT)
    return p, log


def refused(tmp_path, config, *flags):
    p, log = start(tmp_path, config, *flags)
    try:
        assert p.wait(timeout=30) != 0, "the node started"
    finally:
        if p.poll() is None:
            p.kill()
    return log.read_text()


def serves(tmp_path, config, port, *flags):
    p, log = start(tmp_path, config, *flags)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            assert p.poll() is None, log.read_text()
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.5) as s:
                    s.sendall(b"PING\r\n")
                    if s.recv(64).startswith((b"+PONG", b"-NOAUTH")):
                        return
            except OSError:
                time.sleep(0.05)
        pytest.fail(f"the node did not start: {log.read_text()}")
    finally:
        p.kill()
        p.wait()


def node(port, admin=None, extra=""):
    admin = admin or free_port()
    return f'[node]\nlisten = "0.0.0.0:{port}"\nadmin_listen = "127.0.0.1:{admin}"\n{extra}'


def test_a_client_port_open_to_other_hosts_needs_a_password(tmp_path):
    port = free_port()
    text = refused(tmp_path, node(port))
    assert "protected mode" in text and f"listen 0.0.0.0:{port}" in text and "requirepass" in text, text
    serves(tmp_path, node(port, extra='requirepass = "s3cret"\n'), port)
    port = free_port()
    serves(tmp_path, node(port), port, "--protected-mode", "no")
    port = free_port()
    serves(tmp_path, node(port, extra="protected_mode = false\n"), port)


def test_an_aclfile_whose_default_user_has_a_password_protects_the_port(tmp_path):
    users = tmp_path / "users.acl"
    users.write_text("user default on >pw ~* &* +@all\n")
    port = free_port()
    serves(tmp_path, node(port, extra=f'aclfile = "{users}"\n'), port)
    users.write_text("user default on nopass ~* &* +@all\n")
    assert "protected mode" in refused(tmp_path, node(free_port(), extra=f'aclfile = "{users}"\n'))


def test_an_admin_port_open_to_other_hosts_needs_a_token(tmp_path):
    port, admin = free_port(), free_port()
    config = f'[node]\nlisten = "127.0.0.1:{port}"\nadmin_listen = "0.0.0.0:{admin}"\n'
    text = refused(tmp_path, config)
    assert f"admin_listen 0.0.0.0:{admin}" in text and "admin_token" in text, text
    serves(tmp_path, config + 'admin_token = "t"\n', port)


def test_a_site_or_wan_port_open_to_other_hosts_needs_its_secret(tmp_path):
    port, cport, wport = free_port(), free_port(), free_port()
    base = (f'[node]\nid = "n1"\nlisten = "127.0.0.1:{port}"\nadmin_listen = "127.0.0.1:{free_port()}"\n'
            f'cluster_listen = "0.0.0.0:{cport}"\n'
            f'[site]\nid = 1\nname = "a"\nseeds = ["127.0.0.1:{cport}"]\n')
    text = refused(tmp_path, base)
    assert f"cluster_listen 0.0.0.0:{cport}" in text and "secret" in text, text
    wan = (f'[node]\nlisten = "127.0.0.1:{port}"\nadmin_listen = "127.0.0.1:{free_port()}"\n'
           f'[site]\nid = 1\nname = "a"\n[wan]\nlisten = "0.0.0.0:{wport}"\n')
    text = refused(tmp_path, wan)
    assert f"[wan] listen 0.0.0.0:{wport}" in text and "secret" in text, text
    serves(tmp_path, wan.replace("[wan]\n", '[wan]\nsecret = "w"\n'), port)
