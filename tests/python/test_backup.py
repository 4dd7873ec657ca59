"""Backups to storage (`deltagrid backup create|list|verify|restore`):
base + incremental layers of real nodes and sites, written to a directory
or to an S3-compatible endpoint (moto on loopback), restored newest-first
and base-first into fresh nodes, compared by a digest of keys, values and
absolute expiry times."""
import json
import os
import random
import socket
import subprocess
import sys
import threading
import time

import pytest
import redis

from conftest import Server, binary, free_port
from helpers import wait_until
from helpers_net import RespConn, RespError
from helpers_wan import BACKUP_ENV, WanSite, backup_users, digest as site_digest, wait_failed_over

pytestmark = pytest.mark.deltagrid_only

PARTITIONS = 271


@pytest.fixture
def make_server(make_server, tmp_path):
    """conftest's make_server, with backups allowed under the test's
    directory and at the S3 fixture's prefix (nothing else)."""
    allow = ["--backup-allowed-url", f"file://{tmp_path}", "--backup-allowed-url", "s3://backups/site1",
             "--aclfile", str(backup_users(tmp_path))]

    def start(extra_args=(), config=None):
        return make_server(extra_args=[*allow, *extra_args], config=config)
    return start


def run(*args, env=None, check=True):
    """Runs `deltagrid *args`; the CompletedProcess (text)."""
    p = subprocess.run([binary(), *args], capture_output=True, text=True, timeout=120,
                       env={**os.environ, "RUST_BACKTRACE": "0", **BACKUP_ENV, **(env or {})})
    if check and p.returncode != 0:
        raise AssertionError(f"deltagrid {' '.join(args)} exited {p.returncode}:\n{p.stdout}\n{p.stderr}")
    return p


def admin(server):
    return f"127.0.0.1:{server.admin_port}"


def create(server, url, incremental=False, chunk_bytes=None):
    args = ["backup", "create", "--admin", admin(server), "--to", url]
    if incremental:
        args.append("--incremental")
    if chunk_bytes:
        args += ["--chunk-bytes", str(chunk_bytes)]
    out = run(*args).stdout
    # "backup ID: full|incremental ..."
    return out.split()[1].rstrip(":")


def restore(server, url, tmp_path, backup=None, order="reverse", check=True):
    summary = tmp_path / f"restore-{time.monotonic_ns()}.json"
    args = ["backup", "restore", "--admin", admin(server), "--from", url, "--order", order, "--json", str(summary)]
    if backup:
        args += ["--backup", backup]
    p = run(*args, check=check)
    return (json.loads(summary.read_text()) if p.returncode == 0 else None), p


def digest(server):
    """{key: (type, value, absolute expiry ms or -1)} of one node."""
    r = redis.Redis(port=server.port)
    out = {}
    for k in r.scan_iter(count=1000):
        t = r.type(k).decode()
        read = {"string": r.get, "hash": lambda k: tuple(sorted(r.hgetall(k).items())),
                "set": lambda k: tuple(sorted(r.smembers(k))),
                "zset": lambda k: tuple(r.zrange(k, 0, -1, withscores=True))}
        out[k] = (t, read[t](k), r.pexpiretime(k))
    return out


