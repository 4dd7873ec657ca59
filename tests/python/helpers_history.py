"""The recording cluster client of test_partition.py: writer and reader
threads on the host that keep load on every node of a site while it is
cut apart, and record everything they see, with monotonic times, so that
the test can tell afterwards whether an acknowledged write was lost or a
read was stale.

Each key is a register with exactly one writer (WRITERS threads owning
KEYS_PER_WRITER keys each: one, so a write stuck on a cut-off node holds
up no other key), and the writer writes `SET key <n> GET` with n the
key's attempt number: increasing on every attempt, never reused, whatever
the outcome. So a value names the one attempt that wrote it (its time,
node and outcome are in the key's KeyLog), older means smaller, and the
old value SET ... GET returns is a read too: a SET that finds less than
what its key's previous acknowledged SET wrote shows that write was lost,
even though later writes overwrite it. Only a reply to the command is an
acknowledgement; an error, a timeout or a closed connection leaves the
outcome unknown, and the next attempt uses a new n. Readers GET random
keys from the node their slot map names as primary.

The clients (Router) route by CLUSTER SLOTS from any node (the cut-off
one included: a real client does not know which node is cut off) and
follow -MOVED; on any other error they back off, refresh their slot map
from a node at random and go on.

History holds it all: per key, every write attempt and the
acknowledgements in time order (KeyLog); per thread, every value a GET
or an acknowledged SET ... GET returned (ObsLog); errors by kind and
node; replies that held no number; client threads that crashed.
final_values() reads every key from its primary once the load is off.
"""
import bisect
import contextlib
import random
import threading
import time
import traceback
from array import array

from redis.crc import key_slot

from helpers_net import ConnectionClosed, RespConn, RespError
from helpers_netns import node_index, node_name

# One key per writer thread: a write stuck on the cut-off node (up to
# WRITE_TIMEOUT) holds up no other key. 96 keys over 64 partitions: every
# node is primary of some.
WRITERS = 96
KEYS_PER_WRITER = 1
READERS = 8
WRITE_PAUSE = 0.02       # after each acknowledged write of a thread: ~50 writes/s per key
READ_PAUSE = 0.002       # after each answered read of a thread
# A write to a cut-off primary may wait up to 5 s for its backup and then
# see its connection closed. The clients give up sooner (outcome unknown)
# and look for the slot's primary again, so that writes reach the
# majority's new primaries while the cut lasts, which is what makes a
# stale read from the cut-off node visible.
WRITE_TIMEOUT = 2.0
READ_TIMEOUT = 2.0
BACKOFF = (0.05, 0.1)    # seconds after an error, at random in this range


def error_kind(e):
    """A short name for an error reply or exception, for the counts."""
    if isinstance(e, RespError):
        return str(e).split(" ", 1)[0] or "ERR"
    if isinstance(e, TimeoutError):
        return "timeout"
    if isinstance(e, ConnectionClosed):
        return "closed"
    if isinstance(e, ConnectionRefusedError):
        return "refused"
    if isinstance(e, (ConnectionResetError, BrokenPipeError)):
        return "reset"
    return type(e).__name__


class Router:
    """A minimal cluster client for one thread: one connection per node,
    a slot map from CLUSTER SLOTS of a node picked at random, -MOVED
    followed by updating the slot. Every exception closes the connection
    it happened on (a late reply must not be taken for the next one's)."""

    def __init__(self, addrs, timeout, rng):
        self.addrs, self.timeout, self.rng = list(addrs), timeout, rng
        self.slots = [None] * 16384
        self.conns = {}

    def close(self):
        for c in self.conns.values():
            c.close()
        self.conns.clear()

    def _conn(self, addr):
        c = self.conns.get(addr)
        if c is None:
            c = self.conns[addr] = RespConn(addr[0], addr[1], timeout=min(self.timeout, 2.0))
            c.default_timeout = self.timeout
        return c

    def call(self, addr, *args):
        try:
            return self._conn(addr).call(*args)
        except BaseException:
            c = self.conns.pop(addr, None)
            if c is not None:
                c.close()
            raise

    def refresh(self):
        """Takes the slot map of the first node that answers, in random
        order; False if none did."""
        for addr in self.rng.sample(self.addrs, len(self.addrs)):
            try:
                reply = self.call(addr, "CLUSTER", "SLOTS")
            except (OSError, ValueError):
                continue
            if not isinstance(reply, list) or not reply:
                continue
            for first, last, primary, *_ in reply:
                owner = (primary[0].decode(), primary[1])
                for s in range(first, last + 1):
                    self.slots[s] = owner
            return True
        return False

    def owner(self, slot):
        if self.slots[slot] is None:
            self.refresh()
        return self.slots[slot] or self.rng.choice(self.addrs)

    def moved(self, err):
        """Points the slot at the node a -MOVED reply names."""
        _, slot, where = str(err).split(" ")
        host, port = where.rsplit(":", 1)
        self.slots[int(slot)] = (host, int(port))


