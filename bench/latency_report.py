"""Tables, results and chart of one bench/latency.sh run.

Reads the JSON that each `deltagrid bench latency` run wrote (listed in a
manifest: target, label, rate, workload, json), prints Markdown tables,
writes OUT.json (every statistic of every run, settings, machine) and
OUT.csv, and draws OUT.png when matplotlib can be imported. The tables
need only the standard library, so they print even without matplotlib.

usage: latency_report.py --manifest M.tsv --out PREFIX --machine TEXT --date STAMP
                         --nodes N --smoke 0|1 --command TEXT
"""

import argparse
import csv
import json
import sys

ECHO = "echo"
ECHO_LABEL = "loopback echo (floor, median of its runs)"
STATS = ["samples", "avg_best_80_us", "mean_us", "p50_us", "p90_us", "p99_us", "p999_us", "max_us"]
# docs/benchmarks.md experiment 4, GigaSpaces over a 1 Gbps LAN: (not replicated, sync replicated), µs, average of the best 80%.
THEIRS = {"hash8": (290, 690), "empty": (270, 630)}
ORDER = [ECHO, "dg-node", "dg-b0", "dg-b1", "redis", "redis-wait"]
SHORT = {ECHO: "echo floor", "dg-node": "deltagrid node", "dg-b0": "deltagrid b=0", "dg-b1": "deltagrid b=1 sync", "redis": "Redis",
         "redis-wait": "Redis + WAIT 1 0"}
COLORS = {ECHO: "#7f7f7f", "dg-node": "#2ca02c", "dg-b0": "#1f77b4", "dg-b1": "#aec7e8", "redis": "#d62728", "redis-wait": "#ff9896"}
# (label, base target, replicated target) for the "what synchronous replication adds" columns.
COSTS = [("deltagrid sync adds", "dg-b0", "dg-b1"), ("Redis WAIT adds", "redis", "redis-wait")]


def median(vs):
    vs = sorted(vs)
    mid = len(vs) // 2
    return vs[mid] if len(vs) % 2 else (vs[mid - 1] + vs[mid]) / 2


def load(manifest):
    """One row per (series, rate, workload): series is a target or ECHO. The
    echo floor, measured next to every target, becomes one row: the median
    of each statistic over those runs (every run is kept in `floor_runs`)."""
    rows, labels, floors = [], {ECHO: ECHO_LABEL}, {}
    with open(manifest, newline="") as f:
        for m in csv.DictReader(f, delimiter="\t"):
            with open(m["json"]) as jf:
                run = json.load(jf)
            labels[m["target"]] = m["label"]
            for r in run["results"]:
                if r.get("error"):
                    sys.exit(f"{m['target']} {m['workload']}: {r['error']}")
                common = {"rate": int(m["rate"]), "workload": m["workload"], "workload_label": r["label"],
                          "ops": run["ops"], "warmup": run["warmup"], "request_bytes": r["request_bytes"]}
                rows.append({"series": m["target"], "label": m["label"], "wait_replicas": run.get("wait_replicas", 0),
                             **common, **r["server"]})
                if r.get("echo_floor"):
                    floors.setdefault((common["rate"], m["workload"]), []).append(
                        {"next_to": m["target"], **common, **r["echo_floor"]})
    for runs in floors.values():
        row = {"series": ECHO, "label": f"loopback echo (floor), median of {len(runs)} runs", "wait_replicas": 0,
               **{k: runs[0][k] for k in ["rate", "workload", "workload_label", "ops", "warmup", "request_bytes"]}}
        row.update({s: median([f[s] for f in runs]) for s in STATS})
        row["samples"] = round(row["samples"])
        row["floor_runs"] = runs
        rows.append(row)
    return rows, labels


def markdown(headers, body):
    widths = [max(len(str(x)) for x in col) for col in zip(headers, *body)]
    fmt = lambda cells: "| " + " | ".join(  # noqa: E731
        f"{c:<{w}}" if i == 0 else f"{c:>{w}}" for i, (c, w) in enumerate(zip(map(str, cells), widths))) + " |"
    print(fmt(headers))
    print("|" + "|".join("-" * (w + 2) if i == 0 else "-" * (w + 1) + ":" for i, w in enumerate(widths)) + "|")
    for row in body:
        print(fmt(row))


