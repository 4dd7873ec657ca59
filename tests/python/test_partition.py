"""Network partitions of a three-node site, made with real packet loss in
network namespaces (helpers_netns.py: one namespace per node on a bridge,
a cut is blackhole routes on both sides; it also starts the site in them
and tells when it is healthy), while clients on the host keep writing and
reading through every node, the cut-off one included.

Each round cuts one node off from the other two for longer than failure
detection takes (PARTITION_CUT_SECONDS, default 10), heals the cut, keeps
the load on for PARTITION_HEAL_SECONDS (default 15) and waits until the
site is healthy again (every member active and connected, every partition
with a primary and its backup in sync, the table balanced again) before
the next round. Rounds alternate between cutting the Raft leader's node
and a follower's node, PARTITION_ROUNDS (default 5) of each.

Writers each own a disjoint set of keys (one each) spread over every
node's slots and write `SET key <n> GET` with n increasing on every
attempt, never reused; readers GET random keys. The clients route by
CLUSTER SLOTS from any node, the cut-off one included, and record every
attempt, acknowledgement and value seen (helpers_history.py says how and
why). Only a reply to the command is an acknowledgement.

The checks, over a register per key with one writer each:
  * no read returns a value older than one acknowledged before the read
    was sent: neither a GET, nor the old value an acknowledged SET ... GET
    returns (a SET that finds less than what its key's previous
    acknowledged SET wrote shows that write was lost, even though later
    writes overwrite it and the final check cannot see it);
  * at the end, every key's primary holds at least its newest
    acknowledged value: zero acknowledged writes lost;
  * and each round tested something: acknowledgements before the cut and
    after the heal, reads during the cut, and the other nodes declared the
    cut-off node dead before the heal.
PARTITION_STALE_GRACE_SECONDS (default 0: strict) exempts GETs sent that
many seconds after a cut began from the first check.

Needs root for the namespaces; skipped, saying why, where they cannot be
made. One run at a time per machine (the namespaces have fixed names).
Node logs are in the test's tmp_path (n1.log ...), which it prints.
"""
import bisect
import collections
import os
import random
import time

import pytest
from redis.crc import key_slot

from helpers_history import KEYS_PER_WRITER, READ_TIMEOUT, WRITERS, History, Router, clients, final_values
from helpers_netns import (bridge_netfilter_note, current_leader, health_problems, namespaces_or_skip, node_index,
                           node_name, ns_site, wait_healthy)

pytestmark = pytest.mark.deltagrid_only

ROUNDS = int(os.environ.get("PARTITION_ROUNDS", "5"))  # of each kind (leader, follower)
CUT_SECONDS = float(os.environ.get("PARTITION_CUT_SECONDS", "10"))
HEAL_SECONDS = float(os.environ.get("PARTITION_HEAL_SECONDS", "15"))
STALE_GRACE_SECONDS = float(os.environ.get("PARTITION_STALE_GRACE_SECONDS", "0"))
BEFORE_SECONDS = 1.0     # load on a healthy site before each cut
HEALTHY_TIMEOUT = 60.0   # after the heal period, for the site to be healthy again
MIN_ACKS_BEFORE_CUT = 20
MIN_ACKS_AFTER_HEAL = 200


@pytest.fixture
def netns():
    with namespaces_or_skip() as net:
        yield net


# -- rounds -----------------------------------------------------------------

class Round:
    """One cut: which node, its role, the phases' start times and when the
    majority's /status showed the site react (seconds after the cut)."""

    def __init__(self, number, role, victim, leader):
        self.number, self.role, self.victim, self.leader = number, role, victim, leader
        self.before = self.cut = self.heal = self.settle = self.end = None
        self.dead_after = None         # the majority lists the victim dead
        self.new_leader_after = None   # the majority follows a leader other than the victim
        self.failed_over_after = None  # ... and its table leaves the victim no primaries
        self.back_after_heal = None    # every node sees the victim active and connected (after the heal)
        self.healthy_after_heal = None
        self.unhealthy = None          # why the site did not recover, if it did not

    def phase_of(self, t):
        """'before', 'cut', 'healed' (the HEAL_SECONDS after the heal) or
        'settle' (waiting for a healthy site) for a time in this round."""
        if t < self.cut:
            return "before"
        if t < self.heal:
            return "cut"
        return "healed" if t < self.settle else "settle"


