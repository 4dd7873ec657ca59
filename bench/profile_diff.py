#!/usr/bin/env python3
"""Compares two flat profiles written by bench/wan_profile.sh, in µs of the
profiled CPU per client op: the total, then by area (kernel, keyspace, WAN,
allocator...), then the symbols that moved most.

usage: python3 bench/profile_diff.py A B [N]
  A, B  profile bases (OUTDIR/TAG-RUN, as wan_profile.sh printed them)
  N     symbols listed each way [25]
"""

import re
import sys

LINE = re.compile(r"\s*([\d.]+)%\s+\[(.)\]\s+(.*)")

# First match wins; a symbol matches when it starts with the prefix (a
# trait impl's, "<Type as Trait>::f", by its type's).
AREAS = [
    ("wan::", "wan"),
    ("keyspace::partition_log", "log"),
    ("keyspace::codec", "codec"),
    ("indexmap", "key map"),
    ("hashbrown", "key map"),
    ("keyspace::", "keyspace"),
    ("arc_swap", "cluster"),
    ("cluster::", "cluster"),
    ("server::", "server"),
    ("commands::", "commands"),
    ("resp::", "server"),
    ("tokio", "tokio"),
    ("redis::", "clients"),
    ("combine", "clients"),
    ("deltagrid::", "clients"),
    ("__mem", "memcpy/memcmp"),
    ("malloc", "allocator"),
    ("_int_", "allocator"),
    ("cfree", "allocator"),
    ("realloc", "allocator"),
    ("unlink_chunk", "allocator"),
]


def load(base):
    """Symbol -> µs per client op."""
    rate, shares = None, {}
    with open(base + ".top") as f:
        for line in f:
            if line.startswith("# rate "):
                rate = float(line.split()[2])
                continue
            m = LINE.match(line)
            if m:
                key = (m.group(2), m.group(3).strip())
                shares[key] = shares.get(key, 0.0) + float(m.group(1))
    if not rate:
        sys.exit(f"{base}.top has no '# rate' line")
    return {k: pct / 100 * 1e6 / rate for k, pct in shares.items()}


def area(key):
    kind, sym = key
    if kind == "k":
        return "kernel"
    sym = sym.lstrip("<")
    for prefix, name in AREAS:
        if sym.startswith(prefix):
            return name
    return "other"


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    a, b = load(sys.argv[1]), load(sys.argv[2])
    n = int(sys.argv[3]) if len(sys.argv) > 3 else 25
    print(f"total: {sum(a.values()):.2f} -> {sum(b.values()):.2f} µs per client op")
    areas = {}
    for k in set(a) | set(b):
        x = areas.setdefault(area(k), [0.0, 0.0])
        x[0] += a.get(k, 0.0)
        x[1] += b.get(k, 0.0)
    print("\nby area:")
    for name, (x, y) in sorted(areas.items(), key=lambda i: i[1][0] - i[1][1]):
        print(f"  {name:<14} {x:6.3f} -> {y:6.3f}  {y - x:+.3f}")
    moved = sorted(set(a) | set(b), key=lambda k: b.get(k, 0.0) - a.get(k, 0.0))
    print("\nsymbols, most grown:")
    for k in reversed(moved[-n:]):
        print(f"  {b.get(k, 0) - a.get(k, 0):+.3f} {a.get(k, 0):.3f} -> {b.get(k, 0):.3f} [{k[0]}] {k[1][:100]}")
    print("\nsymbols, most shrunk:")
    for k in moved[:n]:
        print(f"  {b.get(k, 0) - a.get(k, 0):+.3f} {a.get(k, 0):.3f} -> {b.get(k, 0):.3f} [{k[0]}] {k[1][:100]}")


if __name__ == "__main__":
    main()
