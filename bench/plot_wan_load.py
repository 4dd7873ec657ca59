"""Charts of one `deltagrid bench wan-load` run (bench/wan_load.sh):

  OUT/wan_load_queue.png       queue size over time per run: events queued for
                               site 2 (all site-1 nodes), bytes held (partition
                               log in memory, journal on disk), and the partition
                               log site 2 holds of what it applied
  OUT/wan_load_partitions.png  WAN throughput over time, 271 vs 16384 partitions
                               (2048 and 5120 thinner), and site 1's client rate
  OUT/wan_load_ack.png         on-apply vs pipelined (271 partitions): WAN bytes/s,
                               queue, publish lag
  OUT/wan_load_outage.png      the outage run(s): WAN bytes/s, queue in events, in
                               memory and on disk, client rate, outage shaded
  OUT/wan_load_clients.png     site 1's client ops/s per run vs WAN off

usage: plot_wan_load.py wan_load.json wan_load.csv OUT_DIR
"""

import csv
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import FuncFormatter  # noqa: E402

COLORS = {
    "outage-16384": "#e377c2",
    "wan-off": "#7f7f7f",
    "on-apply-271": "#d62728",
    "pipelined-271": "#1f77b4",
    "pipelined-2048": "#2ca02c",
    "pipelined-5120": "#9467bd",
    "pipelined-16384": "#ff7f0e",
    "outage-271": "#8c564b",
}


def si(v: float, _pos=None) -> str:
    for unit, div in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(v) >= div:
            return f"{v / div:g}{unit}"
    return f"{v:g}"


def footer(meta: dict) -> str:
    m = meta["machine"]
    mem = f"{m['mem_total_kib'] / 1048576:.1f} GiB" if m.get("mem_total_kib") else "?"
    s = meta["settings"]
    rate = f"{s['site2_rate']:.0f}/s" if s["site2_rate"] > 0 else "unthrottled"
    return (
        f"{meta['date']}; {m.get('nproc')} cores, {mem} RAM; 2 sites x 3 nodes, backups 1; {s['keys']} keys x "
        f"{s['value_bytes']} B; site 1: {s['site1_threads']} threads 50% SET/50% GET, site 2: {s['site2_threads']} "
        f"threads GET ({rate}), {s['pipeline']} cmds/round trip; {s['seconds']} s per run\nlink: {meta['link']}"
    )


def color(run: str) -> str:
    return COLORS.get(run, "#17becf")


def finish(fig, axes, meta, title, path):
    axes[0].set_title(title)
    for ax in axes:
        ax.grid(alpha=0.3, which="both")
        if ax.get_legend() is None:
            ax.legend(loc="best", fontsize=7)
    axes[-1].set_xlabel("time since the clients started (s)")
    fig.text(0.5, 0.005, footer(meta), ha="center", fontsize=6.5, color="#555555")
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)
    print(f"chart: {path}")


def series(rows, run, col, scale=1.0):
    rs = [r for r in rows if r["run"] == run]
    return [float(r["time_s"]) for r in rs], [float(r[col]) * scale for r in rs]


def writers_stop(meta, run):
    for r in meta["runs"]:
        if r["name"] == run:
            return r["write_seconds"]
    return None


def mark_stop(ax, meta, run, label=True):
    t = writers_stop(meta, run)
    if t is not None:
        ax.axvline(t, color=color(run), lw=0.8, ls=":", label=f"{run}: clients stop" if label else None)


def shade_outage(ax, meta):
    """One shaded span per distinct outage (runs with the same one share it)."""
    spans = {}
    for r in meta["runs"]:
        o = r.get("outage")
        if o:
            spans.setdefault((round(o["down_at_s"]), round(o["up_at_s"])), []).append(r["name"])
    for (down, up), names in spans.items():
        ax.axvspan(down, up, color="#8c564b", alpha=0.1, label=f"link down ({up - down} s): {', '.join(names)}")


def link_rate(meta):
    return meta.get("link_rate_bytes_per_s")


