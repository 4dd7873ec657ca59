#!/usr/bin/env bash
# Where site 1's CPU goes during one `bench/wan_load.sh` run: a flat perf
# profile of site 1's CPU and its interrupts per second, both taken in the
# writing phase, with each symbol's share turned into µs per client op
# (the CPU is saturated in these runs, so share x 1 s / client ops per s).
# Compare two with bench/profile_diff.py. Needs root (perf -C, netns) and
# WAN_PIN_SITES=1 placement; one run per call.
#
# usage: bash bench/wan_profile.sh RUN TAG [OUTDIR]
#   RUN   a wan-load run name (wan-off-mirror, pipelined-271, pipelined-16384...)
#   TAG   names the output files: OUTDIR/TAG-RUN.{log,perf,top,irq}
#   e.g.  DELTAGRID_BIN=/tmp/a/deltagrid DELTAGRID_BUILD=0 bash bench/wan_profile.sh pipelined-271 a
#         python3 bench/profile_diff.py OUT/a-wan-off-mirror OUT/a-pipelined-271
# Environment: as bench/wan_load.sh (DELTAGRID_BIN, DELTAGRID_BUILD, WAN_RATE...);
#   PROFILE_CPU [0] the CPU site 1 runs on; PROFILE_SECONDS [8] for the
#   interrupt count, then as long for the profile; RUN_SECONDS [25] (the
#   writing phase must outlast 6 s + 2 x PROFILE_SECONDS).
set -euo pipefail
run=${1:?usage: wan_profile.sh RUN TAG [OUTDIR]}
tag=${2:?usage: wan_profile.sh RUN TAG [OUTDIR]}
out=${3:-/tmp/deltagrid-profile}
cpu=${PROFILE_CPU:-0}
secs=${PROFILE_SECONDS:-8}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
command -v perf >/dev/null || { echo "perf is not installed (apt-get install linux-perf)"; exit 1; }
mkdir -p "$out"
base=$out/$tag-$run
log=$base.log

WAN_PIN_SITES=1 bash "$root/bench/wan_load.sh" --seconds "${RUN_SECONDS:-25}" --runs "$run" --out "$base.bench" >"$log" 2>&1 &
bench=$!
for _ in $(seq 1 600); do
    grep -q "keys preloaded" "$log" 2>/dev/null && break
    kill -0 "$bench" 2>/dev/null || break
    sleep 1
done
# Into the writing phase, past the clients' ramp-up.
sleep 6

# Softirqs and interrupts of $cpu, per second.
counts() {
    awk -v c=$((cpu + 2)) 'NR > 1 {print $1, $c}' /proc/softirqs
    awk -v c=$((cpu + 2)) '$1 ~ /^(LOC|RES|CAL|TLB):$/ {print $1, $c}' /proc/interrupts
}
# Counted before the profile, whose own sampling timer would add ~2,000
# local timer interrupts a second.
counts >"$base.irq0"
sleep "$secs"
counts >"$base.irq1"
perf record -C "$cpu" -F 1999 -o "$base.perf" -- sleep "$secs" 2>/dev/null
paste "$base.irq0" "$base.irq1" | awk -v s="$secs" '{printf "%s %.0f/s\n", $1, ($4 - $2) / s}' >"$base.irq"
rm -f "$base.irq0" "$base.irq1"
wait "$bench" || true

rate=$(sed -nE 's/^clients: site 1 ([0-9]+) ops\/s.*/\1/p' "$log" | head -1)
[[ -n $rate ]] || { echo "no client rate in $log"; exit 1; }
{
    echo "# rate $rate"
    perf report -i "$base.perf" --no-children --sort sym 2>/dev/null | grep -v '^#' | grep -v '^$'
} >"$base.top"
echo "$run ($tag): $rate client ops/s; $(grep 'µs per client op' "$log" | sed 's/.*nodes while/nodes while/')"
echo "interrupts on CPU $cpu: $(grep -vE ' 0/s$' "$base.irq" | tr '\n' ' ')"
echo "profile: $base.top (compare: python3 bench/profile_diff.py A B, with A and B as $out/TAG-RUN)"
