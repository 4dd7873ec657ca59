"""Bar chart of one redis-benchmark scenario (bench/throughput.sh,
bench/site_throughput.sh): requests/s of each target for each test and
value size, one panel per pipeline depth (-P 1 and -P 16 differ by ~10x,
so they do not share an axis). Targets are the CSV's `target` column, in
the order they first appear.

usage: plot_throughput.py RESULTS.csv OUT.png [MACHINE-DESCRIPTION [TITLE]]
"""

import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import FuncFormatter  # noqa: E402

LABELS = {"redis": "Redis (redis-server)", "deltagrid": "deltagrid"}
COLORS = {"redis": "#d62728", "deltagrid": "#1f77b4", "backups=0": "#1f77b4", "backups=1 sync": "#aec7e8"}
OTHER_COLORS = ["#2ca02c", "#ff7f0e", "#9467bd", "#8c564b"]


def main() -> None:
    src, out = sys.argv[1], sys.argv[2]
    machine = sys.argv[3] if len(sys.argv) > 3 else ""
    title = sys.argv[4] if len(sys.argv) > 4 else "Throughput, redis-benchmark, loopback"
    with open(src, newline="") as f:
        rows = list(csv.DictReader(f))
    if not rows:
        sys.exit(f"{src}: no rows")

    targets = list(dict.fromkeys(r["target"] for r in rows))
    pipelines = sorted({int(r["P"]) for r in rows})
    rps = {(r["test"], r["d"], int(r["P"]), r["target"]): float(r["rps"]) for r in rows if r["rps"]}
    configs = list(dict.fromkeys((r["test"], r["d"]) for r in rows))
    sizes = {d for _, d in configs}
    counts = list(dict.fromkeys(r["clients"] for r in rows))
    clients = f"{counts[0]} clients" if len(counts) == 1 else "clients as in the legend"

    fig, axes = plt.subplots(len(pipelines), 1, figsize=(11, (4.2 if len(targets) <= 4 else 5.2) * len(pipelines)), squeeze=False)
    width = 0.8 / len(targets)
    for ax, p in zip(axes[:, 0], pipelines):
        xs = range(len(configs))
        for k, target in enumerate(targets):
            values = [rps.get((t, d, p, target), 0.0) for t, d in configs]
            offset = (k - (len(targets) - 1) / 2) * width
            bars = ax.bar([x + offset for x in xs], values, width, label=LABELS.get(target, target),
                          color=COLORS.get(target, OTHER_COLORS[k % len(OTHER_COLORS)]))
            for bar, v in zip(bars, values):
                text = (f"{v / 1000:.0f}k" if v >= 10_000 else f"{v / 1000:.1f}k") if v else "not run"
                ax.annotate(text, (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                            ha="center", va="bottom", fontsize=7, xytext=(0, 2), textcoords="offset points")
        ax.set_xticks(list(xs))
        if len(sizes) > 1:
            ax.set_xticklabels([f"{t.upper()}\n-d {d} B" for t, d in configs])
            ax.set_xlabel("redis-benchmark test and value size (-d, bytes)")
        else:
            ax.set_xticklabels([t.upper() for t, _ in configs])
            ax.set_xlabel(f"redis-benchmark test (-d {next(iter(sizes))} bytes)")
        ax.set_ylabel("throughput (requests/s)")
        ax.set_title(f"pipeline -P {p}, {clients}")
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v / 1000:.0f}k"))
        top = max([rps.get((t, d, p, tg), 0.0) for t, d in configs for tg in targets] + [1.0])
        ax.set_ylim(0, top * 1.3)  # headroom so the legend never covers a bar label
        if len(targets) <= 4:
            ax.legend(loc="upper left", ncol=len(targets))
        else:  # below the panel, where any number of targets fits
            ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=4, fontsize=8)
        ax.grid(axis="y", alpha=0.3)

    fig.suptitle(f"{title} ({rows[0]['date']})")
    if machine:
        fig.text(0.5, 0.005, machine, ha="center", fontsize=7, color="#555555")
    fig.tight_layout(rect=(0, 0.02, 1, 0.97))
    fig.savefig(out, dpi=110)
    print(f"chart: {out}")


if __name__ == "__main__":
    main()
