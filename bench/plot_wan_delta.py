"""Charts of one `deltagrid bench wan-delta` run (bench/wan_delta.sh):

  OUT/wan_delta_bytes.png    bytes received per second by site 2 over time,
                             delta off vs on (log scale: they differ ~100x)
  OUT/wan_delta_updates.png  client updates per second over time, delta off vs on

usage: plot_wan_delta.py wan_delta.json wan_delta.csv OUT_DIR
"""

import csv
import json
import os
import re
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import FuncFormatter  # noqa: E402

PHASES = [("delta_off", "delta off (full values)", "#d62728"), ("delta_on", "delta on", "#1f77b4")]
NODE_STYLES = [":", "--", "-."]


def si(v: float, _pos=None) -> str:
    for unit, div in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(v) >= div:
            return f"{v / div:g}{unit}"
    return f"{v:g}"


def footer(meta: dict) -> str:
    m = meta["machine"]
    mem = f"{m['mem_total_kib'] / 1048576:.1f} GiB" if m.get("mem_total_kib") else "?"
    w = meta["workload"]
    return (
        f"{meta['date']}; {m.get('nproc')} cores, {mem} RAM; {w['objects']} objects x {meta['payload_bytes']} B payload, "
        f"{w['writers']} writers, {w['seconds']} s per phase (GemFire: 100,000 objects, 300 s)\nlink: {meta['link']}"
    )


def link_cap(meta: dict):
    """Bytes/s the emulated link allows per direction, if it names a rate."""
    m = re.search(r"rate (\d+(?:\.\d+)?)(k|m|g)bit", meta["link"], re.I)
    if not m:
        return None
    return float(m.group(1)) * {"k": 1e3, "m": 1e6, "g": 1e9}[m.group(2).lower()] / 8


def finish(fig, ax, meta, title, path):
    ax.set_title(title)
    ax.set_xlabel("time since the writers started (s)")
    ax.grid(alpha=0.3, which="both")
    ax.legend(loc="best", fontsize=8)
    fig.text(0.5, 0.01, footer(meta), ha="center", fontsize=7, color="#555555")
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    fig.savefig(path, dpi=110)
    print(f"chart: {path}")


def main() -> None:
    meta_path, csv_path, out = sys.argv[1], sys.argv[2], sys.argv[3]
    with open(meta_path) as f:
        meta = json.load(f)
    with open(csv_path, newline="") as f:
        rows = list(csv.DictReader(f))
    if not rows:
        sys.exit(f"{csv_path}: no rows")
    recv_cols = [c for c in rows[0] if c.startswith("bytes_received_per_s_")]
    writing_end = meta["workload"]["seconds"]

    # Bytes received per second by site 2.
    fig, ax = plt.subplots(figsize=(11, 5.5))
    for phase, label, color in PHASES:
        rs = [r for r in rows if r["phase"] == phase]
        t = [float(r["time_s"]) for r in rs]
        total = [sum(float(r[c]) for c in recv_cols) for r in rs]
        ax.plot(t, [v if v > 0 else None for v in total], color=color, lw=2.2, marker="o", ms=3,
                label=f"{label}: all site-2 nodes")
        for k, c in enumerate(recv_cols):
            node = c.removeprefix("bytes_received_per_s_")
            vals = [float(r[c]) for r in rs]
            if max(vals, default=0) <= 0:
                continue  # a node no publisher connected to: nothing to draw on a log axis
            ax.plot(t, [v if v > 0 else None for v in vals], color=color, lw=1, alpha=0.7,
                    ls=NODE_STYLES[k % len(NODE_STYLES)], label=f"{label}: {node}")
    cap = link_cap(meta)
    if cap:
        ax.axhline(cap, color="#444444", lw=1, ls="--", label=f"link rate ({si(cap)}B/s per direction)")
    ax.axvline(writing_end, color="#888888", lw=1, ls=":", label="writers stop (then site 2 catches up)")
    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(FuncFormatter(si))
    ax.set_ylabel("bytes received per second at site 2 (B/s, log scale)")
    finish(fig, ax, meta, "WAN bytes received by site 2, delta off vs on (GemFire experiment, deltagrid)",
           os.path.join(out, "wan_delta_bytes.png"))

    # Client updates per second.
    fig, ax = plt.subplots(figsize=(11, 5.5))
    for phase, label, color in PHASES:
        rs = [r for r in rows if r["phase"] == phase and r["writing"] == "1"]
        ax.plot([float(r["time_s"]) for r in rs], [float(r["updates_per_s"]) for r in rs], color=color, lw=2,
                marker="o", ms=3, label=f"{label} ({meta['workload']['writers']} writer threads, total)")
    ax.set_ylim(bottom=0)
    ax.yaxis.set_major_formatter(FuncFormatter(si))
    ax.set_ylabel("client updates per second (HSET count+timestamp, updates/s)")
    finish(fig, ax, meta, "Client update rate at site 1, delta off vs on (GemFire experiment, deltagrid)",
           os.path.join(out, "wan_delta_updates.png"))


if __name__ == "__main__":
    main()