OUTCOMES = ["ok", "MOVED", "TRYAGAIN", "CLUSTERDOWN", "ERR", "timeout", "closed", "refused", "reset", "other"]
OUTCOME_CODE = {o: i for i, o in enumerate(OUTCOMES)}


class KeyLog:
    """One key's writes, appended by its only writer: attempt n wrote the
    value n and sits at index n - 1; acknowledgements come in time order
    with increasing values. Arrays keep a few million entries small."""

    def __init__(self):
        self.sent, self.done = array("d"), array("d")
        self.node, self.outcome = array("b"), array("b")
        self.ack_times, self.ack_values = array("d"), array("q")

    def attempt(self, value, sent, done, node, outcome):
        assert value == len(self.sent) + 1, "attempts are logged in order"
        self.sent.append(sent)
        self.done.append(done)
        self.node.append(node)
        self.outcome.append(OUTCOME_CODE.get(outcome, OUTCOME_CODE["other"]))
        if outcome == "ok":
            # The value first: a summary taken while the writers run
            # reads values at the indexes of the times it finds.
            self.ack_values.append(value)
            self.ack_times.append(done)

    def newest_ack_before(self, t):
        """(time, value) of the newest acknowledgement received before
        `t`, or None."""
        j = bisect.bisect_left(self.ack_times, t) - 1
        return (self.ack_times[j], self.ack_values[j]) if j >= 0 else None

    def describe(self, value, t0):
        """Where a value came from, for reports."""
        if value == 0:
            return "the key was missing"
        if value > len(self.sent):
            return f"{value} was never written"
        j = value - 1
        return (f"{value} was sent to {node_name(self.node[j])} at t={self.sent[j] - t0:.3f}s, "
                f"outcome: {OUTCOMES[self.outcome[j]]}")


class ObsLog:
    """Values one client thread saw, each with the time its command was
    sent: GET replies (a reader's) or the old values acknowledged
    SET ... GETs returned (a writer's)."""

    def __init__(self, kind):
        self.kind = kind  # "GET" or "SET"
        self.key, self.sent = array("l"), array("d")
        self.value, self.node = array("q"), array("b")

    def add(self, key, sent, value, node):
        self.key.append(key)
        self.sent.append(sent)
        self.value.append(value)
        self.node.append(node)


class History:
    """Everything the clients saw, with monotonic times."""

    def __init__(self, keys):
        self.keys = keys
        self.logs = [KeyLog() for _ in keys]
        self.observed = []  # an ObsLog per client thread
        self.errors = []    # (time, "w" or "r", kind, node index)
        self.crashes = []   # tracebacks of client threads that died
        self.garbage = []   # replies that held no number


def as_value(reply, key, hist):
    """The number a GET (or SET ... GET) reply holds: 0 for a missing key;
    anything that is not a number the writers wrote is noted in
    `hist.garbage` (and taken as 0, older than any write)."""
    if reply is None:
        return 0
    try:
        return int(reply)
    except (TypeError, ValueError):
        hist.garbage.append(f"{key}: {reply!r}")
        return 0