def workload_round(r, rng, n_keys, ops):
    """Sets (some with a long TTL), hash field updates, set and sorted-set
    members, counters, bits and HLLs, deletes, and keys given a TTL short
    enough to run out before the next backup."""
    for _ in range(ops):
        k = f"k{rng.randrange(n_keys)}"
        op = rng.random()
        if op < 0.35:
            if rng.random() < 0.2:
                r.set(k, rng.randbytes(rng.randrange(1, 300)), ex=3600)
            else:
                r.set(k, rng.randbytes(rng.randrange(1, 300)))
        elif op < 0.65:
            h = f"h{rng.randrange(n_keys // 4)}"
            try:
                r.hset(h, mapping={f"f{rng.randrange(8)}": rng.randbytes(rng.randrange(1, 40)) for _ in range(rng.randrange(1, 4))})
            except redis.ResponseError:
                pass
        elif op < 0.72:
            # the other types: sets, sorted sets, counters, bitmaps, HLLs
            n = rng.randrange(n_keys // 4)
            kind = rng.randrange(6)
            try:
                if kind == 0:
                    r.sadd(f"s{n}", *[f"m{rng.randrange(20)}" for _ in range(rng.randrange(1, 4))])
                elif kind == 1:
                    r.srem(f"s{n}", f"m{rng.randrange(20)}")
                elif kind == 2:
                    r.zadd(f"z{n}", {f"m{rng.randrange(20)}": rng.randrange(-50, 50)})
                elif kind == 3:
                    r.zincrby(f"z{n}", rng.randrange(1, 5), f"m{rng.randrange(20)}")
                elif kind == 4:
                    r.incrby(f"c{n}", rng.randrange(-9, 10))
                else:
                    r.setbit(f"b{n}", rng.randrange(2000), 1)
                    r.pfadd(f"p{n}", *[str(rng.randrange(100000)) for _ in range(5)])
            except redis.ResponseError:
                pass
        elif op < 0.85:
            n = rng.randrange(n_keys // 4)
            r.delete(k, f"h{n}", f"s{n}", f"z{n}")
        elif op < 0.95:
            r.pexpire(k, 30)
        else:
            r.expire(k, 7200)
    time.sleep(0.05)  # the 30 ms TTLs run out before the backup


def test_full_and_five_incrementals_restore_exactly_reverse_and_forward(make_server, tmp_path):
    url = f"file://{tmp_path}/store"
    src = make_server()
    r = redis.Redis(port=src.port)
    rng = random.Random(7)
    ids, digests = [], []
    for i in range(6):
        workload_round(r, rng, n_keys=600, ops=1500 if i == 0 else rng.choice([60, 300, 900]))
        ids.append(create(src, url, incremental=i > 0, chunk_bytes=4096))
        digests.append(digest(src))
    assert all(digests), "the workload left keys"

    listing = run("backup", "list", "--from", url).stdout
    for i, bid in enumerate(ids):
        assert bid in listing
    assert listing.count("incremental") == 5 and listing.count("full") == 1, listing
    assert "ok (6 layers" in run("backup", "verify", "--from", url).stdout

    # Newest first: exactly the contents at the last backup, each live key applied once.
    dst = make_server()
    summary, _ = restore(dst, url, tmp_path)
    assert digest(dst) == digests[-1]
    assert summary["keys_applied"] == len(digests[-1]), summary
    assert [l["id"] for l in summary["layers"]] == ids[::-1]
    assert summary["blocks_skipped"] > 0, "some older blocks hold only keys newer layers settled"

    # Base first: the same contents, applying every layer in full.
    fwd = make_server()
    fsummary, _ = restore(fwd, url, tmp_path, order="forward")
    assert digest(fwd) == digests[-1]
    assert fsummary["keys_applied"] > summary["keys_applied"]
    assert fsummary["blocks_skipped"] == 0 and fsummary["chunks_skipped"] == 0

    # An intermediate backup gives the contents at that point.
    mid = make_server()
    msummary, _ = restore(mid, url, tmp_path, backup=ids[2])
    assert digest(mid) == digests[2]
    assert msummary["keys_applied"] == len(digests[2])


def test_a_restore_refuses_a_node_that_holds_keys(make_server, tmp_path):
    url = f"file://{tmp_path}/store"
    src = make_server()
    redis.Redis(port=src.port).set("a", "1")
    create(src, url)
    dst = make_server()
    redis.Redis(port=dst.port).set("mine", "x")
    _, p = restore(dst, url, tmp_path, check=False)
    assert p.returncode != 0 and "restore needs an empty node" in p.stderr
    assert redis.Redis(port=dst.port).get("mine") == b"x"


def test_a_backup_or_restore_outside_allowed_urls_is_refused_and_writes_nothing(make_server, tmp_path):
    src = make_server()
    redis.Redis(port=src.port).set("a", "1")
    outside = tmp_path.parent / f"{tmp_path.name}-outside"
    for url in (f"file://{outside}", f"file://{tmp_path}/../{tmp_path.name}-outside",
                f"file://{tmp_path}/%2e%2e/{tmp_path.name}-outside"):
        p = run("backup", "create", "--admin", admin(src), "--to", url, check=False)
        assert p.returncode != 0 and "is not under [backup] allowed_urls" in p.stderr, p.stderr
        with RespConn.to(src) as c:
            assert c.cmd("AUTH", "backup", "backup") == b"+OK\r\n"
            reply = c.cmd("BACKUPJOB", "CREATE", url, "b1", "-", "65536", "1048576")
        assert reply.startswith(b"-ERR") and b"allowed_urls" in reply, reply
    # (The CLI, run by the operator, may have created the directory itself.)
    assert not outside.exists() or not any(outside.iterdir()), "nothing written outside allowed_urls"
    dst = make_server(extra_args=[])
    # A restore reads only from allowed URLs too.
    with RespConn.to(dst) as c:
        assert c.cmd("AUTH", "backup", "backup") == b"+OK\r\n"
        assert b"allowed_urls" in c.cmd("BACKUPJOB", "RESTORE", "file:///etc", "b1", "reverse")
        # Without +@internal (the default user): refused before anything else.
        assert c.cmd("AUTH", "default", "x") == b"+OK\r\n"
        assert c.cmd("BACKUPJOB", "STATUS").startswith(b"-NOPERM")


def corrupt(path):
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


def three_layers(make_server, store):
    """2,000 keys, a full backup, a third of them changed, an incremental,
    one deleted, another incremental: (source, url, base, mid, top)."""
    url = f"file://{store}"
    src = make_server()
    r = redis.Redis(port=src.port)
    for i in range(2000):
        r.set(f"k{i}", f"v{i}" * 20)
    base = create(src, url)
    for i in range(0, 2000, 3):
        r.set(f"k{i}", "changed")
    mid = create(src, url, incremental=True)
    r.delete("k1")
    top = create(src, url, incremental=True)
    return src, url, base, mid, top


def test_a_damaged_chunk_or_a_missing_layer_fails_naming_the_object(make_server, tmp_path):
    store = tmp_path / "store"
    src, url, base, mid, top = three_layers(make_server, store)

    # A damaged chunk of the base: verify and restore name it; nothing stays restored.
    chunk = sorted((store / base).glob("*.chunk"))[5]
    saved = chunk.read_bytes()
    corrupt(chunk)
    p = run("backup", "verify", "--from", url, check=False)
    assert p.returncode != 0 and chunk.name in p.stderr and "checksum" in p.stderr, p.stderr
    dst = make_server()
    _, p = restore(dst, url, tmp_path, order="forward", check=False)
    assert p.returncode != 0 and chunk.name in p.stderr, p.stderr
    dr = redis.Redis(port=dst.port)
    assert dr.dbsize() == 0, "a failed restore leaves nothing behind"
    assert dr.set("still-usable", "1")  # and the node serves again
    dr.delete("still-usable")
    chunk.write_bytes(saved)

    # A missing chunk is named too.
    victim = sorted((store / mid).glob("*.chunk"))[0]
    victim.rename(victim.with_suffix(".gone"))
    p = run("backup", "verify", "--from", url, check=False)
    assert p.returncode != 0 and victim.name in p.stderr and "missing" in p.stderr, p.stderr
    victim.with_suffix(".gone").rename(victim)

    # A missing layer (its manifest gone) breaks the chain of every later backup.
    (store / mid / "manifest.json").rename(store / mid / "manifest.gone")
    for args in (["backup", "verify", "--from", url, "--backup", top],):
        p = run(*args, check=False)
        assert p.returncode != 0 and f"{mid}/manifest.json" in p.stderr, p.stderr
    _, p = restore(dst, url, tmp_path, backup=top, check=False)
    assert p.returncode != 0 and f"{mid}/manifest.json" in p.stderr, p.stderr
    assert dr.dbsize() == 0
    # The base alone still restores.
    summary, _ = restore(dst, url, tmp_path, backup=base)
    assert dr.dbsize() == 2000 and summary["keys_applied"] == 2000


def test_a_damaged_or_missing_resolved_object_fails_naming_it(make_server, tmp_path):
    """A resolved object decides what a newest-first restore fetches from
    older layers: verify and restore check it and name it when it is bad."""
    store = tmp_path / "store"
    src, url, _, mid, top = three_layers(make_server, store)
    want = digest(src)
    assert len(list((store / top).glob("*.resolved"))) == PARTITIONS

    dst = make_server()
    dr = redis.Redis(port=dst.port)
    victim = sorted((store / top).glob("*.resolved"))[200]
    saved = victim.read_bytes()
    corrupt(victim)
    p = run("backup", "verify", "--from", url, check=False)
    assert p.returncode != 0 and victim.name in p.stderr and "checksum" in p.stderr, p.stderr
    _, p = restore(dst, url, tmp_path, check=False)
    assert p.returncode != 0 and victim.name in p.stderr, p.stderr
    assert dr.dbsize() == 0, "a failed restore leaves nothing behind"

    victim.unlink()
    p = run("backup", "verify", "--from", url, check=False)
    assert p.returncode != 0 and victim.name in p.stderr and "missing" in p.stderr, p.stderr
    _, p = restore(dst, url, tmp_path, check=False)
    assert p.returncode != 0 and victim.name in p.stderr and "missing" in p.stderr, p.stderr
    assert dr.dbsize() == 0
    victim.write_bytes(saved)

    # The middle layer's resolved objects are not read by a restore of the
    # top (the top's name every live entry), but verify checks them.
    (sorted((store / mid).glob("*.resolved"))[0]).unlink()
    p = run("backup", "verify", "--from", url, check=False)
    assert p.returncode != 0 and f"{mid}/p00000.resolved" in p.stderr, p.stderr
    summary, _ = restore(dst, url, tmp_path, backup=top)
    assert digest(dst) == want and summary["keys_applied"] == len(want)


def test_a_backup_of_an_older_format_is_listed_but_not_restored(make_server, tmp_path):
    store = tmp_path / "store"
    url = f"file://{store}"
    src = make_server()
    redis.Redis(port=src.port).set("a", "1")
    old = create(src, url)
    manifest = store / old / "manifest.json"
    m = json.loads(manifest.read_text())
    m["format"] = 1
    manifest.write_text(json.dumps(m))
    assert old in run("backup", "list", "--from", url).stdout
    for args in (["backup", "verify", "--from", url],
                 ["backup", "create", "--admin", admin(src), "--to", url, "--incremental"]):
        p = run(*args, check=False)
        assert p.returncode != 0 and "older deltagrid" in p.stderr and "full backup" in p.stderr, p.stderr
    _, p = restore(make_server(), url, tmp_path, check=False)
    assert p.returncode != 0 and "older deltagrid" in p.stderr, p.stderr
    # A new full backup starts a chain that restores.
    create(src, url)
    summary, _ = restore(make_server(), url, tmp_path)
    assert summary["keys_applied"] == 1


def slot_partition(key):
    from redis.crc import key_slot
    return key_slot(key.encode()) * PARTITIONS // 16384


def test_a_backup_taken_while_writes_continue_is_consistent_per_partition(make_server, tmp_path):
    """One writer per partition writes w:1, w:2, ... in order. A copy
    consistent at a seq holds exactly a prefix, and (one change per write
    on a fresh node) that prefix ends at the seq the manifest records."""
    store = tmp_path / "store"
    url = f"file://{store}"
    src = make_server()
    tags, seen = [], set()
    for i in range(1000):
        tag = f"t{i}"
        p = slot_partition("{" + tag + "}")
        if p not in seen:
            seen.add(p)
            tags.append((tag, p))
        if len(tags) == 4:
            break
    stop = threading.Event()
    acked = {tag: 0 for tag, _ in tags}

    def writer(tag):
        r = redis.Redis(port=src.port)
        n = 0
        while not stop.is_set():
            n += 1
            r.set(f"{{{tag}}}:{n}", n)
            acked[tag] = n

    threads = [threading.Thread(target=writer, args=(tag,)) for tag, _ in tags]
    for t in threads:
        t.start()
    try:
        wait_until(lambda: min(acked.values()) > 200, timeout=20, message="writers got going")
        before = dict(acked)
        bid = create(src, url)
        after = dict(acked)
        wait_until(lambda: min(acked.values()) > max(after.values()) + 50, timeout=20, message="writes continued")
        inc = create(src, url, incremental=True)
    finally:
        stop.set()
        for t in threads:
            t.join()

    for backup, lo, hi in ((bid, before, after), (inc, after, None)):
        manifest = json.loads((store / backup / "manifest.json").read_text())
        dst = make_server()
        restore(dst, url, tmp_path, backup=backup)
        r = redis.Redis(port=dst.port)
        for tag, p in tags:
            got = sorted(int(k.split(b":")[1]) for k in r.scan_iter(match=f"{{{tag}}}:*", count=1000))
            m = len(got)
            assert got == list(range(1, m + 1)), f"{tag}: not a prefix of the writes"
            assert m >= lo[tag] and (hi is None or m <= hi[tag] + 1)
            assert manifest["entries"][p]["seq"] == m, f"{tag}: manifest seq vs keys restored"
        dst.stop()


def test_a_site_backs_up_from_every_primary_and_restores_into_another_site(tmp_path):
    url = f"file://{tmp_path}/store"
    a = WanSite(tmp_path, 1, "src", size=3).start()
    b = WanSite(tmp_path, 2, "dst", size=3)
    b.targets = []
    try:
        rc = redis.RedisCluster(host="127.0.0.1", port=a.ports[0])
        for i in range(1500):
            rc.set(f"key{i}", f"v{i}")
            if i % 3 == 0:
                rc.hset(f"hash{i}", mapping={"f": i, "g": "x"})
        full = create(a.nodes[0], url)
        for i in range(0, 1500, 7):
            rc.set(f"key{i}", "changed")
            rc.delete(f"hash{i}")
        inc = create(a.nodes[1], url, incremental=True)
        manifest = json.loads((tmp_path / "store" / inc / "manifest.json").read_text())
        assert not any(e["full"] for e in manifest["entries"]), "every primary copied only its changes"
        want = site_digest(a)
        b.start()
        summary, _ = restore(b.nodes[2], url, tmp_path)
        assert site_digest(b) == want
        assert summary["keys_applied"] == len(want)
        assert [l["id"] for l in summary["layers"]] == [inc, full]
    finally:
        a.stop()
        b.stop()


# -- S3 ---------------------------------------------------------------------

@pytest.fixture
def s3(tmp_path, monkeypatch):
    """A moto S3 server on loopback with a bucket; the AWS_* variables the
    CLI and the nodes read point at it."""
    pytest.importorskip("moto")
    boto3 = pytest.importorskip("boto3")
    port = free_port()
    log = open(tmp_path / "moto.log", "wb")
    proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                            stdout=log, stderr=subprocess.STDOUT)

    def up():
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return True
        except OSError:
            return False
    try:
        wait_until(up, timeout=20, message="moto_server did not start")
        env = {"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWS_REGION": "us-east-1",
               "AWS_ENDPOINT": f"http://127.0.0.1:{port}", "AWS_ALLOW_HTTP": "true"}
        for k, v in env.items():
            monkeypatch.setenv(k, v)
        boto3.client("s3", endpoint_url=env["AWS_ENDPOINT"], region_name="us-east-1",
                     aws_access_key_id="test", aws_secret_access_key="test").create_bucket(Bucket="backups")
        yield "s3://backups/site1"
    finally:
        proc.terminate()
        proc.wait()
        log.close()


def test_the_same_against_an_s3_endpoint(s3, make_server, tmp_path):
    src = make_server()
    p = run("backup", "list", "--from", s3, check=False)
    if "no S3 support" in p.stderr:
        if os.environ.get("DELTAGRID_REQUIRE_S3") == "1":
            pytest.fail("this deltagrid was built without the s3 feature")
        pytest.skip("deltagrid built without --features s3")
    r = redis.Redis(port=src.port)
    rng = random.Random(11)
    digests, ids = [], []
    for i in range(3):
        workload_round(r, rng, n_keys=300, ops=600 if i == 0 else 150)
        ids.append(create(src, s3, incremental=i > 0, chunk_bytes=4096))
        digests.append(digest(src))
    assert "ok (3 layers" in run("backup", "verify", "--from", s3).stdout
    dst = make_server()
    summary, _ = restore(dst, s3, tmp_path)
    assert digest(dst) == digests[-1]
    assert summary["keys_applied"] == len(digests[-1])


# -- [backup] schedule ---------------------------------------------------------

def backups_at(url):
    """[(id, kind)] oldest first, from `deltagrid backup list`."""
    lines = run("backup", "list", "--from", url).stdout.splitlines()[1:]
    return [(l.split()[0], l.split()[1]) for l in lines if not l.startswith("(")]


def test_a_schedule_takes_full_and_incremental_backups_and_keeps_the_newest_chain(make_server, tmp_path):
    url = f"file://{tmp_path}/store"
    src = make_server(config=f'''
[backup]
to = "{url}"
full_every = "6s"
incremental_every = "2s"
keep_full = 1
''')
    r = redis.Redis(port=src.port)
    for i in range(500):
        r.set(f"k{i}", i)
    wait_until(lambda: any(k == "incremental" for _, k in backups_at(url)), timeout=20,
               message="a scheduled full backup, then an incremental")
    first_full = next(b for b, k in backups_at(url) if k == "full")
    for i in range(0, 500, 2):
        r.set(f"k{i}", "later")
    # The next full backup starts a new chain; retention removes the first.
    wait_until(lambda: first_full not in [b for b, _ in backups_at(url)], timeout=30,
               message="retention removed the first chain after the second full backup")
    kinds = [k for _, k in backups_at(url)]
    assert kinds[0] == "full" and kinds.count("full") == 1, kinds
    r.delete("k1")
    last_write = time.time()
    wait_until(lambda: backups_at(url)[-1][0] > time.strftime("%Y%m%dT%H%M%S", time.gmtime(last_write + 1)),
               timeout=20, message="a scheduled backup after the last write")
    want = digest(src)
    dst = make_server()
    restore(dst, url, tmp_path)
    assert digest(dst) == want


@pytest.mark.parametrize("section, message", [
    ('[backup]\nfull_every = "1h"\n', "needs backup.to"),
    ('[backup]\nto = "file:///tmp/x"\nfull_every = "soon"\n', "backup.full_every"),
    ('[backup]\nto = "file:///tmp/x"\n', "backup.full_every is not"),
    ('[backup]\nto = "ftp://x/y"\nfull_every = "1h"\n', "unsupported scheme"),
    ('[backup]\nevery = "1h"\n', "every"),
])
def test_bad_backup_config_is_refused_naming_the_key(tmp_path, section, message):
    cfg = tmp_path / "bad.toml"
    cfg.write_text(section)
    p = subprocess.run([binary(), "server", "--config", str(cfg), "--listen", f"127.0.0.1:{free_port()}"],
                       capture_output=True, text=True, timeout=30)
    assert p.returncode != 0 and message in p.stderr, p.stderr


def test_after_a_failover_the_promoted_backups_continue_the_incremental_chain(make_server, tmp_path):
    """Backups anchor their changed-keys sets from the BACKUP_TAKEN marker
    on the replication stream, so after kill -9 of a primary the promoted
    copies write only their changes."""
    url = f"file://{tmp_path}/store"
    a = WanSite(tmp_path, 1, "src", size=3).start()
    try:
        rc = redis.RedisCluster(host="127.0.0.1", port=a.ports[0])
        for i in range(1000):
            rc.set(f"key{i}", f"v{i}")
        create(a.nodes[0], url)
        for i in range(0, 1000, 5):
            rc.set(f"key{i}", "before the failover")
        victim = a.nodes[2].port
        a.kill_node(2)
        wait_failed_over(a.ports[0], victim, interval=0.01)
        rc = redis.RedisCluster(host="127.0.0.1", port=a.ports[0])
        for i in range(1, 1000, 5):
            rc.set(f"key{i}", "after the failover")
        rc.delete("key3")
        inc = create(a.nodes[0], url, incremental=True)
        manifest = json.loads((tmp_path / "store" / inc / "manifest.json").read_text())
        assert not any(e["full"] for e in manifest["entries"]), \
            [e["partition"] for e in manifest["entries"] if e["full"]]
        want = site_digest(a)
        dst = make_server()  # a single node with the same partition count takes a site's backup
        summary, _ = restore(dst, url, tmp_path)
        assert site_digest(dst) == want
        assert summary["keys_applied"] == len(want) == 999
    finally:
        a.stop()


def test_a_node_answers_loading_while_it_restores(make_server, tmp_path):
    url = f"file://{tmp_path}/store"
    src = make_server()
    pipe = redis.Redis(port=src.port).pipeline(transaction=False)
    for i in range(100_000):
        pipe.set(f"k{i}", b"v" * 100)
        if i % 5000 == 4999:
            pipe.execute()
    pipe.execute()
    create(src, url)
    dst = make_server()
    r = redis.Redis(port=dst.port)
    cli = subprocess.Popen([binary(), "backup", "restore", "--admin", admin(dst), "--from", url],
                           env={**os.environ, **BACKUP_ENV},
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # A raw connection: redis-py retries LOADING errors by itself.
    replies = set()
    with RespConn.to(dst) as c:
        while cli.poll() is None:
            reply = c.call("GET", "k1")
            if isinstance(reply, RespError):
                assert str(reply).startswith("LOADING") and "restoring a backup" in str(reply), reply
                assert c.call("PING") == "PONG"  # allowed while loading
                replies.add("loading")
            else:
                replies.add("value")
    out, err = cli.communicate()
    assert cli.returncode == 0, err
    assert "loading" in replies, f"no data command was refused while the restore ran: {out}"
    assert r.get("k1") == b"v" * 100 and r.dbsize() == 100_000
