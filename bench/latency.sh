#!/usr/bin/env bash
# Single-client latency, GigaSpaces' method (docs/benchmarks.md experiment 4):
# one client, one op in flight, warm-up, then the average of the best 80%
# and percentiles, with `deltagrid bench latency`, for these targets, all
# started side by side and measured in the same run:
#   dg-b0       a deltagrid site of --nodes nodes (default 2), backups = 0
#   dg-b1       the same with backups = 1, replication = "sync": every write
#               waits for its backup's ack
#   redis       redis-server alone
#   redis-wait  redis-server with one replica (replicaof), every op followed
#               by WAIT 1 0 in the same write
#   dg-node     (not in the default list) one deltagrid node, no site
# plus the loopback TCP echo round trip of the same request bytes (the floor
# of this machine; measured before every run, the median is reported). The client talks to node 1 of a site with keys under a
# hash tag node 1 owns. Each workload (an 8-field HSET and SET of an empty
# value by default) runs unthrottled and throttled to RATE ops/s; the order
# of the targets alternates from one workload to the next.
#
# usage: bash bench/latency.sh [--out DIR] [--smoke] [--nodes N] [--targets LIST]
#                              [--workloads LIST] [--name NAME]
#   --targets    comma-separated, from the list above [dg-b0,dg-b1,redis,redis-wait]
#   --workloads  comma-separated `deltagrid bench latency --value`s [hash8,empty]
#   --name       file name of the results [latency]
# Prints the tables; writes <out>/<name>.json (settings, machine, every
# statistic of every run), <out>/<name>.csv and the chart <out>/<name>.png
# (--out: default docs/bench; --smoke: a few hundred ops per run, into a
# temporary directory; see bench/common.sh). Loopback only.
#
# Environment: OPS [20000; smoke 300] measured ops per unthrottled run,
#   WARMUP [2000; smoke 30], RATE [1000] ops/s of the throttled runs (0: no
#   throttled runs), THROTTLED_OPS [5000; smoke 100]; DELTAGRID_BIN,
#   DELTAGRID_BUILD, REDIS_SERVER, PLOT_PYTHON as in bench/common.sh.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
COMMAND="bash bench/latency.sh $*"
bench_args "$@"

NAME=latency
NODES=2
TARGETS=dg-b0,dg-b1,redis,redis-wait
WORKLOADS=hash8,empty
set -- "${ARGS[@]}"
while (($#)); do
    case $1 in
        --name) NAME=${2:?}; shift 2 ;;
        --nodes) NODES=${2:?}; shift 2 ;;
        --targets) TARGETS=${2:?}; shift 2 ;;
        --workloads) WORKLOADS=${2:?}; shift 2 ;;
        *) die "unknown argument: $1 (see the top of bench/latency.sh)" ;;
    esac
done
if ((SMOKE)); then
    OPS=${OPS:-300} WARMUP=${WARMUP:-30} THROTTLED_OPS=${THROTTLED_OPS:-100}
fi
OPS=${OPS:-20000}
WARMUP=${WARMUP:-2000}
RATE=${RATE:-1000}
THROTTLED_OPS=${THROTTLED_OPS:-5000}
RATES=(0)
((RATE == 0)) || RATES+=("$RATE")
IFS=, read -ra TARGET_LIST <<<"$TARGETS"
IFS=, read -ra WORKLOAD_LIST <<<"$WORKLOADS"
need_deltagrid

# Start every target; PORT, PREFIX, EXTRA and LABEL per target.
declare -A PORT PREFIX EXTRA LABEL
for t in "${TARGET_LIST[@]}"; do
    PREFIX[$t]=dgbench:lat
    EXTRA[$t]=""
    case $t in
        dg-b0 | dg-b1)
            backups=${t#dg-b}
            start_site "$t" "$backups" "$NODES"
            PORT[$t]=${SITE_PORTS[0]}
            PREFIX[$t]="$(local_tag "${PORT[$t]}"):lat"
            LABEL[$t]="deltagrid, $NODES nodes, backups=$backups"
            ((backups == 0)) || LABEL[$t]+=" sync" ;;
        dg-node)
            start_deltagrid
            ((DG_UP)) || die "deltagrid: $DG_STATUS"
            PORT[$t]=$DG_PORT
            LABEL[$t]="deltagrid, one node" ;;
        redis)
            start_redis
            PORT[$t]=$REDIS_PORT
            LABEL[$t]="Redis $REDIS_VERSION alone" ;;
        redis-wait)
            start_redis_with_replica
            PORT[$t]=$REDIS_PRIMARY_PORT
            EXTRA[$t]="--wait-replicas 1"
            LABEL[$t]="Redis $REDIS_VERSION + replica, WAIT 1 0" ;;
        *) die "unknown target '$t' (dg-b0, dg-b1, redis, redis-wait, dg-node)" ;;
    esac
done

STAMP=$(date -u +%Y-%m-%dT%H%M%SZ)
MACHINE=$(machine_line)
echo "Latency, one client, one op in flight, loopback, $STAMP$( ((SMOKE)) && echo ", smoke run")"
echo "Machine: $MACHINE"
echo "Unthrottled: $OPS ops after $WARMUP warm-up$( ((RATE)) && echo "; throttled: $THROTTLED_OPS ops at $RATE ops/s after $WARMUP warm-up")"
echo

# One `deltagrid bench latency` per rate x workload x target, each also
# measuring the echo floor just before (the report takes their median: one
# floor measured once can catch a noisy moment of a shared machine).
((SMOKE)) || sleep 2  # let the sites finish starting up (their first seconds are busy)
RUNS=$BENCH_WORK/runs
mkdir -p "$RUNS"
printf 'target\tlabel\trate\tworkload\tjson\n' >"$RUNS/manifest.tsv"
i=0
for rate in "${RATES[@]}"; do
    ops=$OPS
    ((rate == 0)) || ops=$THROTTLED_OPS
    for w in "${WORKLOAD_LIST[@]}"; do
        order=("${TARGET_LIST[@]}")
        if ((i % 2)); then  # alternate who goes first, so drift hits every target
            order=()
            for ((k = ${#TARGET_LIST[@]} - 1; k >= 0; k--)); do order+=("${TARGET_LIST[$k]}"); done
        fi
        i=$((i + 1))
        for t in "${order[@]}"; do
            json=$RUNS/$t-$rate-${w//:/_}.json
            # shellcheck disable=SC2086  # EXTRA is a list of words
            cmd=("$DG_BIN" bench latency --port "${PORT[$t]}" --ops "$ops" --warmup "$WARMUP" --rate "$rate"
                 --value "$w" --key-prefix "${PREFIX[$t]}" ${EXTRA[$t]} --json "$json")
            say "$t, $w, rate $rate: ${cmd[*]:1}"
            if ! "${cmd[@]}" >"$json.txt" 2>&1; then
                cat "$json.txt" >&2
                die "deltagrid bench latency failed against $t (${LABEL[$t]})"
            fi
            printf '%s\t%s\t%s\t%s\t%s\n' "$t" "${LABEL[$t]}" "$rate" "$w" "$json" >>"$RUNS/manifest.tsv"
        done
    done
done
stop_started

# Tables, results and chart: stdlib python for the tables, matplotlib for the chart.
plot_python
"${PY:-python3}" "$BENCH_ROOT/bench/latency_report.py" --manifest "$RUNS/manifest.tsv" \
    --out "$OUT/$NAME" --machine "$MACHINE" --date "$STAMP" --nodes "$NODES" --smoke "$SMOKE" \
    --command "$COMMAND"
