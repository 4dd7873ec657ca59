#!/usr/bin/env bash
# GemFire's WAN delta experiment (REFERENCE.md #1): two sites of three
# `deltagrid server` processes, delta off then on, with `deltagrid bench
# wan-delta`. As root, each site runs in its own network namespace
# (bench/netns.sh: ns_dg1 10.77.0.1 and ns_dg2 10.77.0.2, joined by a veth
# pair shaped with tc on both ends) and the benchmark client runs in site
# 1's, so WAN traffic crosses the emulated link. Otherwise, or if the
# namespaces cannot be made, both sites run on loopback, and the output
# says so loudly.
#
# usage: bash bench/wan_delta.sh [deltagrid bench wan-delta options]
#   e.g. bash bench/wan_delta.sh --seconds 20 --objects 2000
# Results: <out>/wan_delta.json, <out>/wan_delta.csv and the charts
# <out>/wan_delta_bytes.png, <out>/wan_delta_updates.png (--out, default docs/bench).
#
# Environment: WAN_DELAY [10ms], WAN_JITTER [1ms], WAN_RATE [200mbit] (bench/netns.sh);
#   WAN_NETNS=0 forces loopback; DELTAGRID_BIN, DELTAGRID_BUILD=0 as in
#   bench/common.sh (the binary is looked for under $CARGO_TARGET_DIR when set);
#   PLOT_PYTHON: a python with matplotlib (default: bench/.venv, then
#   tests/python/.venv; bench/.venv is created with matplotlib if neither has it).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
source "$BENCH_ROOT/bench/netns.sh"
source "$BENCH_ROOT/bench/wan_common.sh"

wan_binary
wan_args "$@"
args=("${ARGS[@]}")

echo "WAN delta propagation (GemFire experiment, REFERENCE.md #1), $(date -u +%Y-%m-%dT%H%M%SZ)"
machine_line
echo
echo "binary: $DG_BIN"

run=("$DG_BIN" bench wan-delta --out "$OUT")
if [[ ${WAN_NETNS:-1} != 0 ]] && netns_setup; then
    echo "link: $(netns_link)"
    if [[ ${NETNS_NO_DELAY:-0} == 1 ]]; then
        echo
        echo "*** NOTE: this kernel has no netem: the link is rate-limited ($WAN_RATE, tbf) but has NO added delay or jitter."
        echo
    fi
    run=(ip netns exec "$NETNS1" "${run[@]}"
         --site1-netns "$NETNS1" --site1-ip "$NETNS_IP1" --site2-netns "$NETNS2" --site2-ip "$NETNS_IP2"
         --link "$(netns_link)")
else
    why=${NETNS_WHY:-WAN_NETNS=0}
    echo
    echo "*** NO NETWORK EMULATION: $why."
    echo "*** Both sites run on 127.0.0.1 with no delay, jitter or rate limit; WAN figures are loopback figures."
    echo
    run+=(--link "loopback, no emulation ($why)")
fi
echo "command: $(printf '%q ' "${run[@]}" "${args[@]}")"
echo
"${run[@]}" "${args[@]}"

# Charts.
wan_plot_python
py=$PY
echo
if [[ -n $py ]]; then
    "$py" "$BENCH_ROOT/bench/plot_wan_delta.py" "$OUT/wan_delta.json" "$OUT/wan_delta.csv" "$OUT"
else
    echo "charts skipped: no python with matplotlib"
fi
echo "results: $OUT/wan_delta.json, $OUT/wan_delta.csv"