def watch(rnd, nodes, until):
    """Polls /status until `until`: notes when the majority declared the
    victim dead, elected another leader, failed its partitions over, and
    (once healed) when every node sees it back and the site is healthy."""
    majority = [n for n in nodes if n is not rnd.victim]
    while time.monotonic() < until:
        now = time.monotonic()
        for n in majority:
            try:
                c = n.status(timeout=1.0)
            except Exception:  # noqa: BLE001 -- busy: ask the other one, or poll again
                continue
            me = next((m for m in c["members"] if m["node_id"] == rnd.victim.name), None)
            if me is None:
                continue
            if rnd.dead_after is None and me["state"] == "dead":
                rnd.dead_after = now - rnd.cut
            if (rnd.role == "leader" and rnd.new_leader_after is None
                    and c["leader"] not in (None, rnd.victim.name)):
                rnd.new_leader_after = now - rnd.cut
            if rnd.failed_over_after is None and rnd.dead_after is not None and me["primaries"] == 0:
                rnd.failed_over_after = now - rnd.cut
            break
        if rnd.heal is not None and rnd.back_after_heal is None:
            try:
                views = [n.status(timeout=1.0) for n in nodes]
                if all(m["state"] == "active" and m["connected"]
                       for c in views for m in c["members"] if m["node_id"] == rnd.victim.name):
                    rnd.back_after_heal = now - rnd.heal
            except Exception:  # noqa: BLE001 -- poll again
                pass
        if rnd.back_after_heal is not None and rnd.healthy_after_heal is None and not health_problems(nodes):
            rnd.healthy_after_heal = now - rnd.heal
        time.sleep(max(0.0, min(0.25, until - time.monotonic())))


def run_round(number, role, net, nodes, cut_before):
    """Cuts the leader's node or a follower's (the one cut least often so
    far, per `cut_before`: node -> times) for CUT_SECONDS, heals, keeps
    the load on for HEAL_SECONDS, then waits for a healthy site."""
    leader_name = current_leader(nodes)
    leader = next((n for n in nodes if n.name == leader_name), None)
    assert leader is not None, f"no metadata leader on a healthy site (nodes say {leader_name!r})"
    followers = [n for n in nodes if n is not leader]
    victim = leader if role == "leader" else min(followers, key=lambda n: (cut_before[n.name], n.i))
    cut_before[victim.name] += 1
    rnd = Round(number, role, victim, leader_name)
    rnd.before = time.monotonic()
    time.sleep(BEFORE_SECONDS)
    net.cut(victim.i)
    rnd.cut = time.monotonic()
    try:
        watch(rnd, nodes, rnd.cut + CUT_SECONDS)
    finally:
        net.heal(victim.i)
    rnd.heal = time.monotonic()
    watch(rnd, nodes, rnd.heal + HEAL_SECONDS)
    rnd.settle = time.monotonic()
    if rnd.healthy_after_heal is None:
        took = wait_healthy(nodes, HEALTHY_TIMEOUT)
        if took is None:
            rnd.unhealthy = (f"site not healthy {HEAL_SECONDS + HEALTHY_TIMEOUT:.0f} s after the heal: "
                             + "; ".join(wait_healthy.last))
        else:
            rnd.healthy_after_heal = rnd.settle - rnd.heal + took
    rnd.end = time.monotonic()
    return rnd


# -- checks and report ----------------------------------------------------

def round_at(rounds, t):
    """The round a time falls in, or None."""
    j = bisect.bisect_right([r.before for r in rounds], t) - 1
    return rounds[j] if j >= 0 and t < rounds[j].end else None


def when(rounds, t, t0):
    """A time for reports: since the test began, and where in which round."""
    r = round_at(rounds, t)
    if r is None:
        return f"t={t - t0:.3f}s (outside the rounds)"
    return (f"t={t - t0:.3f}s in round {r.number} ({r.role} {r.victim.name} cut), "
            f"{r.phase_of(t)} ({t - r.cut:+.3f}s from the cut, {t - r.heal:+.3f}s from the heal)")


def stale_observations(hist, rounds):
    """(sent, key id, value, node, kind, (acked at, acked value)) for every
    GET and acknowledged SET ... GET that saw a value older than one
    acknowledged before it was sent; sorted by time."""
    stale = []
    for obs in hist.observed:
        for key, sent, value, node in zip(obs.key, obs.sent, obs.value, obs.node):
            newest = hist.logs[key].newest_ack_before(sent)
            if newest is None or value >= newest[1]:
                continue
            if obs.kind == "GET" and STALE_GRACE_SECONDS > 0:
                r = round_at(rounds, sent)
                if r is not None and r.cut <= sent < r.cut + STALE_GRACE_SECONDS:
                    continue
            stale.append((sent, key, value, node, obs.kind, newest))
    return sorted(stale)


def describe_stale(hist, rounds, t0, entry):
    sent, key, value, node, kind, (acked_at, acked) = entry
    log = hist.logs[key]
    what = "GET" if kind == "GET" else "SET ... GET (old value)"
    acked_by = node_name(log.node[acked - 1])
    return (f"{hist.keys[key]}: {what} sent to {node_name(node)} at {when(rounds, sent, t0)} returned "
            f"{value}, but {acked} was acknowledged by {acked_by} at t={acked_at - t0:.3f}s "
            f"({log.describe(value, t0)})")


