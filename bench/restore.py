"""Reverse delta restore (docs/benchmarks.md experiment 3, WAL-G's shape).

One node is loaded with N keys, backed up in full, then updated in rounds
of varying volume with an incremental backup after each (base + 5
layers). The chain is restored into fresh nodes base-first (forward) and
newest-first (reverse), and a single full backup of the final data is
restored for reference; each restore's per-layer times come from the
nodes. Every restored node is checked against the source (same keys and
values). Prints the tables, writes restore.json and restore.png to --out.

Run by bench/restore.sh (which builds the release binary and finds a
python with redis and matplotlib).
"""
import argparse
import hashlib
import json
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import redis


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def users_file(work):
    """The nodes' ACL users: default, and `backup` for the CLI."""
    path = work / "users.acl"
    path.write_text("user default on nopass ~* &* +@all\nuser backup on >backup ~* &* +@all +@internal\n")
    return path


class Node:
    def __init__(self, binary, work, name):
        self.port, self.admin_port = free_port(), free_port()
        self.log = open(work / f"{name}.log", "wb")
        self.proc = subprocess.Popen(
            [binary, "server", "--listen", f"127.0.0.1:{self.port}", "--admin-listen",
             f"127.0.0.1:{self.admin_port}", "--data-dir", str(work / name),
             "--backup-allowed-url", f"file://{work}", "--aclfile", str(users_file(work))],
            stdout=self.log, stderr=subprocess.STDOUT)
        self.r = redis.Redis(port=self.port)
        deadline = time.monotonic() + 30
        while True:
            try:
                self.r.ping()
                break
            except redis.ConnectionError:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    raise RuntimeError(f"node {name} did not start; see {work / name}.log")
                time.sleep(0.05)

    @property
    def admin(self):
        return f"127.0.0.1:{self.admin_port}"

    def stop(self):
        self.proc.terminate()
        self.proc.wait()
        self.log.close()

    def rss_mb(self):
        try:
            for line in open(f"/proc/{self.proc.pid}/status"):
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
        except OSError:
            pass
        return 0.0


def dg(binary, *args):
    # BACKUPJOB is an internal command: the CLI logs in as `backup`
    # (+@internal, from the nodes' aclfile).
    p = subprocess.run([binary, *args], capture_output=True, text=True,
                       env={**os.environ, "RUST_BACKTRACE": "0", "DELTAGRID_USER": "backup",
                            "DELTAGRID_PASSWORD": "backup"})
    if p.returncode != 0:
        sys.exit(f"deltagrid {' '.join(args)} failed:\n{p.stdout}{p.stderr}")
    return p.stdout


