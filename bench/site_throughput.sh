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
# 1.5-4 s, up to 15% off), CLIENTS ["50,200"; smoke 50]: the client counts
# to run each test with. A site's throughput is its highest rate over
# them: with 50 clients (17 per node, one request in flight each) the site
# with backups is partly idle, waiting on round trips (7-12% idle CPU
# measured), so its rate there is the round trip's, not the site's
# capacity. The target is checked on the peaks; every count is in the
# table. TESTS ["set,get,incr,hset"],
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
CLIENTS=${CLIENTS:-$( ((SMOKE)) && echo 50 || echo 50,200)}
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
    start_site "b$backups-r$round" "$backups" 3
    got=0
    for clients in $(echo "$CLIENTS" | tr ',' ' '); do
    target="backups=$backups"
    ((backups == 0)) || target+=" sync"
    [[ $CLIENTS != *,* ]] || target+=" ($clients clients)"
    ((ROUNDS == 1)) || target+=" round $round"
    for test in $(echo "$TESTS" | tr ',' ' '); do
        ticks=$(site_cpu_ticks)
        redis-benchmark --cluster -p "${SITE_PORTS[0]}" -t "$test" -n "$N" -c "$clients" -P "$PIPELINE" \
            -r 100000 --csv >"$BENCH_WORK/rb.csv" 2>"$BENCH_WORK/rb.err" || true
        cpu=$(us_per_op $(($(site_cpu_ticks) - ticks)) "$N")
        # Header names, not positions: "test","rps",...,"p50_latency_ms",...
        row=$(awk -F, -v pre="$STAMP" -v d=3 -v p="$PIPELINE" -v c="$clients" -v n="$N" -v t="$target" -v cpu="$cpu" '
            { gsub(/"/, "") }
            $1 == "test" { for (i = 1; i <= NF; i++) col[$i] = i; next }
            ("rps" in col) && NF > 1 { print pre "," $col["test"] "," d "," p "," c "," n "," t ",ok," $col["rps"] "," \
                     $col["avg_latency_ms"] "," $col["min_latency_ms"] "," $col["p50_latency_ms"] "," \
                     $col["p95_latency_ms"] "," $col["p99_latency_ms"] "," $col["max_latency_ms"] "," cpu }' \
            "$BENCH_WORK/rb.csv")
        [[ -n $row ]] || continue
        echo "$row" >>"$CSV"
        IFS=, read -r _ name _ _ _ _ _ _ rps _ <<<"$row"
        RPS[$round,$backups,$clients,$name]=$rps
        CPU[$round,$backups,$clients,$name]=$cpu
        # The site's throughput: its best rate over the client counts.
        if awk -v a="$rps" -v b="${RPS[$round,$backups,peak,$name]:-0}" 'BEGIN { exit !(a > b) }'; then
            RPS[$round,$backups,peak,$name]=$rps
        fi
        got=$((got + 1))
    done
    done
    if ((got == 0)); then
        die "redis-benchmark --cluster gave no results against the site with backups = $backups: $(head -3 "$BENCH_WORK/rb.err")"
    fi
    stop_started
done
done
# cost ROUND CLIENTS TEST: the cost of sync in percent, or nothing.
cost() {
    local a=${RPS[$1,0,$2,$3]:-} b=${RPS[$1,1,$2,$3]:-}
    [[ -n $a && -n $b ]] && awk -v a="$a" -v b="$b" 'BEGIN { printf "%.1f", (1 - b / a) * 100 }'
}
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR) printf "%.0f%%", (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
echo met >"$BENCH_WORK/verdict"
{
    printf 'test\tround\tclients\tbackups=0 ops/s\tbackups=1 sync ops/s\tcost of sync\tnode CPU µs/op b=0\tb=1\n'
    for test in $(echo "$TESTS" | tr ',' ' ' | tr '[:lower:]' '[:upper:]'); do
        peaks=()
        for ((round = 1; round <= ROUNDS; round++)); do
            for clients in $(echo "$CLIENTS" | tr ',' ' ') peak; do
                [[ $clients != peak || $CLIENTS == *,* ]] || continue
                a=${RPS[$round,0,$clients,$test]:-} b=${RPS[$round,1,$clients,$test]:-}
                c=$(cost "$round" "$clients" "$test") || true
                label=$clients
                [[ $clients != peak ]] || label="best of each"
                if [[ -n $c ]]; then
                    printf '%s\t%s\t%s\t%.0f\t%.0f\t%.0f%%\t%s\t%s\n' "$test" "$round" "$label" "$a" "$b" "$c" \
                        "${CPU[$round,0,$clients,$test]:-}" "${CPU[$round,1,$clients,$test]:-}"
                else
                    printf '%s\t%s\t%s\t%s\t%s\tnot measured\t\t\n' "$test" "$round" "$label" "${a:-error}" "${b:-error}"
                fi
            done
            c=$(cost "$round" "$([[ $CLIENTS == *,* ]] && echo peak || echo "$CLIENTS")" "$test") && peaks+=("$c")
        done
        m=$(printf '%s\n' "${peaks[@]}" | median)
        ((ROUNDS == 1)) || printf '%s\tmedian\t%s\t\t\t%s\t\t\n' "$test" "$([[ $CLIENTS == *,* ]] && echo "best of each")" "$m"
        if [[ $test != GET ]]; then
            [[ -n $m ]] && awk -v m="${m%\%}" 'BEGIN { exit !(m < 40) }' || echo "not met" >"$BENCH_WORK/verdict"
        fi
    done
} | markdown_table
echo
echo "Target (sync costs under 40% of each write test's throughput, the site's best rate over the client counts, median over rounds): $(cat "$BENCH_WORK/verdict")"
echo "CSV: $CSV"

chart plot_throughput.py "$CSV" "$OUT/site_throughput.png" "$MACHINE" \
    "3-node site throughput, backups 0 vs 1 sync, redis-benchmark --cluster -r 100000, loopback$( ((SMOKE)) && echo " [SMOKE RUN]")"