def rate_text(rate):
    return "unthrottled" if rate == 0 else f"{rate} ops/s"


def sort_key(r):
    return r["rate"], r["workload"] != "hash8", r["workload"], ORDER.index(r["series"])


def tables(rows, labels):
    series = [s for s in ORDER if s in labels]
    keys = list(dict.fromkeys((r["workload"], r["rate"]) for r in sorted(rows, key=sort_key)))
    print("\nColumns: " + "; ".join(f"{SHORT[s]} = {labels[s]}" for s in series))
    by = {(r["series"], r["workload"], r["rate"]): r for r in rows}
    costs = [c for c in COSTS if c[1] in labels and c[2] in labels]
    # A synchronous write waits, after the primary has it, for one round
    # trip to its backup; here that link is as fast as the client's, whose
    # round trip the echo floor is. So no design adds less than floor / b0.
    bound = all(s in labels for s in (ECHO, "dg-b0", "dg-b1"))
    if bound:
        print("\nleast sync can add = one more round trip of the echo floor, over deltagrid b=0 (the backup is as far "
              "from the primary as the client: one loopback hop); beyond it = b=1 - b=0 - floor")
    for stat, title in [("avg_best_80_us", "average of the best 80% (GigaSpaces' figure)"), ("p50_us", "p50")]:
        print(f"\nLatency per op, {title}, µs:\n")
        body = []
        for w, rate in keys:
            cells = [by[(s, w, rate)][stat] if (s, w, rate) in by else None for s in series]
            row = [next(r["workload_label"] for r in rows if r["workload"] == w), rate_text(rate)]
            row += ["-" if v is None else f"{v:.1f}" for v in cells]
            for _, a, b in costs:
                va, vb = by.get((a, w, rate)), by.get((b, w, rate))
                row.append(f"{(vb[stat] / va[stat] - 1) * 100:+.0f}%" if va and vb else "-")
            if bound:
                floor, b0, b1 = (by.get((s, w, rate)) for s in (ECHO, "dg-b0", "dg-b1"))
                row.append(f"{floor[stat] / b0[stat] * 100:+.0f}%" if floor and b0 else "-")
                row.append(f"{b1[stat] - b0[stat] - floor[stat]:+.1f}" if floor and b0 and b1 else "-")
            body.append(row)
        markdown(["workload", "rate"] + [SHORT[s] for s in series] + [c[0] for c in costs]
                 + (["least sync can add", "deltagrid sync adds beyond it, µs"] if bound else []), body)
    print("\nGigaSpaces (theirs, docs/benchmarks.md experiment 4, 1 Gbps LAN, ping 208 µs), average of the best 80%: "
          + "; ".join(f"{w}: {a} -> {b} µs sync replicated ({(b / a - 1) * 100:+.0f}%)" for w, (a, b) in THEIRS.items()))
    print("\nEvery statistic, µs:\n")
    body = [[r["workload_label"], rate_text(r["rate"]), SHORT[r["series"]], r["samples"]]
            + [f"{r[s]:.1f}" for s in STATS[1:]] for r in sorted(rows, key=sort_key)]
    markdown(["workload", "rate", "against", "ops"] + [s[:-3].replace("_", " ") for s in STATS[1:]], body)