class RoundCounts:
    """What the clients did in one round, by phase."""

    def __init__(self, rnd, hist, stale):
        self.acks = collections.Counter()
        self.acks_by_victim = 0   # during the cut, by the cut-off node
        self.keys_after_heal = 0  # keys with an acknowledgement after the heal
        for log in hist.logs:
            times = log.ack_times
            lo, hi = bisect.bisect_left(times, rnd.before), bisect.bisect_left(times, rnd.end)
            for j in range(lo, hi):
                phase = rnd.phase_of(times[j])
                self.acks[phase] += 1
                if phase == "cut" and log.node[log.ack_values[j] - 1] == rnd.victim.i:
                    self.acks_by_victim += 1
            self.keys_after_heal += bisect.bisect_left(times, rnd.heal) < hi
        self.reads = collections.Counter()
        self.reads_by_victim = 0  # during the cut, answered by the cut-off node
        for obs in hist.observed:
            if obs.kind == "GET":
                lo, hi = bisect.bisect_left(obs.sent, rnd.before), bisect.bisect_left(obs.sent, rnd.end)
                for t, node in zip(obs.sent[lo:hi], obs.node[lo:hi]):
                    phase = rnd.phase_of(t)
                    self.reads[phase] += 1
                    self.reads_by_victim += phase == "cut" and node == rnd.victim.i
        self.errors = {p: collections.Counter() for p in ("cut", "healed", "settle")}
        for t, who, kind, _ in hist.errors:
            if rnd.cut <= t < rnd.end:
                self.errors[rnd.phase_of(t)][f"{who}:{kind}"] += 1
        # (kind, phase) of the violations found in the round
        self.stale = collections.Counter((s[4], rnd.phase_of(s[0])) for s in stale if rnd.before <= s[0] < rnd.end)


def round_report(rnd, counts, t0):
    """A few lines on one round: what the site did (seconds after the cut,
    then after the heal), what the clients got, errors by kind."""
    def secs(x):
        return "-" if x is None else f"{x:.1f}s"

    def errs(c):
        return ", ".join(f"{k}={v}" for k, v in c.most_common()) or "none"

    a = counts.acks
    lines = [
        f"round {rnd.number}: cut {rnd.victim.name} ({rnd.role}; leader was {rnd.leader}) at t={rnd.cut - t0:.1f}s"
        f" | after the cut: dead {secs(rnd.dead_after)}"
        + (f", new leader {secs(rnd.new_leader_after)}" if rnd.role == "leader" else "")
        + f", failed over {secs(rnd.failed_over_after)} | after the heal: {rnd.victim.name} back "
        f"{secs(rnd.back_after_heal)}, site healthy {secs(rnd.healthy_after_heal)}",
        f"    acks before/cut/healed/settle {a['before']}/{a['cut']}/{a['healed']}/{a['settle']} "
        f"({counts.acks_by_victim} by {rnd.victim.name} during the cut; {counts.keys_after_heal} keys acked "
        f"after the heal) | reads cut/healed {counts.reads['cut']}/{counts.reads['healed']} "
        f"({counts.reads_by_victim} by {rnd.victim.name} during the cut)",
        f"    errors (w: writes, r: reads) during the cut: {errs(counts.errors['cut'])}; after the heal: "
        f"{errs(counts.errors['healed'])}" + (f"; settling: {errs(counts.errors['settle'])}"
                                               if counts.errors["settle"] else ""),
    ]
    return "\n".join(lines)


def violations_line(rnd, counts):
    found = ", ".join(f"{n} {'SET ... GETs found a lost write' if kind == 'SET' else 'stale GETs'} ({phase})"
                      for (kind, phase), n in sorted(counts.stale.items()))
    return f"round {rnd.number} ({rnd.role} {rnd.victim.name} cut): {found or 'none'}"


# -- the test ---------------------------------------------------------------