def writer(addrs, key_ids, hist, stop, seed):
    """Writes its keys in turn, `SET key n GET` with n the key's attempt
    number, until `stop`."""
    rng = random.Random(seed)
    router = Router(addrs, WRITE_TIMEOUT, rng)
    obs = ObsLog("SET")
    hist.observed.append(obs)
    i, moved_in_a_row = 0, 0
    while not stop.is_set():
        k = key_ids[i % len(key_ids)]
        key, log = hist.keys[k], hist.logs[k]
        value = len(log.sent) + 1  # never reused, whatever became of earlier attempts
        addr = router.owner(key_slot(key.encode()))
        node = node_index(addr)
        sent = time.monotonic()
        try:
            reply = router.call(addr, "SET", key, value, "GET")
        except (OSError, ValueError) as e:
            reply = e
        done = time.monotonic()
        if isinstance(reply, Exception):
            kind = error_kind(reply)
            log.attempt(value, sent, done, node, kind)
            hist.errors.append((done, "w", kind, node))
            if kind == "MOVED":
                router.moved(reply)
                moved_in_a_row += 1
                if moved_in_a_row < 5:
                    continue  # the same key again at once, with a new value
            moved_in_a_row = 0
            i += 1
            time.sleep(rng.uniform(*BACKOFF))
            router.refresh()
            continue
        log.attempt(value, sent, done, node, "ok")
        obs.add(k, sent, as_value(reply, key, hist), node)
        moved_in_a_row = 0
        i += 1
        time.sleep(WRITE_PAUSE)
    router.close()


def reader(addrs, hist, stop, seed):
    """GETs random keys from the primary its slot map names, until `stop`."""
    rng = random.Random(seed)
    router = Router(addrs, READ_TIMEOUT, rng)
    obs = ObsLog("GET")
    hist.observed.append(obs)
    while not stop.is_set():
        k = rng.randrange(len(hist.keys))
        key = hist.keys[k]
        addr = router.owner(key_slot(key.encode()))
        sent = time.monotonic()
        try:
            reply = router.call(addr, "GET", key)
        except (OSError, ValueError) as e:
            reply = e
        if isinstance(reply, Exception):
            kind = error_kind(reply)
            hist.errors.append((time.monotonic(), "r", kind, node_index(addr)))
            if kind == "MOVED":
                router.moved(reply)
                continue
            time.sleep(rng.uniform(*BACKOFF))
            router.refresh()
            continue
        obs.add(k, sent, as_value(reply, key, hist), node_index(addr))
        time.sleep(READ_PAUSE)
    router.close()


@contextlib.contextmanager
def clients(addrs, hist):
    """WRITERS writer threads (each owning KEYS_PER_WRITER keys) and
    READERS reader threads while the block runs."""
    stop = threading.Event()

    def guarded(fn, *args):
        try:
            fn(*args)
        except BaseException:  # a harness bug: reported, and fails the test
            hist.crashes.append(traceback.format_exc())

    ids = list(range(len(hist.keys)))
    threads = [threading.Thread(target=guarded, args=(writer, addrs, ids[w::WRITERS], hist, stop, w),
                                name=f"writer{w}", daemon=True) for w in range(WRITERS)]
    threads += [threading.Thread(target=guarded, args=(reader, addrs, hist, stop, 1000 + r),
                                 name=f"reader{r}", daemon=True) for r in range(READERS)]
    for t in threads:
        t.start()
    try:
        yield
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=WRITE_TIMEOUT + 5)


def final_values(nodes, keys):
    """Every key read from its primary with a fresh slot map (errors are
    retried for up to 30 s); {key: value, or the last error's text}."""
    router = Router([n.addr for n in nodes], READ_TIMEOUT, random.Random(0))
    values = {}
    try:
        deadline = time.monotonic() + 30
        pending = list(keys)
        while pending:
            router.refresh()
            again = []
            for key in pending:
                addr = router.owner(key_slot(key.encode()))
                try:
                    reply = router.call(addr, "GET", key)
                except (OSError, ValueError) as e:
                    reply = e
                if isinstance(reply, Exception):
                    values[key] = f"{error_kind(reply)} from {node_name(node_index(addr))}"
                    again.append(key)
                elif reply is None:
                    values[key] = 0
                else:
                    try:
                        values[key] = int(reply)
                    except (TypeError, ValueError):
                        values[key] = f"not a number: {reply!r}"
            pending = again
            if pending:
                if time.monotonic() > deadline:
                    break
                time.sleep(0.2)
    finally:
        router.close()
    return values