def write(rows, args):
    meta = {"scenario": "latency", "date": args.date, "machine": args.machine, "command": args.command,
            "nodes": args.nodes, "smoke": bool(args.smoke), "unit": "microseconds",
            "method": "one client, one op in flight, TCP_NODELAY, loopback; warm-up not counted",
            "theirs_gigaspaces_us": THEIRS, "runs": rows}
    with open(args.out + ".json", "w") as f:
        json.dump(meta, f, indent=1)
        f.write("\n")
    cols = ["series", "label", "workload", "rate", "ops", "warmup", "wait_replicas", "request_bytes"] + STATS
    with open(args.out + ".csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(cols)
        for r in rows:
            w.writerow([r[c] for c in cols])
    print(f"\nresults: {args.out}.json, {args.out}.csv")


def chart(rows, labels, args):
    try:
        import matplotlib
    except ImportError:
        print("chart skipped: this python has no matplotlib (see PLOT_PYTHON in bench/common.sh)")
        return
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    series = [s for s in ORDER if s in labels]
    rates = sorted({r["rate"] for r in rows})
    workloads = list(dict.fromkeys(r["workload"] for r in sorted(rows, key=lambda r: r["workload"] != "hash8")))
    wl = {r["workload"]: r["workload_label"] for r in rows}
    by = {(r["series"], r["workload"], r["rate"]): r for r in rows}
    # Room for the bars and most p99 marks; a p99 above it is drawn at the top with its value.
    top = max(max(r["avg_best_80_us"] for r in rows) * 1.8, 1.0)
    fig, axes = plt.subplots(1, len(rates), figsize=(max(11.0, 6.2 * len(rates)), 5.6), squeeze=False, sharey=True)
    width = 0.8 / len(series)
    for ax, rate in zip(axes[0], rates):
        for k, s in enumerate(series):
            xs = [i + (k - (len(series) - 1) / 2) * width for i in range(len(workloads))]
            got = [by.get((s, w, rate)) for w in workloads]
            vals = [g["avg_best_80_us"] if g else 0 for g in got]
            bars = ax.bar(xs, vals, width, color=COLORS[s], label=labels[s], edgecolor="white", linewidth=0.5)
            for bar, v in zip(bars, vals):
                ax.annotate(f"{v:.0f}", (bar.get_x() + bar.get_width() / 2, v), ha="center", va="bottom",
                            fontsize=7, xytext=(0, 1), textcoords="offset points")
            p99 = [g["p99_us"] if g else None for g in got]
            ax.scatter(xs, [v if v is not None and v <= top * 0.93 else None for v in p99], marker="_", s=120,
                       color="black", zorder=3, label="p99 (▲ value: above the scale)" if k == 0 else None)
            for x, v in zip(xs, p99):
                if v is not None and v > top * 0.93:
                    ax.scatter([x], [top * 0.95], marker="^", s=25, color="black", zorder=3)
                    ax.annotate(f"{v:.0f}", (x, top * 0.95), ha="center", va="top", fontsize=6.5,
                                xytext=(0, -4), textcoords="offset points")
        ax.set_xticks(range(len(workloads)))
        ax.set_xticklabels([wl[w] for w in workloads])
        ax.set_xlabel("workload (one op in flight)")
        ax.set_title(rate_text(rate) if rate == 0 else f"throttled to {rate_text(rate)}")
        ax.set_ylim(0, top)
        ax.grid(axis="y", alpha=0.3)
    axes[0][0].set_ylabel("latency per op, µs (bars: average of the best 80%)")
    handles, names = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, names, loc="lower center", ncol=3, fontsize=8, frameon=False, bbox_to_anchor=(0.5, 0.04))
    what = ["deltagrid" + (" vs Redis" if "redis" in labels or "redis-wait" in labels else "")]
    if "dg-b0" in labels and "dg-b1" in labels:
        what.append("backups 0 vs 1 sync")
    fig.suptitle("Single-client latency (GigaSpaces' method): " + ", ".join(what + ["loopback"])
                 + (" [SMOKE RUN]" if args.smoke else ""), fontsize=11)
    ops = sorted({(r["rate"], r["ops"]) for r in rows})
    fig.text(0.5, 0.005, f"{args.date}; {args.machine}; ops per run: "
             + ", ".join(f"{n} " + ("unthrottled" if rt == 0 else f"at {rt} ops/s") for rt, n in ops), ha="center", fontsize=6.5, color="#555555")
    fig.tight_layout(rect=(0, 0.16, 1, 0.96))
    fig.savefig(args.out + ".png", dpi=110)
    print(f"chart: {args.out}.png")


def main():
    p = argparse.ArgumentParser()
    for a in ["manifest", "out", "machine", "date", "command"]:
        p.add_argument("--" + a, required=True)
    p.add_argument("--nodes", type=int, required=True)
    p.add_argument("--smoke", type=int, default=0)
    args = p.parse_args()
    rows, labels = load(args.manifest)
    if not rows:
        sys.exit(f"{args.manifest}: no runs")
    tables(rows, labels)
    write(rows, args)
    chart(rows, labels, args)


if __name__ == "__main__":
    main()