def test_partitions_lose_no_acknowledged_write_and_serve_no_stale_read(netns, tmp_path):
    keys = [f"pk:{i}" for i in range(WRITERS * KEYS_PER_WRITER)]
    hist = History(keys)
    rounds, problems = [], []
    t0 = time.monotonic()
    with ns_site(netns, tmp_path) as nodes:
        if wait_healthy(nodes, 30) is None:
            pytest.fail("the site did not form in 30 s in the namespaces: "
                        + "; ".join(wait_healthy.last) + f" ({bridge_netfilter_note()}); logs: {tmp_path}")
        router = Router([n.addr for n in nodes], READ_TIMEOUT, random.Random(0))
        assert router.refresh(), "no node answered CLUSTER SLOTS"
        owners = collections.Counter(node_name(node_index(router.owner(key_slot(k.encode())))) for k in keys)
        router.close()
        assert set(owners) == {n.name for n in nodes}, f"some node is primary of none of the keys: {dict(owners)}"
        print(f"\nsite up in the namespaces after {time.monotonic() - t0:.1f}s; keys per primary: "
              f"{dict(sorted(owners.items()))}; {ROUNDS} leader + {ROUNDS} follower rounds, cut "
              f"{CUT_SECONDS:g}s, heal {HEAL_SECONDS:g}s, stale grace {STALE_GRACE_SECONDS:g}s; logs in {tmp_path}",
              flush=True)
        cut_before = collections.Counter()
        with clients([n.addr for n in nodes], hist):
            for number in range(1, 2 * ROUNDS + 1):
                role = "leader" if number % 2 else "follower"
                rnd = run_round(number, role, netns, nodes, cut_before)
                rounds.append(rnd)
                print(round_report(rnd, RoundCounts(rnd, hist, []), t0), flush=True)
                if rnd.unhealthy:
                    problems.append(f"round {number}: {rnd.unhealthy}")
                    break
        final = final_values(nodes, keys)
    elapsed = time.monotonic() - t0
    stale = stale_observations(hist, rounds)

    # Per round again, now with the violations; and that each round
    # tested something.
    print("violations found, per round (phase):")
    for rnd in rounds:
        counts = RoundCounts(rnd, hist, stale)
        print("    " + violations_line(rnd, counts))
        if counts.acks["before"] < MIN_ACKS_BEFORE_CUT:
            problems.append(f"round {rnd.number}: only {counts.acks['before']} writes acknowledged before the cut")
        if not rnd.unhealthy and counts.acks["healed"] < MIN_ACKS_AFTER_HEAL:
            problems.append(f"round {rnd.number}: only {counts.acks['healed']} writes acknowledged in the "
                            f"{HEAL_SECONDS:g} s after the heal")
        if counts.reads["cut"] == 0:
            problems.append(f"round {rnd.number}: no read answered during the cut")
        if rnd.dead_after is None or rnd.dead_after > rnd.heal - rnd.cut:
            problems.append(f"round {rnd.number}: the other nodes did not declare {rnd.victim.name} dead during "
                            f"the cut: the {CUT_SECONDS:g} s cut is shorter than failure detection "
                            f"(PARTITION_CUT_SECONDS)")
    if hist.garbage:
        problems.append(f"{len(hist.garbage)} replies held something no writer wrote, e.g. {hist.garbage[:3]}")
    if hist.crashes:
        problems.append(f"{len(hist.crashes)} client threads crashed (a harness bug):\n" + hist.crashes[0])

    # Zero acknowledged writes lost: every key holds at least its newest
    # acknowledged value.
    lost = []
    for key, log in zip(keys, hist.logs):
        if not log.ack_values:
            continue
        newest, got = log.ack_values[-1], final.get(key)
        if not isinstance(got, int) or got < newest:
            lost.append(f"{key}: holds {got!r}, but {newest} was acknowledged by "
                        f"{node_name(log.node[newest - 1])} at {when(rounds, log.ack_times[-1], t0)}")
    if lost:
        problems.append(f"{len(lost)} of {len(keys)} keys lost their newest acknowledged write (read from "
                        f"their primaries at the end):\n    " + "\n    ".join(lost[:10]))

    # No read older than a write acknowledged before it was sent.
    for kind, title in (("SET", "acknowledged SET ... GETs found less than the value their key's previous "
                                "acknowledged write had set: that write was lost"),
                        ("GET", "GETs returned a value older than one acknowledged before they were sent")):
        found = [s for s in stale if s[4] == kind]
        if found:
            per_round = collections.Counter(f"round {r.number}" if (r := round_at(rounds, s[0])) else "outside"
                                            for s in found)
            problems.append(f"{len(found)} {title} ({', '.join(f'{k}: {v}' for k, v in per_round.items())}); "
                            f"the first ones:\n    "
                            + "\n    ".join(describe_stale(hist, rounds, t0, s) for s in found[:8]))

    attempts = sum(len(log.sent) for log in hist.logs)
    acked = sum(len(log.ack_values) for log in hist.logs)
    reads = sum(len(o.sent) for o in hist.observed if o.kind == "GET")
    print(f"{len(rounds)} rounds in {elapsed:.0f}s: {attempts} write attempts, {acked} acknowledged, {reads} "
          f"reads; {len(lost)} keys lost their newest acknowledged write, "
          f"{sum(s[4] == 'SET' for s in stale)} SET ... GETs found a lost write, "
          f"{sum(s[4] == 'GET' for s in stale)} GETs were stale; node logs: {tmp_path}")
    assert not problems, "\n".join(problems) + f"\n(node logs: {tmp_path})"