def value(rng, n):
    # Half random, half repetitive: compresses about 2:1, like real rows.
    return rng.randbytes(n // 2) + b"v" * (n - n // 2)


def write(node, keys, rng, value_bytes):
    pipe = node.r.pipeline(transaction=False)
    for i, k in enumerate(keys, 1):
        pipe.set(f"key:{k:08d}", value(rng, value_bytes))
        if i % 2000 == 0:
            pipe.execute()
    pipe.execute()


def fingerprint(node):
    """(keys, sha256 over sorted key=value) of a node."""
    keys = sorted(node.r.scan_iter(count=5000))
    h = hashlib.sha256()
    for i in range(0, len(keys), 2000):
        batch = keys[i:i + 2000]
        for k, v in zip(batch, node.r.mget(batch)):
            h.update(k + b"=" + (v or b"") + b"\n")
    return len(keys), h.hexdigest()


def backup(binary, node, url, chunk_bytes, incremental):
    t = time.monotonic()
    args = ["backup", "create", "--admin", node.admin, "--to", url, "--chunk-bytes", str(chunk_bytes)]
    out = dg(binary, *(args + (["--incremental"] if incremental else [])))
    return out.split()[1].rstrip(":"), time.monotonic() - t


def restore(binary, work, node, url, order, backup_id):
    summary = work / f"restore-{order}-{node.port}.json"
    dg(binary, "backup", "restore", "--admin", node.admin, "--from", url, "--order", order,
       "--backup", backup_id, "--json", str(summary))
    return json.loads(summary.read_text())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--keys", type=int, default=200_000)
    ap.add_argument("--value-bytes", type=int, default=1000)
    # WAL-G's deltas came from pgbench runs that rewrote most pages each
    # time (each delta took about as long to apply as the others).
    ap.add_argument("--rounds", default="0.9,0.7,0.8,0.6,0.9",
                    help="fraction of the keys each round updates (one incremental after each)")
    ap.add_argument("--chunk-bytes", type=int, default=4 << 20)
    ap.add_argument("--smoke", action="store_true", help="a few thousand keys: checks the harness")
    a = ap.parse_args()
    if a.smoke:
        a.keys = 5000
    rounds = [float(f) for f in a.rounds.split(",")]
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="deltagrid-restore-"))
    chain_url, full_url = f"file://{work}/chain", f"file://{work}/full"
    rng = random.Random(1)
    nodes = []
    try:
        src = Node(a.bin, work, "source")
        nodes.append(src)
        t = time.monotonic()
        write(src, range(a.keys), rng, a.value_bytes)
        print(f"loaded {a.keys} keys of {a.value_bytes} bytes in {time.monotonic() - t:.1f} s")
        layers = []
        bid, secs = backup(a.bin, src, chain_url, a.chunk_bytes, False)
        layers.append({"id": bid, "kind": "base", "updated": a.keys, "backup_s": secs})
        for f in rounds:
            sample = rng.sample(range(a.keys), int(a.keys * f))
            write(src, sample, rng, a.value_bytes)
            bid, secs = backup(a.bin, src, chain_url, a.chunk_bytes, True)
            layers.append({"id": bid, "kind": "incremental", "updated": len(sample), "backup_s": secs})
        full_id, full_secs = backup(a.bin, src, full_url, a.chunk_bytes, False)
        want = fingerprint(src)
        sizes = {}
        listing = dg(a.bin, "backup", "list", "--from", chain_url)
        for line in listing.splitlines()[1:]:
            parts = line.split()
            sizes[parts[0]] = float(parts[-1])
        for l in layers:
            l["mb"] = sizes.get(l["id"], 0.0)

        results = {}
        for name, url, order, bid in (("forward", chain_url, "forward", layers[-1]["id"]),
                                      ("reverse", chain_url, "reverse", layers[-1]["id"]),
                                      ("single full", full_url, "reverse", full_id)):
            node = Node(a.bin, work, name.replace(" ", "-"))
            nodes.append(node)
            s = restore(a.bin, work, node, url, order, bid)
            got = fingerprint(node)
            s["identical"] = got == want
            s["peak_rss_mb"] = node.rss_mb()
            results[name] = s
            node.stop()
            nodes.remove(node)
            if not s["identical"]:
                sys.exit(f"{name} restore differs from the source: {got} vs {want}")
    finally:
        for n in nodes:
            n.stop()
    # The stores and the nodes' data (about 2 GB at 500,000 keys); kept when
    # a run fails, for its logs.
    shutil.rmtree(work, ignore_errors=True)

    fwd, rev, full = results["forward"], results["reverse"], results["single full"]
    print()
    print(f"Restore of base + {len(rounds)} incrementals, {a.keys} keys x {a.value_bytes} B, "
          f"chunks of {a.chunk_bytes} B; this machine: {os.cpu_count()} cores")
    print()
    print(f"{'layer':<26} {'kind':<12} {'keys updated':>12} {'MB':>8} {'forward s':>10} {'keys':>9}"
          f" {'reverse s':>10} {'keys':>9} {'blocks read':>11} {'skipped':>8}")
    by_id = lambda s: {l["id"]: l for l in s["layers"]}
    fl, rl = by_id(fwd), by_id(rev)
    for l in reversed(layers):
        f, r = fl.get(l["id"], {}), rl.get(l["id"], {})
        print(f"{l['id']:<26} {l['kind']:<12} {l['updated']:>12} {l['mb']:>8.1f} {f.get('seconds', 0):>10.2f}"
              f" {f.get('keys_applied', 0):>9} {r.get('seconds', 0):>10.2f} {r.get('keys_applied', 0):>9}"
              f" {r.get('blocks_read', 0):>11} {r.get('blocks_skipped', 0):>8}")
    print()
    print(f"{'restore':<14} {'seconds':>8} {'keys applied':>13} {'blocks read':>12} {'skipped':>8}"
          f" {'chunks read':>12} {'skipped':>8} {'MB read':>8} {'peak RSS MB':>12}")
    for name, s in results.items():
        print(f"{name:<14} {s['seconds']:>8.2f} {s['keys_applied']:>13} {s['blocks_read']:>12} {s['blocks_skipped']:>8}"
              f" {s['chunks_read']:>12} {s['chunks_skipped']:>8} {s['bytes_downloaded'] / 1e6:>8.1f} {s['peak_rss_mb']:>12.0f}")
    speedup, vs_full = fwd["seconds"] / rev["seconds"], rev["seconds"] / full["seconds"]
    print()
    print(f"reverse is {speedup:.2f}x faster than forward (target >= 3x: {'met' if speedup >= 3 else 'NOT met'})")
    print(f"reverse takes {vs_full:.2f}x the single full restore (target <= 1.3x: {'met' if vs_full <= 1.3 else 'NOT met'})")
    print("all three restored nodes hold exactly the source's keys and values")

    report = {"keys": a.keys, "value_bytes": a.value_bytes, "chunk_bytes": a.chunk_bytes, "rounds": rounds,
              "layers": layers, "restores": results, "reverse_speedup": speedup, "reverse_vs_full": vs_full,
              "cores": os.cpu_count(), "smoke": a.smoke, "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    (out / "restore.json").write_text(json.dumps(report, indent=1))
    plot(report, out / "restore.png")
    print(f"wrote {out / 'restore.json'} and {out / 'restore.png'}")


def plot(report, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    layers = report["layers"]
    fig, ax = plt.subplots(figsize=(9, 3.8))
    colors = plt.cm.viridis([i / max(1, len(layers) - 1) for i in range(len(layers))])
    rows = [("forward\n(base first)", report["restores"]["forward"]),
            ("reverse\n(newest first)", report["restores"]["reverse"])]
    for y, (label, s) in enumerate(rows):
        left = 0.0
        by_id = {l["id"]: l for l in s["layers"]}
        for i, l in enumerate(layers if y == 0 else list(reversed(layers))):
            secs = by_id.get(l["id"], {}).get("seconds", 0.0)
            idx = layers.index(l)
            ax.barh(y, secs, left=left, color=colors[idx], edgecolor="white",
                    label=("base" if idx == 0 else f"incremental {idx}") if y == 0 else None)
            left += secs
        ax.text(left, y, f" {s['seconds']:.1f} s", va="center")
    full = report["restores"]["single full"]
    ax.barh(2, full["seconds"], color="grey")
    ax.text(full["seconds"], 2, f" {full['seconds']:.1f} s", va="center")
    ax.set_yticks([0, 1, 2], [r[0] for r in rows] + ["single full\nof final data"])
    ax.invert_yaxis()
    ax.set_xlabel("restore time (s), stacked by layer")
    ax.set_title(f"Restore of base + {len(layers) - 1} incrementals ({report['keys']:,} keys x "
                 f"{report['value_bytes']} B), this machine ({report['cores']} cores)")
    ax.legend(loc="lower right", fontsize=8, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    main()