def main() -> None:
    meta_path, csv_path, out = sys.argv[1], sys.argv[2], sys.argv[3]
    with open(meta_path) as f:
        meta = json.load(f)
    with open(csv_path, newline="") as f:
        rows = list(csv.DictReader(f))
    if not rows:
        sys.exit(f"{csv_path}: no rows")
    runs = [r["name"] for r in meta["runs"]]
    wan_runs = [r["name"] for r in meta["runs"] if r["spec"]["wan"]]
    cap = link_rate(meta)

    # 1. Queue over time, every WAN run.
    fig, (a1, a2, a3) = plt.subplots(3, 1, figsize=(11, 10.5), sharex=True)
    for run in wan_runs:
        t, q = series(rows, run, "queue_events")
        a1.plot(t, [v if v > 0 else None for v in q], color=color(run), lw=1.5, marker="o", ms=2, label=run)
        t, mem = series(rows, run, "queue_bytes_primary", 1 / 1048576)
        a2.plot(t, mem, color=color(run), lw=1.5, label=f"{run}: partition log in memory (primaries)")
        t, jr = series(rows, run, "journal_bytes", 1 / 1048576)
        if max(jr, default=0) > 0:
            a2.plot(t, jr, color=color(run), lw=1.5, ls="--", label=f"{run}: journal on disk")
        t, s2 = series(rows, run, "site2_log_bytes", 1 / 1048576)
        a3.plot(t, s2, color=color(run), lw=1.5, label=run)
    budget = meta["settings"].get("memory_budget")
    for ax in (a1, a2, a3):
        shade_outage(ax, meta)
    a1.set_yscale("log")
    a1.yaxis.set_major_formatter(FuncFormatter(si))
    a1.set_ylabel("events queued for site 2, all site-1 nodes\n(events, log scale; gaps: 0)")
    a2.set_ylabel("queue bytes, all site-1 nodes (MiB)")
    a3.set_ylim(bottom=0)
    a3.set_ylabel("site 2: partition log held by\nits primaries, all nodes (MiB)")
    if budget:
        a2.text(0.99, 0.95, f"wan.memory_budget = {budget} per node (log bytes of primaries and backups)",
                transform=a2.transAxes, fontsize=7, va="top", ha="right")
    finish(fig, [a1, a2, a3], meta, "WAN queue over time per run (Hazelcast experiment, deltagrid)",
           os.path.join(out, "wan_load_queue.png"))

    # 2. WAN throughput, partition counts.
    part_runs = [r for r in wan_runs if r.startswith("pipelined-")]
    if part_runs:
        fig, (a1, a2) = plt.subplots(2, 1, figsize=(11, 7.5), sharex=True)
        for run in part_runs:
            bold = run in ("pipelined-271", "pipelined-16384")
            t, b = series(rows, run, "wan_bytes_received_per_s")
            a1.plot(t, b, color=color(run), lw=2.2 if bold else 0.9, alpha=1 if bold else 0.7, marker="o" if bold else None,
                    ms=2.5, label=f"{run}: received by site 2")
            t, o = series(rows, run, "site1_ops_per_s")
            a2.plot(t, o, color=color(run), lw=2.2 if bold else 0.9, alpha=1 if bold else 0.7, label=f"{run}: site 1 ops/s")
        if cap:
            a1.axhline(cap, color="#444444", lw=1, ls="--", label=f"link rate ({si(cap)}B/s per direction)")
        a1.set_ylim(bottom=0)
        a1.yaxis.set_major_formatter(FuncFormatter(si))
        a1.set_ylabel("WAN bytes per second (B/s)")
        a2.set_ylim(bottom=0)
        a2.yaxis.set_major_formatter(FuncFormatter(si))
        a2.set_ylabel("site-1 client ops per second (ops/s)")
        finish(fig, [a1, a2], meta, "WAN throughput by partition count: 271 vs 16384 (pipelined; 2048, 5120 thin)",
               os.path.join(out, "wan_load_partitions.png"))

    # 3. on-apply vs pipelined.
    ack_runs = [r for r in ("on-apply-271", "pipelined-271") if r in wan_runs]
    if ack_runs:
        fig, (a1, a2, a3) = plt.subplots(3, 1, figsize=(11, 9), sharex=True)
        for run in ack_runs:
            t, b = series(rows, run, "wan_bytes_received_per_s")
            a1.plot(t, b, color=color(run), lw=1.8, marker="o", ms=2, label=f"{run}: received by site 2")
            t, q = series(rows, run, "queue_events")
            a2.plot(t, q, color=color(run), lw=1.8, label=run)
            t, lag = series(rows, run, "lag_ms_max")
            a3.plot(t, lag, color=color(run), lw=1.8, label=f"{run}: oldest unapplied change, max over site-1 nodes")
            for ax in (a1, a2, a3):
                mark_stop(ax, meta, run, label=ax is a1)
        if cap:
            a1.axhline(cap, color="#444444", lw=1, ls="--", label=f"link rate ({si(cap)}B/s)")
        a1.set_ylim(bottom=0)
        a1.yaxis.set_major_formatter(FuncFormatter(si))
        a1.set_ylabel("WAN bytes per second (B/s)")
        a2.set_ylim(bottom=0)
        a2.yaxis.set_major_formatter(FuncFormatter(si))
        a2.set_ylabel("events queued for site 2 (events)")
        a3.set_ylim(bottom=0)
        a3.set_ylabel("publish lag (ms)")
        finish(fig, [a1, a2, a3], meta, "Ack on apply vs pipelined (ack on receipt), 271 partitions",
               os.path.join(out, "wan_load_ack.png"))

    # 4. The outage run(s).
    outage_runs = [r["name"] for r in meta["runs"] if r.get("outage")]
    if outage_runs:
        fig, (a1, a2, a3, a4) = plt.subplots(4, 1, figsize=(11, 12), sharex=True)
        for run in outage_runs:
            c = color(run)
            t, b = series(rows, run, "wan_bytes_received_per_s")
            a1.plot(t, b, color=c, lw=1.5, marker="o", ms=2, label=f"{run}: received by site 2")
            t, q = series(rows, run, "queue_events")
            a2.plot(t, q, color=c, lw=1.8, label=f"{run}: events queued for site 2")
            t, mem = series(rows, run, "queue_bytes_primary", 1 / 1048576)
            a3.plot(t, mem, color=c, lw=1.5, label=f"{run}: partition log in memory (primaries)")
            t, jr = series(rows, run, "journal_bytes", 1 / 1048576)
            a3.plot(t, jr, color=c, lw=1.5, ls="--", label=f"{run}: journal on disk")
            t, o = series(rows, run, "site1_ops_per_s")
            a4.plot(t, o, color=c, lw=1.5, label=f"{run}: site-1 client ops/s")
            for ax in (a1, a2, a3, a4):
                mark_stop(ax, meta, run, label=ax is a1)
        if cap:
            a1.axhline(cap, color="#444444", lw=1, ls="--", label=f"link rate ({si(cap)}B/s)")
        for ax in (a1, a2, a3, a4):
            shade_outage(ax, meta)
        budget = meta["settings"].get("memory_budget")
        if budget:
            a3.text(0.5, 0.95, f"wan.memory_budget = {budget} per node (log bytes of primaries and backups)",
                    transform=a3.transAxes, fontsize=7, va="top", ha="center")
        a1.set_ylim(bottom=0)
        a1.yaxis.set_major_formatter(FuncFormatter(si))
        a1.set_ylabel("WAN bytes per second (B/s)")
        a2.set_ylim(bottom=0)
        a2.yaxis.set_major_formatter(FuncFormatter(si))
        a2.set_ylabel("events queued, all\nsite-1 nodes (events)")
        a3.set_ylim(bottom=0)
        a3.set_ylabel("queue bytes, all\nsite-1 nodes (MiB)")
        a4.set_ylim(bottom=0)
        a4.yaxis.set_major_formatter(FuncFormatter(si))
        a4.set_ylabel("client ops per second (ops/s)")
        finish(fig, [a1, a2, a3, a4], meta, "Link outage in the middle of the write phase (pipelined)",
               os.path.join(out, "wan_load_outage.png"))

    # 5. Client rate per run.
    fig, ax = plt.subplots(figsize=(11, 5))
    rates = [r["site1_ops_per_s"] for r in meta["runs"]]
    ax.bar(runs, rates, color=[color(r) for r in runs])
    for i, v in enumerate(rates):
        ax.text(i, v, f"{v:,.0f}", ha="center", va="bottom", fontsize=8)
    off = next((r["site1_ops_per_s"] for r in meta["runs"] if r["name"] == "wan-off"), None)
    if off:
        ax.axhline(0.9 * off, color="#444444", lw=1, ls="--", label="90% of WAN off (target)")
        ax.legend(loc="best", fontsize=8)
    ax.set_ylabel("site-1 client ops per second, mean (ops/s)")
    ax.set_xlabel("run")
    ax.yaxis.set_major_formatter(FuncFormatter(si))
    ax.set_title("Site-1 client rate (50% SET / 50% GET) per run, WAN on vs off")
    ax.grid(alpha=0.3, axis="y")
    fig.text(0.5, 0.005, footer(meta), ha="center", fontsize=6.5, color="#555555")
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    path = os.path.join(out, "wan_load_clients.png")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    print(f"chart: {path}")


if __name__ == "__main__":
    main()
