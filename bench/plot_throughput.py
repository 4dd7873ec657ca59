"""Bar chart of one bench/throughput.sh run: ops/s of redis-server and
deltagrid for each test and value size, one panel per pipeline depth
(-P 1 and -P 16 differ by ~10x, so they do not share an axis).

usage: plot_throughput.py RESULTS.csv OUT.png [MACHINE-DESCRIPTION]
"""

import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import FuncFormatter  # noqa: E402

TARGETS = [("redis", "Redis (redis-server)", "#d62728"), ("deltagrid", "deltagrid", "#1f77b4")]


def main() -> None:
    src, out = sys.argv[1], sys.argv[2]
    machine = sys.argv[3] if len(sys.argv) > 3 else ""
    with open(src, newline="") as f:
        rows = list(csv.DictReader(f))
    if not rows:
        sys.exit(f"{src}: no rows")

    pipelines = sorted({int(r["P"]) for r in rows})
    rps = {(r["test"], r["d"], int(r["P"]), r["target"]): float(r["rps"]) for r in rows if r["rps"]}
    configs = list(dict.fromkeys((r["test"], r["d"]) for r in rows))
    clients = rows[0]["clients"]

    fig, axes = plt.subplots(len(pipelines), 1, figsize=(11, 4.2 * len(pipelines)), squeeze=False)
    width = 0.38
    for ax, p in zip(axes[:, 0], pipelines):
        xs = range(len(configs))
        for k, (target, label, color) in enumerate(TARGETS):
            values = [rps.get((t, d, p, target), 0.0) for t, d in configs]
            offset = (k - 0.5) * width
            bars = ax.bar([x + offset for x in xs], values, width, label=label, color=color)
            for bar, v in zip(bars, values):
                text = f"{v / 1000:.0f}k" if v else "not run"
                ax.annotate(text, (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                            ha="center", va="bottom", fontsize=7, xytext=(0, 2), textcoords="offset points")
        ax.set_xticks(list(xs))
        ax.set_xticklabels([f"{t.upper()}\n-d {d} B" for t, d in configs])
        ax.set_ylabel("throughput (requests/s)")
        ax.set_xlabel("redis-benchmark test and value size (-d, bytes)")
        ax.set_title(f"pipeline -P {p}, {clients} clients")
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v / 1000:.0f}k"))
        top = max([rps.get((t, d, p, tg), 0.0) for t, d in configs for tg, _, _ in TARGETS] + [1.0])
        ax.set_ylim(0, top * 1.3)  # headroom so the legend never covers a bar label
        ax.legend(loc="upper left", ncol=2)
        ax.grid(axis="y", alpha=0.3)

    fig.suptitle(f"Single-node throughput: deltagrid vs Redis, redis-benchmark, loopback ({rows[0]['date']})")
    if machine:
        fig.text(0.5, 0.005, machine, ha="center", fontsize=7, color="#555555")
    fig.tight_layout(rect=(0, 0.02, 1, 0.97))
    fig.savefig(out, dpi=110)


if __name__ == "__main__":
    main()
