"""Two sites of three nodes replicating both ways while writers run at
both and nodes are killed (`kill -9`) and restarted at either site, with
publishers paused now and then so that kills meet a backlog. Afterwards:
both sites hold the same contents (digest of every key, value and TTL),
and every write a client got an acknowledgement for is there at both,
including the fields both sites wrote into the same hashes and the
deletes, the members both sites added to the same sets and sorted sets,
and every increment of the counters both sites increment (they must sum:
INCR, INCRBYFLOAT and ZINCRBY of the same members).
Both sites also overwrite parts of the same strings, so deltas meet other
bases and full values are asked for while nodes die. Both set bits of the
same bitmaps (SETBIT 1, which merges by OR: every acknowledged bit must
be set at both), and set and clear bits of other shared bitmaps (SETBIT
0 is an assignment: only convergence is checked there). BITFIELD does
not merge and is left out. Each writer pushes onto a list of its own
(every acknowledged element must be there, in order) and onto lists both
sites push to (a list merges as a whole value, last writer wins: only
convergence is checked there).

`CHAOS_ROUNDS` (default 4: two kills per site) and `CHAOS_SEED` make it
longer or another sequence: `CHAOS_ROUNDS=40 pytest test_wan_chaos.py`;
`CHAOS_SITES=3` adds a third site (tokyo) to the mesh, with a writer."""
import contextlib
import os
import random
import threading
import time

import pytest
from redis.cluster import RedisCluster

from helpers import wait_until
from helpers_net import http_json
from helpers_wan import (WanSite, cluster_info, digest, digest_diff, link_all, source_status, wait_converged, wan_control,
                         wait_state)

pytestmark = pytest.mark.deltagrid_only

SHARED_HASHES = 16
SHARED_STRINGS = 8
SHARED_SETS = 8
SHARED_COUNTERS = 4
SHARED_BITMAPS = 4
SHARED_LISTS = 4


