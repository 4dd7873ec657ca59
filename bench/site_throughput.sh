#!/usr/bin/env bash
# Throughput of a 3-node site with `redis-benchmark --cluster` (it reads the
# slot map and sends each key to its primary), backups = 0 vs backups = 1
# with replication = "sync", in the same run. Target: sync replication
# costs under 40% of ops/s.
#
# usage: bash bench/site_throughput.sh [--out DIR] [--smoke]
# Writes <out>/site_throughput.csv (redis-benchmark's columns, one row per
# test and site, with the nodes' CPU time per request) and the chart <out>/site_throughput.png (--out: default
# docs/bench; --smoke: N=2000, into a temporary directory; see
# bench/common.sh). Loopback only.
#
# Environment: N [400000; smoke 2000]: in --cluster mode redis-benchmark
# runs a thread per node and notices the end on a 250 ms timer, so a run's
# time is rounded up to 250 ms: runs must be long (100,000 requests took
# 1.5-4 s, up to 15% off), CLIENTS [50], TESTS ["set,get,incr,hset"],
# PIPELINE [1], ROUNDS [1]: with more, backups = 0 and 1 alternate ROUNDS
# times on fresh sites and the table gives each round's cost and the median
# (one pair is at the mercy of this machine's noise). Each test is its own
# redis-benchmark run, so that the three nodes' CPU time (user + system)
# per request is measured per test: it moves much less with the machine's
# other load than ops/s does;
# DELTAGRID_BIN / DELTAGRID_BUILD / PLOT_PYTHON as in bench/common.sh.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
bench_args "$@"
bench_no_more_args
N=${N:-$( ((SMOKE)) && echo 2000 || echo 400000)}
CLIENTS=${CLIENTS:-50}
TESTS=${TESTS:-set,get,incr,hset}
PIPELINE=${PIPELINE:-1}
ROUNDS=${ROUNDS:-1}
command -v redis-benchmark >/dev/null || die "redis-benchmark not found (apt-get install redis-tools)"
need_deltagrid

STAMP=$(date -u +%Y-%m-%dT%H%M%SZ)
MACHINE=$(machine_line)
CSV=$OUT/site_throughput.csv
echo "Site throughput, 3 nodes on loopback, redis-benchmark --cluster -t $TESTS -n $N -c $CLIENTS -P $PIPELINE -r 100000, $STAMP$( ((SMOKE)) && echo ", smoke run")"
echo "Machine: $MACHINE"
echo
echo "date,test,d,P,clients,requests,target,status,rps,avg_latency_ms,min_latency_ms,p50_latency_ms,p95_latency_ms,p99_latency_ms,max_latency_ms,nodes_cpu_us_per_op" >"$CSV"
declare -A RPS CPU
for ((round = 1; round <= ROUNDS; round++)); do
for backups in 0 1; do
    target="backups=$backups"
    ((backups == 0)) || target+=" sync"
    ((ROUNDS == 1)) || target+=" round $round"
    start_site "b$backups-r$round" "$backups" 3
    got=0
    for test in $(echo "$TESTS" | tr ',' ' '); do
        ticks=$(site_cpu_ticks)
        redis-benchmark --cluster -p "${SITE_PORTS[0]}" -t "$test" -n "$N" -c "$CLIENTS" -P "$PIPELINE" \
            -r 100000 --csv >"$BENCH_WORK/rb.csv" 2>"$BENCH_WORK/rb.err" || true
        cpu=$(us_per_op $(($(site_cpu_ticks) - ticks)) "$N")
        # Header names, not positions: "test","rps",...,"p50_latency_ms",...
        row=$(awk -F, -v pre="$STAMP" -v d=3 -v p="$PIPELINE" -v c="$CLIENTS" -v n="$N" -v t="$target" -v cpu="$cpu" '
            { gsub(/"/, "") }
            $1 == "test" { for (i = 1; i <= NF; i++) col[$i] = i; next }
            ("rps" in col) && NF > 1 { print pre "," $col["test"] "," d "," p "," c "," n "," t ",ok," $col["rps"] "," \
                     $col["avg_latency_ms"] "," $col["min_latency_ms"] "," $col["p50_latency_ms"] "," \
                     $col["p95_latency_ms"] "," $col["p99_latency_ms"] "," $col["max_latency_ms"] "," cpu }' \
            "$BENCH_WORK/rb.csv")
        [[ -n $row ]] || continue
        echo "$row" >>"$CSV"
        IFS=, read -r _ name _ _ _ _ _ _ rps _ <<<"$row"
        RPS[$round,$backups,$name]=$rps
        CPU[$round,$backups,$name]=$cpu
        got=$((got + 1))
    done
    if ((got == 0)); then
        die "redis-benchmark --cluster gave no results against the site with backups = $backups: $(head -3 "$BENCH_WORK/rb.err")"
    fi
    stop_started
done
done
{
    printf 'test\tround\tbackups=0 ops/s\tbackups=1 sync ops/s\tcost of sync\tnode CPU µs/op b=0\tb=1\n'
    for test in $(echo "$TESTS" | tr ',' ' ' | tr '[:lower:]' '[:upper:]'); do
        costs=()
        for ((round = 1; round <= ROUNDS; round++)); do
            a=${RPS[$round,0,$test]:-} b=${RPS[$round,1,$test]:-}
            if [[ -n $a && -n $b ]]; then
                cost=$(awk -v a="$a" -v b="$b" 'BEGIN { printf "%.1f", (1 - b / a) * 100 }')
                costs+=("$cost")
                printf '%s\t%s\t%.0f\t%.0f\t%.0f%%\t%s\t%s\n' "$test" "$round" "$a" "$b" "$cost" \
                    "${CPU[$round,0,$test]:-}" "${CPU[$round,1,$test]:-}"
            else
                printf '%s\t%s\t%s\t%s\tnot measured\t\t\n' "$test" "$round" "${a:-error}" "${b:-error}"
            fi
        done
        if ((ROUNDS > 1 && ${#costs[@]} > 0)); then
            median=$(printf '%s\n' "${costs[@]}" | sort -g | awk '{ v[NR] = $1 } END { printf "%.0f%%", (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }')
            printf '%s\tmedian\t\t\t%s\t\t\n' "$test" "$median"
        fi
    done
} | markdown_table
echo
echo "CSV: $CSV"

chart plot_throughput.py "$CSV" "$OUT/site_throughput.png" "$MACHINE" \
    "3-node site throughput, backups 0 vs 1 sync, redis-benchmark --cluster -r 100000, loopback$( ((SMOKE)) && echo " [SMOKE RUN]")"
