#!/usr/bin/env bash
# Hazelcast's WAN-under-load experiment (docs/benchmarks.md experiment 2) with `deltagrid
# bench wan-load`: two sites of three `deltagrid server` processes, site 1's
# clients 50% SET / 50% GET, site 2's 100% GET; runs: WAN off, ack on-apply
# vs pipelined, partitions 271/2048/5120/16384, and a link outage. As root,
# each site runs in its own network namespace (bench/netns.sh: ns_dg1
# 10.77.0.1 and ns_dg2 10.77.0.2, joined through a link namespace shaped
# with tc in each direction); the benchmark and site 1's clients run in ns_dg1, site 2's
# clients in ns_dg2, and the outage is `ip -n ns_dg1 link set veth_dg1 down`
# ... `up`. Otherwise, or if the namespaces cannot be made, both sites run
# on loopback, the outage pauses site 1's publishers instead, and the
# output says so loudly.
#
# usage: bash bench/wan_load.sh [deltagrid bench wan-load options]
#   e.g. bash bench/wan_load.sh --seconds 40 --outage-seconds 30
#        bash bench/wan_load.sh --smoke            (~3 s per run, into a temporary --out)
# Results: <out>/wan_load.json, <out>/wan_load.csv and the charts
# <out>/wan_load_*.png (--out, default docs/bench; --smoke and --out: see
# bench/common.sh).
#
# Environment: WAN_DELAY [10ms], WAN_JITTER [1ms] (bench/netns.sh), WAN_RATE
#   [1gbit here: the link of every run but the outage runs], WAN_DRAIN_RATE
#   [200mbit: the outage runs' link, set with `bash bench/netns.sh rate`;
#   empty or = WAN_RATE: one rate for all];
#   WAN_PIN_SITES=1 gives each site half the CPUs (taskset; WAN_SITE1_CPUS,
#   WAN_SITE2_CPUS override), as separate data centers would have, and
#   runs the link's work on the receiving site's CPUs (WAN_LINK_CPUS=sender:
#   on the sending site's; bench/wan_common.sh);
#   WAN_NETNS=0 forces loopback; DELTAGRID_BIN, DELTAGRID_BUILD=0 as in
#   bench/common.sh (the binary is looked for under $CARGO_TARGET_DIR when set);
#   PLOT_PYTHON: a python with matplotlib (default: bench/.venv, then
#   tests/python/.venv; bench/.venv is created with matplotlib if neither has it).
set -euo pipefail
# The link has headroom over the write load (Hazelcast's 5 Gbps link
# carried at most ~1.5 Gbps), except in the outage runs, whose backlog
# must be able to fill it: WAN_DRAIN_RATE there.
WAN_RATE=${WAN_RATE:-1gbit}
WAN_DRAIN_RATE=${WAN_DRAIN_RATE-200mbit}
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
source "$BENCH_ROOT/bench/netns.sh"
source "$BENCH_ROOT/bench/wan_common.sh"

bench_args "$@"
args=("${ARGS[@]}")
need_deltagrid

echo "WAN under load (Hazelcast experiment, docs/benchmarks.md experiment 2), $(date -u +%Y-%m-%dT%H%M%SZ)$( ((SMOKE)) && echo ', smoke run')"
machine_line
echo
echo "binary: $DG_BIN"

wan_placement wan-load
if ((WAN_NETNS_UP)); then
    RUN+=(--link-rate "$WAN_RATE" --outage-dev "$NETNS_VETH1" --outage-netns "$NETNS1")
    if [[ -n $WAN_DRAIN_RATE && $WAN_DRAIN_RATE != "$WAN_RATE" ]]; then
        RUN+=(--drain-link-rate "$WAN_DRAIN_RATE" --set-link-rate "bash $(printf '%q' "$BENCH_ROOT/bench/netns.sh") rate")
    fi
else
    echo "*** The outage run pauses site 1's publishers instead of cutting a link."
    echo
fi
echo "command: $(printf '%q ' "${RUN[@]}" "${args[@]}")"
echo
rc=0
"${RUN[@]}" "${args[@]}" || rc=$?

# Charts (also after a failed check, when the result files were written).
echo
if [[ ! -s $OUT/wan_load.json ]]; then
    echo "no results written ($OUT/wan_load.json missing)"
else
    chart plot_wan_load.py "$OUT/wan_load.json" "$OUT/wan_load.csv" "$OUT"
fi
echo "results: $OUT/wan_load.json, $OUT/wan_load.csv"
exit "$rc"