class Writer(threading.Thread):
    """Writes through a cluster client of one site until stopped: unique
    keys (SET), fields of hashes the other site writes too (HSET), deletes
    of keys it set before (DEL), parts of strings the other site
    overwrites too (SETRANGE), and bits of bitmaps the other site sets
    (and clears) too (SETBIT). Remembers what was acknowledged;
    an operation that failed has an unknown outcome and is left out."""

    def __init__(self, site, prefix, seed):
        super().__init__(daemon=True)
        self.site, self.prefix = site, prefix
        self.rng = random.Random(seed)
        self.stop = threading.Event()
        self.values = {}    # key -> value, acknowledged SETs not deleted since
        self.keys = []      # the same keys, to pick one to delete
        self.deleted = set()  # keys whose DEL was acknowledged
        self.fields = {}    # (hash, field) -> value
        self.members = {}   # (set or sorted set, member) -> score (None: a set)
        self.increments = {}  # counter -> [acknowledged, attempted]
        self.score_increments = {}  # (sorted set, member) -> [acknowledged, attempted]
        self.bits = set()   # (bitmap, offset) of acknowledged SETBIT 1s on the bitmaps only ever raised
        self.pushed = []    # acknowledged RPUSHes onto the writer's own list, in order
        self.unknown = set()  # keys a failed DEL may or may not have removed
        self.missed = []    # keys a DEL did not find though their SET was acknowledged
        self.acked = 0
        self.errors = 0

    def client(self):
        port = self.rng.choice([n.port for n in self.site.live])
        return RedisCluster(host="127.0.0.1", port=port, socket_timeout=8)

    def run(self):
        rc, i = None, 0
        while not self.stop.is_set():
            i += 1
            try:
                rc = rc or self.client()
                self.one(rc, i)
                self.acked += 1
            except Exception:  # outcome unknown; a new client finds the live nodes
                self.errors += 1
                rc = None
                time.sleep(0.05)

    def one(self, rc, i):
        op = i % 9
        if op == 6:
            # Sets and sorted sets both sites add members to.
            key, m = f"shared:set{i % SHARED_SETS}", f"{self.prefix}:{i}"
            rc.sadd(key, m)
            self.members[(key, m)] = None
        elif op == 7:
            key, m = f"shared:z{i % SHARED_SETS}", f"{self.prefix}:{i}"
            rc.zadd(key, {m: i})
            self.members[(key, m)] = float(i)
        elif op == 8 and (i // 9) % 3 == 2:
            # Scores both sites increment: they must sum.
            key = f"shared:zc{i % SHARED_COUNTERS}"
            counts = self.score_increments.setdefault((key, "m"), [0, 0])
            counts[1] += 1
            rc.zincrby(key, 1, "m")
            counts[0] += 1
        elif op == 8:
            # Counters both sites increment (INCR, INCRBYFLOAT by 1): they
            # must sum.
            key = f"shared:c{i % SHARED_COUNTERS}"
            counts = self.increments.setdefault(key, [0, 0])
            counts[1] += 1
            if (i // 9) % 3 == 0:
                rc.incr(key)
            else:
                rc.incrbyfloat(key, 1)
            counts[0] += 1
        elif op == 5:
            # Both sites overwrite parts of the same strings: a delta often
            # reaches a site holding another base, which asks for the full
            # value (only convergence is checked for these).
            rc.setrange(f"shared:s{i % SHARED_STRINGS}", self.rng.randrange(0, 1000, 12), f"{self.prefix}:{i:08d}"[-12:])
        elif op == 4 and self.values:
            at = self.rng.randrange(len(self.keys))
            self.keys[at], self.keys[-1] = self.keys[-1], self.keys[at]
            key = self.keys.pop()
            del self.values[key]
            self.unknown.add(key)  # until the reply says
            if rc.delete(key) != 1:
                self.missed.append(key)  # its SET was acknowledged
            self.deleted.add(key)
            self.unknown.discard(key)
        elif op == 2 and (i // 9) % 2 == 0:
            # Bitmaps both sites set bits of: those only ever SETBIT 1
            # (created before the writers start, so that the SETBITs are
            # raises of one assignment) keep every acknowledged bit; on the
            # others SETBIT 0 clears too (only convergence is checked).
            if (i // 18) % 2 == 0:
                key, offset = f"shared:b{i % SHARED_BITMAPS}", self.rng.randrange(2048)
                rc.setbit(key, offset, 1)
                self.bits.add((key, offset))
            else:
                rc.setbit(f"shared:bx{i % SHARED_BITMAPS}", self.rng.randrange(256), self.rng.randrange(2))
        elif op == 1 and (i // 9) % 2 == 0:
            # A list of its own (every acknowledged push kept, in order) and
            # lists both sites push to (whole values: convergence only).
            if (i // 18) % 2 == 0:
                rc.rpush(f"{self.prefix}:list", str(i))
                self.pushed.append(str(i))
            else:
                rc.lpush(f"shared:l{i % SHARED_LISTS}", f"{self.prefix}:{i}")
        elif op == 3:
            h, f, v = f"shared:{i % SHARED_HASHES}", f"{self.prefix}:{i}", f"v{i}"
            rc.hset(h, f, v)
            self.fields[(h, f)] = v
        else:
            key, v = f"{self.prefix}:{i}", f"v{i}"
            assert rc.set(key, v)
            self.values[key] = v
            self.keys.append(key)


def judged(ws):
    """Distinct acknowledged writes the writers' ledgers hold now."""
    return sum(len(w.values) + len(w.fields) + len(w.members) for w in ws)


@contextlib.contextmanager
def writers(sites_and_prefixes, seed):
    ws = [Writer(site, prefix, seed + k) for k, (site, prefix) in enumerate(sites_and_prefixes)]
    for w in ws:
        w.start()
    try:
        yield ws
    finally:
        for w in ws:
            w.stop.set()
        for w in ws:
            w.join(timeout=60)
            assert not w.is_alive(), f"writer {w.prefix} did not stop"


def members(node):
    """node id -> member row of /status as `node` sees the site."""
    return {m["node_id"]: m for m in http_json("127.0.0.1", node.admin_port, "/status")["cluster"]["members"]}


def all_backed_up(node, partitions=271):
    rows = [m for m in members(node).values() if m["state"] == "active"]
    return sum(m["in_sync"] for m in rows) == partitions and sum(m["primaries"] for m in rows) == partitions


def kill_and_restart(site, i, progress):
    """kill -9 node i of `site`; once the site failed over (writes go on,
    every partition has a primary and an in-sync backup again), restarts
    it on its data directory and waits until it is active again."""
    name = f"{site.name}-n{i + 1}"
    site.kill_node(i)
    observer = site.live[0]
    wait_until(lambda: members(observer)[name]["state"] == "dead", timeout=30,
               message=f"{name} never marked dead")
    at = progress()
    wait_until(lambda: progress() > at + 100, timeout=30, message=f"writes did not resume after {name} died")
    wait_until(lambda: all_backed_up(observer), timeout=60, message=f"backups not rebuilt after {name} died")
    site.start_node(i, same_dir=True)
    wait_until(lambda: members(observer)[name]["state"] == "active" and members(observer)[name]["connected"],
               timeout=60, message=f"{name} did not come back active")
    wait_until(lambda: all_backed_up(observer), timeout=60, message=f"backups not rebuilt after {name} came back")


def explain_divergence(a, b, ws):
    """Prints, for keys on which the sites differ, what the writers know."""
    da, db = digest(a), digest(b)
    for k in digest_diff(da, db)[:20]:
        key = k.decode()
        x, y = da.get(k), db.get(k)
        if x and y and x[0] == y[0] == "hash":
            fx, fy = dict(x[1]), dict(y[1])
            fields = sorted(f for f in set(fx) | set(fy) if fx.get(f) != fy.get(f))
            print(f"DIFF {key} fields: " + ", ".join(f"{f!r}: {fx.get(f)!r} vs {fy.get(f)!r}" for f in fields[:10]))
            continue
        known = [(w.prefix, w.values.get(key), key in w.deleted, key in w.unknown) for w in ws
                 if key.startswith(w.prefix + ":")]
        print(f"DIFF {key}: {a.name} {x!r:.60} {b.name} {y!r:.60} writer (set, deleted, delete unknown) {known}")


def lost_writes(ws, contents):
    """What the writers `ws` had acknowledged that `contents` (a digest)
    does not hold, or holds wrong; counters must lie between the
    acknowledged and the attempted increments."""
    lost = []
    for w in ws:
        for key, v in w.values.items():
            if contents.get(key.encode(), (None, None))[1] != v.encode():
                lost.append((key, v, contents.get(key.encode())))
        for key in w.deleted - w.unknown:
            if key.encode() in contents:
                lost.append((key, "deleted", contents[key.encode()]))
        for (h, f), v in w.fields.items():
            held = dict(contents.get(h.encode(), (None, ()))[1])
            if held.get(f.encode()) != v.encode():
                lost.append((h, f, v))
        lost += [(key, "not there to delete") for key in w.missed]
        for (key, m), score in w.members.items():
            kind, held, _ = contents.get(key.encode(), (None, (), None))
            if kind == "set" and m.encode() in held:
                continue
            if kind == "zset" and (m.encode(), score) in held:
                continue
            lost.append((key, m, score))
        held = iter(contents.get(f"{w.prefix}:list".encode(), (None, ()))[1])
        # Acknowledged pushes in order; an unacknowledged one may be between.
        if not all(any(x == e.encode() for x in held) for e in w.pushed):
            lost.append((f"{w.prefix}:list", "pushes", len(w.pushed)))
        for key, offset in w.bits:
            held = contents.get(key.encode(), (None, b""))[1]
            if not (offset // 8 < len(held) and held[offset // 8] >> (7 - offset % 8) & 1):
                lost.append((key, "bit", offset))
    # Counters: every acknowledged increment of every writer, at most
    # the attempted ones (a reply lost to a kill may have applied).
    for key in {k for w in ws for k in w.increments}:
        acked_n = sum(w.increments.get(key, [0, 0])[0] for w in ws)
        tried_n = sum(w.increments.get(key, [0, 0])[1] for w in ws)
        value = int(contents.get(key.encode(), (None, b"0"))[1])
        if not acked_n <= value <= tried_n:
            lost.append((key, "counter", acked_n, value, tried_n))
    for key, m in {k for w in ws for k in w.score_increments}:
        acked_n = sum(w.score_increments.get((key, m), [0, 0])[0] for w in ws)
        tried_n = sum(w.score_increments.get((key, m), [0, 0])[1] for w in ws)
        score = dict(contents.get(key.encode(), (None, ()))[1]).get(m.encode(), 0.0)
        if not acked_n <= score <= tried_n:
            lost.append((key, m, "score", acked_n, score, tried_n))
    return lost


def test_kills_at_both_sites_under_writes_lose_nothing_and_the_sites_converge(tmp_path):
    rounds = int(os.environ.get("CHAOS_ROUNDS", "4"))
    seed = int(os.environ.get("CHAOS_SEED", "7"))
    names = [("london", "lon"), ("newyork", "nyc"), ("tokyo", "tyo")][:int(os.environ.get("CHAOS_SITES", "2"))]
    sites = [WanSite(tmp_path, i + 1, name, size=3) for i, (name, _) in enumerate(names)]
    link_all(sites)
    try:
        for site in sites:
            site.start()
        # The bitmaps only ever raised exist at every site first: SETBIT 1
        # creating a key is an assignment (one of two concurrent ones wins).
        first = RedisCluster(host="127.0.0.1", port=sites[0].live[0].port, socket_timeout=8)
        for n in range(SHARED_BITMAPS):
            first.set(f"shared:b{n}", b"\x00")
        first.close()
        wait_converged(sites, timeout=60, min_keys=SHARED_BITMAPS)
        who = [(sites[0], "lon0"), (sites[0], "lon1")] + [(site, f"{p}0") for site, (_, p) in zip(sites[1:], names[1:])]
        with writers(who, seed) as ws:
            def progress(site):
                return lambda: sum(w.acked for w in ws if w.site is site)
            wait_until(lambda: all(w.acked > 50 for w in ws), timeout=30, message="writers got going")
            for r in range(rounds):
                site = sites[r % len(sites)]
                others = [o for o in sites if o is not site]
                # Kills take turns between the sites and go round their
                # nodes; every other pair of kills meets a backlog (the
                # site's publishers hold their changes until after the
                # restart).
                paused = (r // 2) % 2 == 0
                if paused:
                    for n in site.live:
                        for o in others:
                            wan_control(n, "pause", o.name)
                    for n in site.live:
                        for o in others:
                            wait_state(n, o.name, "paused")
                    at = progress(site)()
                    wait_until(lambda: progress(site)() > at + 200, timeout=30, message="a backlog formed")
                kill_and_restart(site, (r // len(sites) + seed) % 3, progress(site))
                if paused:
                    for n in site.live:
                        for o in others:
                            wan_control(n, "resume", o.name)
                print(f"round {r}: {site.name}, paused {paused}, acked {[w.acked for w in ws]}, "
                      f"errors {[w.errors for w in ws]}, {time.strftime('%X')}")
            written = sum(w.acked for w in ws)
            wait_until(lambda: sum(w.acked for w in ws) > written + 200, timeout=30,
                       message="writes did not go on after the last restart")
        try:
            contents = wait_converged(sites, timeout=120)
        except BaseException:
            for other in sites[1:]:
                explain_divergence(sites[0], other, ws)
            raise
        errors = sum(w.errors for w in ws)
        lost = lost_writes(ws, contents)
        acked = sum(len(w.values) + len(w.deleted) + len(w.fields) + len(w.members) + len(w.bits) for w in ws)
        assert acked > 1000, f"too few writes to judge: {acked} (errors {errors})"
        assert all(w.bits for w in ws), "a writer set no bit of the shared bitmaps"
        assert all(w.pushed for w in ws), "a writer pushed onto no list"
        assert not lost, f"{len(lost)} of {acked} acknowledged writes missing or wrong, e.g. {lost[:5]}"
        # The shared strings made sites ask for full values (counters of
        # the nodes that were not restarted since).
        asked = sum(source_status(n, other.name)["need_full"]
                    for site in sites for other in sites if other is not site for n in site.live)
        assert asked > 0, "no delta met another base: the full-value path went untested"
    finally:
        for site in sites:
            site.stop()


def test_a_whole_site_killed_with_a_backlog_both_ways_restarts_from_disk_and_converges(tmp_path):
    """Persistence across sites: both sites' publishers are paused so that
    changes wait both ways, then every node of london is killed with -9
    and started again on its data directory (fsync = "always"). London
    comes back with its data; the sites converge, every acknowledged write
    is at both, and no change was applied twice (counters and ZINCRBY
    scores at most what was attempted)."""
    settings = ['fsync = "always"']
    london = WanSite(tmp_path, 1, "london", size=3, node_settings=settings)
    newyork = WanSite(tmp_path, 2, "newyork", size=3, node_settings=settings)
    sites = [london, newyork]
    link_all(sites)
    try:
        for site in sites:
            site.start()
        first = RedisCluster(host="127.0.0.1", port=london.live[0].port, socket_timeout=8)
        for n in range(SHARED_BITMAPS):
            first.set(f"shared:b{n}", b"\x00")
        first.close()
        wait_converged(sites, timeout=60, min_keys=SHARED_BITMAPS)
        with writers([(london, "lon0"), (london, "lon1"), (newyork, "nyc0")], 11) as ws:
            def progress(site):
                return lambda: sum(w.acked for w in ws if w.site is site)
            wait_until(lambda: all(w.acked > 50 for w in ws), timeout=30, message="writers got going")
            for site, other in ((london, newyork), (newyork, london)):
                for n in site.live:
                    wan_control(n, "pause", other.name)
                for n in site.live:
                    wait_state(n, other.name, "paused")
            at = [progress(s)() for s in sites]
            wait_until(lambda: all(progress(s)() > a + 300 for s, a in zip(sites, at)), timeout=60,
                       message="backlogs formed")
            for i in range(3):
                london.kill_node(i)
            for i in range(3):
                london.start_node(i, same_dir=True)
            for s in london.live:
                wait_until(lambda s=s: b"cluster_state:ok" in cluster_info(s), timeout=60,
                           message="london did not form again")
            assert any(b"loaded this node's copies from disk" in n.log_path.read_bytes() for n in london.live)
            for n in newyork.live:
                wan_control(n, "resume", london.name)
            at = progress(london)()
            wait_until(lambda: progress(london)() > at + 200, timeout=60,
                       message="london's writers did not go on after the restart")
            # Enough distinct acknowledged writes to judge (deletes and
            # overwrites make fewer than the writers' progress).
            wait_until(lambda: judged(ws) > 1000, timeout=90, message="too few writes to judge")
        try:
            contents = wait_converged(sites, timeout=120)
        except BaseException:
            explain_divergence(london, newyork, ws)
            raise
        lost = lost_writes(ws, contents)
        acked = judged(ws)
        # Every acknowledged write was on london's disks (fsync = always):
        # its data is what newyork delivered, so newyork resumed, no re-sync.
        assert b"remote sites resume" in london.logs()
        assert b"started over without its data" not in newyork.logs()
        assert not lost, f"{len(lost)} of {acked} acknowledged writes missing or wrong, e.g. {lost[:5]}"
    finally:
        for site in sites:
            site.stop()
