#!/usr/bin/env bash
# Throughput of a 3-node site with `redis-benchmark --cluster` (it reads the
# slot map and sends each key to its primary), backups = 0 vs backups = 1
# with replication = "sync", in the same run. Target: sync replication
# costs under 40% of ops/s.
#
# Environment: N [100000], CLIENTS [50], TESTS ["set,get,incr,hset"],
# PIPELINE [1]; DELTAGRID_BIN / DELTAGRID_BUILD as in bench/common.sh.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
N=${N:-100000}
CLIENTS=${CLIENTS:-50}
TESTS=${TESTS:-set,get,incr,hset}
PIPELINE=${PIPELINE:-1}
find_deltagrid || { say "deltagrid: $DG_STATUS"; exit 1; }
echo "Site throughput, redis-benchmark --cluster -t $TESTS -n $N -c $CLIENTS -P $PIPELINE -r 100000, $(date -u +%Y-%m-%dT%H%M%SZ)"
machine_line
echo
declare -A RPS
for backups in 0 1; do
    start_site "$backups"
    while IFS=, read -r test rps _; do
        test=${test//\"/}; rps=${rps//\"/}
        [[ $test == test ]] && continue
        RPS[$backups,$test]=$rps
    done < <(redis-benchmark --cluster -p "${SITE_PORTS[0]}" -t "$TESTS" -n "$N" -c "$CLIENTS" -P "$PIPELINE" \
        -r 100000 --csv 2>/dev/null)
    bench_cleanup
    BENCH_PIDS=()
done
printf '| test | backups=0 ops/s | backups=1 sync ops/s | cost of sync |\n|------|---:|---:|---:|\n'
for test in $(echo "$TESTS" | tr ',' ' ' | tr '[:lower:]' '[:upper:]'); do
    a=${RPS[0,$test]:-} b=${RPS[1,$test]:-}
    if [[ -n $a && -n $b ]]; then
        cost=$(awk -v a="$a" -v b="$b" 'BEGIN { printf "%.0f%%", (1 - b / a) * 100 }')
        printf '| %s | %s | %s | %s |\n' "$test" "$a" "$b" "$cost"
    else
        printf '| %s | %s | %s | not measured |\n' "$test" "${a:-error}" "${b:-error}"
    fi
done
