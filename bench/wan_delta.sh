#!/usr/bin/env bash
# GemFire's WAN delta experiment (docs/benchmarks.md experiment 1): two sites of three
# `deltagrid server` processes, delta off then on, with `deltagrid bench
# wan-delta`. As root, each site runs in its own network namespace
# (bench/netns.sh: ns_dg1 10.77.0.1 and ns_dg2 10.77.0.2, joined through
# a link namespace shaped with tc in each direction) and the benchmark
# client runs in site 1's, so WAN traffic crosses the emulated link. Otherwise, or if the
# namespaces cannot be made, both sites run on loopback, and the output
# says so loudly.
#
# usage: bash bench/wan_delta.sh [deltagrid bench wan-delta options]
#   e.g. bash bench/wan_delta.sh --seconds 20 --objects 2000
#        bash bench/wan_delta.sh --smoke      (2 s per phase, 50 objects, into a temporary --out)
# Results: <out>/wan_delta.json, <out>/wan_delta.csv and the charts
# <out>/wan_delta_bytes.png, <out>/wan_delta_updates.png (--out, default
# docs/bench; --smoke and --out: see bench/common.sh).
#
# Environment: WAN_DELAY [10ms], WAN_JITTER [1ms], WAN_RATE [200mbit] (bench/netns.sh);
#   WAN_PIN_SITES=1: each site on half the CPUs (bench/wan_common.sh);
#   WAN_NETNS=0 forces loopback; DELTAGRID_BIN, DELTAGRID_BUILD=0 as in
#   bench/common.sh (the binary is looked for under $CARGO_TARGET_DIR when set);
#   PLOT_PYTHON: a python with matplotlib (default: bench/.venv, then
#   tests/python/.venv; bench/.venv is created with matplotlib if neither has it).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
source "$BENCH_ROOT/bench/netns.sh"
source "$BENCH_ROOT/bench/wan_common.sh"

bench_args "$@"
args=("${ARGS[@]}")
need_deltagrid

echo "WAN delta propagation (GemFire experiment, docs/benchmarks.md experiment 1), $(date -u +%Y-%m-%dT%H%M%SZ)$( ((SMOKE)) && echo ', smoke run')"
machine_line
echo
echo "binary: $DG_BIN"

wan_placement wan-delta
echo "command: $(printf '%q ' "${RUN[@]}" "${args[@]}")"
echo
"${RUN[@]}" "${args[@]}"

# Charts.
echo
chart plot_wan_delta.py "$OUT/wan_delta.json" "$OUT/wan_delta.csv" "$OUT"
echo "results: $OUT/wan_delta.json, $OUT/wan_delta.csv"
