"""ACL users in a site of three nodes: users are held in the site's
metadata, so a change made on one node holds on every node by the time the
client hears OK, changes made at once on two nodes both take effect, a
deleted user's connections end on every node, and a node killed with -9
and restarted on its data directory comes back with the users."""
import threading

import pytest

from helpers import wait_until
from helpers_net import RespConn
from helpers_wan import WanSite

pytestmark = pytest.mark.deltagrid_only


def conn(node):
    return RespConn("127.0.0.1", node.port)


def cmd(node, *args):
    with conn(node) as c:
        return c.cmd(*args)


@pytest.fixture
def site(tmp_path):
    s = WanSite(tmp_path, 1, "acl", size=3).start()
    yield s
    s.stop()


def test_a_user_created_on_one_node_holds_on_every_node_at_once(site):
    a, b, c = site.nodes
    assert cmd(a, "ACL", "SETUSER", "app", "on", ">pw", "~app:*", "+@read") == b"+OK\r\n"
    # No waiting: the OK came after every member had it.
    listed = cmd(a, "ACL", "LIST")
    for node in (b, c):
        assert cmd(node, "ACL", "LIST") == listed
        with conn(node) as x:
            assert x.cmd("AUTH", "app", "pw") == b"+OK\r\n"
            assert x.cmd("ACL", "WHOAMI").startswith(b"-NOPERM")
            assert x.cmd("GET", "other:1").startswith(b"-NOPERM this user has no permissions to access one of the keys")
            assert x.cmd("SET", "app:1", "v") == b"-NOPERM this user has no permissions to run the 'set' command\r\n"
            assert x.cmd("FLUSHALL").startswith(b"-NOPERM")
            # A read of its own keys is allowed (served here or redirected).
            got = x.cmd("GET", "app:1")
            assert got == b"$-1\r\n" or got.startswith(b"-MOVED"), got


def test_changes_made_at_once_on_two_nodes_both_take_effect(site):
    a, b, c = site.nodes
    errors = []

    def make(node, prefix):
        with conn(node) as x:
            for i in range(20):
                r = x.cmd("ACL", "SETUSER", f"{prefix}{i}", "on", "nopass", "+get")
                if r != b"+OK\r\n":
                    errors.append(r)

    threads = [threading.Thread(target=make, args=(n, p)) for n, p in ((a, "a"), (b, "b"))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    # (WanSite's nodes start with `default` and `backup` from their aclfile.)
    want = sorted([b"backup", b"default"] + [f"{p}{i}".encode() for p in "ab" for i in range(20)])
    for node in site.nodes:
        with conn(node) as x:
            users = x.call("ACL", "USERS")
        assert sorted(users) == want


def test_deleting_a_user_on_one_node_ends_its_connections_on_every_node(site):
    a, b, c = site.nodes
    assert cmd(a, "ACL", "SETUSER", "temp", "on", ">pw", "+@all", "~*") == b"+OK\r\n"
    logged_in = []
    for node in site.nodes:
        x = conn(node)
        assert x.cmd("AUTH", "temp", "pw") == b"+OK\r\n"
        logged_in.append(x)
    assert cmd(b, "ACL", "DELUSER", "temp") == b":1\r\n"
    for x in logged_in:
        x.expect_closed()
        x.close()
    for node in site.nodes:
        with conn(node) as x:
            assert x.cmd("AUTH", "temp", "pw").startswith(b"-WRONGPASS")


def test_a_node_killed_and_restarted_on_its_data_comes_back_with_the_users(site):
    a, b, c = site.nodes
    assert cmd(a, "ACL", "SETUSER", "keeper", "on", ">pw", "~k:*", "+get") == b"+OK\r\n"
    assert cmd(a, "ACL", "SETUSER", "default", "on", ">adminpw") == b"+OK\r\n"
    site.kill_node(1)
    # Changed while it was away.
    with conn(a) as x:
        assert x.cmd("AUTH", "adminpw") == b"+OK\r\n"
        assert x.cmd("ACL", "SETUSER", "later", "on", ">pw2", "+ping") == b"+OK\r\n"
    restarted = site.start_node(1, same_dir=True)

    def users():
        with conn(restarted) as x:
            if x.cmd("AUTH", "adminpw") != b"+OK\r\n":
                return None
            return sorted(x.call("ACL", "USERS"))
    wait_until(lambda: users() == [b"backup", b"default", b"keeper", b"later"], timeout=30,
               message="the restarted node has the site's users")
    with conn(restarted) as x:
        assert x.cmd("AUTH", "keeper", "pw") == b"+OK\r\n"
        assert x.cmd("AUTH", "later", "pw2") == b"+OK\r\n"
        assert x.cmd("AUTH", "default", "nothing").startswith(b"-WRONGPASS")
