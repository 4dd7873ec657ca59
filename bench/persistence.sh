#!/usr/bin/env bash
# Local persistence of one deltagrid node next to Redis 7, measured in the
# same run, with the same client and the same disk:
#
# 1. Throughput: redis-benchmark -t TEST -d 100 -r 100000 -c 50 -P 1 / -P 16
#    against six targets, each run on a fresh server with a fresh data
#    directory (stopped and removed after its run):
#      dg-off          deltagrid, persistence = "off"
#      dg-everysec     deltagrid, persistence = "log", fsync = "everysec"
#      dg-always       deltagrid, persistence = "log", fsync = "always"
#      redis-off       redis-server --appendonly no --save ""
#      redis-everysec  redis-server --appendonly yes --appendfsync everysec
#      redis-always    redis-server --appendonly yes --appendfsync always
#    The order of the targets alternates from one row to the next. Prints
#    ops/s (median of ROUNDS) and two ratios, each the median of the rounds'
#    ratios: dg-everysec / dg-off (target >= 0.9: the log costs at most 10%)
#    and dg-always / redis-always (target >= 1.0); and for deltagrid's
#    logging targets the requests per fsync and the mean fsync time
#    (INFO persistence: persistence_fsync_total_us / persistence_fsyncs).
# 2. Latency of one client (-c 1 -P 1, SET -d 100, LAT_N requests):
#    dg-always and redis-always, with dg-off and redis-off for reference;
#    p50 / mean / p99 from redis-benchmark (median of ROUNDS).
# 3. Restart: KEYS keys with 100-byte values (random base64) loaded with
#    `redis-cli --pipe` (one RESP file, made once), then kill -9 and start
#    again on the same data directory; "restart" is the time from the
#    process's start until PING answers PONG and DBSIZE equals KEYS.
#      deltagrid (fsync = "everysec", snapshot_every = SNAPSHOT_EVERY, so the
#        load takes no snapshot; checked: rdb_saves = 0): restart from the
#        log alone, then SAVE, kill -9, restart from the snapshot
#      Redis (appendonly yes, appendfsync everysec, aof-use-rdb-preamble no,
#        auto-aof-rewrite-percentage 0, so the AOF holds the commands):
#        restart replaying the AOF, then SAVE, kill -9, restart with
#        appendonly no from dump.rdb
#    One load serves both restarts of a side; the sides alternate who goes
#    first. Before each kill -9 the script waits SETTLE seconds, so that
#    everysec has written everything. Prints seconds (median of ROUNDS),
#    the server's own load time (deltagrid loading_last_load_ms, Redis's
#    "DB loaded from ..." log line), the bytes on disk (du -sb) and the
#    ratios dg-log / redis-aof (target <= 1.0) and dg-snapshot / redis-rdb.
#
# usage: bash bench/persistence.sh [--out DIR] [--smoke]
# Writes <out>/persistence_throughput.csv, persistence_latency.csv and
# persistence_restart.csv (one row per run; --out: default docs/bench;
# --smoke: a few seconds per part, into a temporary directory; see
# bench/common.sh), and prints the tables (Markdown) on stdout. Loopback
# only; every server is stopped on exit. The fsync figures are those of
# the disk under DATA_DIR: the script measures 4 KiB O_DSYNC writes there
# first (dd) and prints the time of one.
#
# Environment (defaults in brackets):
#   PARTS ["throughput latency restart"]  which of the three to run
#   ROUNDS [3; smoke 1]   rounds of every part; tables give medians
#   N [100000; smoke 2000] requests per throughput run with -P 1
#   N_PIPELINED [10*N]    requests per throughput run with -P 16
#   CLIENTS [50]  TESTS ["set incr"; smoke "set"]  PIPELINES ["1 16"]
#   LAT_N [20000; smoke 500] requests of the one-client latency runs
#   KEYS [1000000; smoke 20000] keys loaded before the restarts
#   SNAPSHOT_EVERY ["64GiB"] deltagrid's node.snapshot_every (log growth
#                 before a snapshot): large, so the log-only restart has none
#   SETTLE [2]    seconds between the end of a load and its kill -9
#   RUN_TIMEOUT [600]      seconds before one redis-benchmark run is killed
#   RESTART_TIMEOUT [600; smoke 60] seconds a restart may take
#   DATA_DIR [a new directory under $TMPDIR]  where the servers' data
#                 directories go (removed after each run); it must be a
#                 real disk, not tmpfs, for fsync to mean anything
#   DG_THREADS    deltagrid's node.threads (default: one per CPU)
#   PIN, SERVER_CPUS, CLIENT_CPUS, DELTAGRID_BIN, DELTAGRID_BUILD,
#   REDIS_SERVER: see bench/common.sh
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
COMMAND="bash bench/persistence.sh $*"
bench_args "$@"
bench_no_more_args

PARTS=${PARTS:-"throughput latency restart"}
if ((SMOKE)); then
    ROUNDS=${ROUNDS:-1} N=${N:-2000} LAT_N=${LAT_N:-500} KEYS=${KEYS:-20000}
    TESTS=${TESTS:-set} RESTART_TIMEOUT=${RESTART_TIMEOUT:-60}
fi
ROUNDS=${ROUNDS:-3}
N=${N:-100000}
N_PIPELINED=${N_PIPELINED:-$((N * 10))}
CLIENTS=${CLIENTS:-50}
TESTS=${TESTS:-"set incr"}
PIPELINES=${PIPELINES:-"1 16"}
LAT_N=${LAT_N:-20000}
KEYS=${KEYS:-1000000}
SNAPSHOT_EVERY=${SNAPSHOT_EVERY:-64GiB}
SETTLE=${SETTLE:-2}
RUN_TIMEOUT=${RUN_TIMEOUT:-600}
RESTART_TIMEOUT=${RESTART_TIMEOUT:-600}
DATA_DIR=${DATA_DIR:-$BENCH_WORK/data}
mkdir -p "$DATA_DIR"
DATA_DIR=$(cd "$DATA_DIR" && pwd -P)

for part in $PARTS; do
    [[ $part == throughput || $part == latency || $part == restart ]] ||
        die "PARTS: unknown part '$part' (throughput latency restart)"
done
command -v redis-benchmark >/dev/null || die "redis-benchmark not found (apt-get install redis-tools)"
command -v redis-cli >/dev/null || die "redis-cli not found (apt-get install redis-tools)"
REDIS_SERVER=${REDIS_SERVER:-redis-server}
command -v "$REDIS_SERVER" >/dev/null || die "$REDIS_SERVER not found (apt-get install redis-server)"
REDIS_VERSION=$("$REDIS_SERVER" --version | sed -n 's/.* v=\([^ ]*\).*/\1/p')
need_deltagrid
pin_setup

[[ $(stat -f -c %T "$DATA_DIR") != tmpfs ]] ||
    say "WARNING: DATA_DIR=$DATA_DIR is on tmpfs: fsync costs nothing there, the figures say nothing about a disk"

STAMP=$(date -u +%Y-%m-%dT%H%M%SZ)
MACHINE=$(machine_line)
say "machine: $MACHINE"
say "redis-server $REDIS_VERSION, $(redis-benchmark --version)"

# One 4 KiB write with O_DSYNC on DATA_DIR's disk (dd; the mean of a few
# hundred): what one fsync of a small append costs on this disk.
dsync_probe() {
    local count=$( ((SMOKE)) && echo 20 || echo 300) out secs
    out=$(dd if=/dev/zero of="$DATA_DIR/dsync-probe" bs=4k count="$count" oflag=dsync 2>&1 | tail -1)
    rm -f "$DATA_DIR/dsync-probe"
    secs=$(sed -n 's/.*copied, \([0-9.]*\) s.*/\1/p' <<<"$out")
    [[ -n $secs ]] && awk -v s="$secs" -v n="$count" 'BEGIN { printf "%.0f", s * 1e6 / n }'
}
DSYNC_US=$(dsync_probe || true)
say "disk under $DATA_DIR ($(df --output=source "$DATA_DIR" | tail -1), $(stat -f -c %T "$DATA_DIR")): one 4 KiB O_DSYNC write takes ${DSYNC_US:-?} µs (dd)"

# --- servers -------------------------------------------------------------

REDIS_AOF=(--appendonly yes --aof-use-rdb-preamble no --auto-aof-rewrite-percentage 0)

info_field() {  # info_field PORT FIELD: one field of INFO persistence
    { timeout 5 redis-cli -p "$1" INFO persistence 2>/dev/null || true; } | tr -d '\r' |
        awk -F: -v f="$2" '$1 == f { print $2 }'
}

# dg_config NAME PERSISTENCE FSYNC: the TOML of a node named NAME, its data
# under DATA_DIR/NAME, on two new ports (DG_PORT, DG_ADMIN_PORT).
dg_config() {
    local name=$1
    DG_PORT=$(free_port)
    DG_ADMIN_PORT=$(free_port)
    mkdir -p "$DATA_DIR/$name"
    cat >"$BENCH_WORK/$name.toml" <<TOML
[node]
listen = "127.0.0.1:$DG_PORT"
admin_listen = "127.0.0.1:$DG_ADMIN_PORT"
data_dir = "$DATA_DIR/$name"
persistence = "$2"
fsync = "$3"
snapshot_every = "$SNAPSHOT_EVERY"
${DG_THREADS:+threads = $DG_THREADS}
TOML
}

# dg_launch NAME: starts the node of dg_config NAME (output appended to
# BENCH_WORK/NAME.log); sets SRV_PID and T0 (when it started).
dg_launch() {
    T0=$EPOCHREALTIME
    "${SERVER_PIN[@]}" "$DG_BIN" server --config "$BENCH_WORK/$1.toml" >>"$BENCH_WORK/$1.log" 2>&1 &
    SRV_PID=$!
    BENCH_PIDS+=("$SRV_PID")
}

# redis_launch NAME PORT [options...]: redis_up's redis-server (dir
# DATA_DIR/NAME, log BENCH_WORK/NAME.log) without waiting; sets SRV_PID, T0.
redis_launch() {
    local name=$1 port=$2
    shift 2
    mkdir -p "$DATA_DIR/$name"
    T0=$EPOCHREALTIME
    "${SERVER_PIN[@]}" "$REDIS_SERVER" --bind 127.0.0.1 --port "$port" --save "" --appendonly no --dir "$DATA_DIR/$name" \
        --daemonize no --logfile "$BENCH_WORK/$name.log" "$@" &
    SRV_PID=$!
    BENCH_PIDS+=("$SRV_PID")
}

# up_or_die NAME PID PORT: waits for PING (wait_ready), or exits with the log.
up_or_die() {
    local rc=0
    wait_ready "$2" "$3" 30 || rc=$?
    ((rc == 0)) && return 0
    say "error: $1 did not come up on 127.0.0.1:$3 ($([[ $rc == 1 ]] && echo exited || echo timeout)); its log:"
    tail -5 "$BENCH_WORK/$1.log" >&2 || true
    exit 1
}

# stop_server PID [SIGNAL]: SIGINT (or SIGNAL), and waits for it.
stop_server() {
    kill "-${2:-INT}" "$1" 2>/dev/null || true
    wait "$1" 2>/dev/null || true
    forget_pid "$1"
}

# start_target TARGET NAME: a fresh server of TARGET (see the top) with its
# data in DATA_DIR/NAME; waits for PING. Sets SRV_PID and SRV_PORT.
start_target() {
    local target=$1 name=$2
    rm -rf "${DATA_DIR:?}/$name"
    case $target in
        dg-off) dg_config "$name" off everysec ;;
        dg-everysec) dg_config "$name" log everysec ;;
        dg-always) dg_config "$name" log always ;;
    esac
    case $target in
        dg-*) dg_launch "$name"; SRV_PORT=$DG_PORT ;;
        redis-off) SRV_PORT=$(free_port); redis_launch "$name" "$SRV_PORT" ;;
        redis-everysec) SRV_PORT=$(free_port); redis_launch "$name" "$SRV_PORT" "${REDIS_AOF[@]}" --appendfsync everysec ;;
        redis-always) SRV_PORT=$(free_port); redis_launch "$name" "$SRV_PORT" "${REDIS_AOF[@]}" --appendfsync always ;;
        *) die "unknown target $target" ;;
    esac
    up_or_die "$name" "$SRV_PID" "$SRV_PORT"
}

# --- statistics ----------------------------------------------------------

# med "v1 v2 ...": the median; ratios "a1 a2 ..." "b1 b2 ...": each round's a/b.
med() { tr ' ' '\n' <<<"$1" | grep . | sort -g | awk '{ v[NR] = $1 } END { if (NR) print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
ratios() { paste -d' ' <(tr ' ' '\n' <<<"$1" | grep .) <(tr ' ' '\n' <<<"$2" | grep .) | awk '$2 > 0 { printf " %.4f", $1 / $2 }'; }
fmt() { local v=${2:-}; [[ -n $v ]] && awk -v x="$v" -v f="$1" 'BEGIN { printf f, x }' || printf 'n/a'; }
# thousands 1234567.8 -> 1,234,568
thousands() { [[ -n ${1:-} ]] && printf '%.0f' "$1" | sed ':a;s/\B[0-9]\{3\}\>/,&/;ta' || printf 'n/a'; }
elapsed_since() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.3f", b - a }'; }
csv_quote() { local v=${1//\"/\"\"}; printf '"%s"' "$v"; }

# bench_run PORT PID CLIENTS P N TEST: one redis-benchmark run; sets
# RB_STATUS (ok or why not), RB_RPS, RB_AVG, RB_P50, RB_P99 (ms), RB_CPU
# (server CPU µs per request).
bench_run() {
    local port=$1 pid=$2 c=$3 p=$4 n=$5 test=$6
    local out=$BENCH_WORK/rb.out err=$BENCH_WORK/rb.err rc=0 row
    local cmd=("${CLIENT_PIN[@]}" redis-benchmark -h 127.0.0.1 -p "$port" -c "$c" -P "$p" -n "$n" -r 100000 -d 100 -t "$test" --csv)
    say "    ${cmd[*]}"
    local ticks0 ticks1
    ticks0=$(cpu_ticks "$pid")
    timeout "$RUN_TIMEOUT" "${cmd[@]}" >"$out" 2>"$err" || rc=$?
    ticks1=$(cpu_ticks "$pid")
    RB_CPU=$(us_per_op $((ticks1 - ticks0)) "$n")
    row=$(awk -F, '
        { gsub(/"/, "") }
        NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
        NF > 1 { print $col["rps"], $col["avg_latency_ms"], $col["p50_latency_ms"], $col["p99_latency_ms"]; exit }' "$out")
    RB_STATUS=ok
    if grep -q 'Error from server' "$err" "$out"; then
        RB_STATUS="error: $(grep -m1 -h 'Error from server' "$err" "$out")"
    elif ((rc == 124)); then
        RB_STATUS="timeout after ${RUN_TIMEOUT}s"
    elif ((rc != 0)) || [[ -z $row ]]; then
        RB_STATUS="failed (exit $rc): $(head -1 "$err")"
    fi
    RB_RPS= RB_AVG= RB_P50= RB_P99=
    if [[ $RB_STATUS == ok ]]; then
        read -r RB_RPS RB_AVG RB_P50 RB_P99 <<<"$row"
    else
        say "    $RB_STATUS"
        RB_CPU=
    fi
}

# fsync_stats PORT: sets FS_N (fsyncs so far) and FS_MEAN (µs per fsync)
# from INFO persistence; empty without persistence.
fsync_stats() {
    FS_N=$(info_field "$1" persistence_fsyncs)
    local total
    total=$(info_field "$1" persistence_fsync_total_us)
    FS_MEAN=
    [[ -n $FS_N && -n $total ]] && ((FS_N > 0)) && FS_MEAN=$(awk -v t="$total" -v n="$FS_N" 'BEGIN { printf "%.0f", t / n }')
    return 0
}

declare -A RPS P50 AVG P99 CPU FSN FSMEAN

# --- 1. throughput -------------------------------------------------------

TP_TARGETS=(dg-off dg-everysec dg-always redis-off redis-everysec redis-always)

throughput() {
    local csv=$OUT/persistence_throughput.csv round test p n i=0 target order name
    echo "date,round,test,d,P,clients,requests,target,status,rps,avg_latency_ms,p50_latency_ms,p99_latency_ms,server_cpu_us_per_op,fsyncs,fsync_mean_us" >"$csv"
    for ((round = 1; round <= ROUNDS; round++)); do
        for test in $TESTS; do
            for p in $PIPELINES; do
                n=$N
                ((p > 1)) && n=$N_PIPELINED
                # Alternate the order so that drift in the machine's load hits every target.
                if ((i % 2 == 0)); then order=("${TP_TARGETS[@]}"); else order=($(printf '%s\n' "${TP_TARGETS[@]}" | tac)); fi
                i=$((i + 1))
                say "throughput: $test -P $p -n $n, round $round of $ROUNDS"
                for target in "${order[@]}"; do
                    name=tp-$target-$test-P$p-r$round
                    start_target "$target" "$name"
                    say "  $target (pid $SRV_PID, port $SRV_PORT)"
                    bench_run "$SRV_PORT" "$SRV_PID" "$CLIENTS" "$p" "$n" "$test"
                    FS_N= FS_MEAN=
                    [[ $target == dg-off || $target != dg-* ]] || fsync_stats "$SRV_PORT"
                    stop_server "$SRV_PID"
                    rm -rf "${DATA_DIR:?}/$name"
                    echo "$STAMP,$round,$test,100,$p,$CLIENTS,$n,$target,$(csv_quote "$RB_STATUS"),$RB_RPS,$RB_AVG,$RB_P50,$RB_P99,$RB_CPU,$FS_N,$FS_MEAN" >>"$csv"
                    [[ $RB_STATUS == ok ]] || continue
                    RPS[$test,$p,$target]+=" $RB_RPS"
                    P50[$test,$p,$target]+=" $RB_P50"
                    CPU[$test,$p,$target]+=" $RB_CPU"
                    if [[ -n $FS_N ]]; then
                        ((FS_N == 0)) || FSN[$test,$p,$target]+=" $(awk -v f="$FS_N" -v n="$n" 'BEGIN { printf "%.1f", n / f }')"
                        [[ -z $FS_MEAN ]] || FSMEAN[$test,$p,$target]+=" $FS_MEAN"
                    fi
                done
            done
        done
    done

    echo
    echo "### Throughput: redis-benchmark -t TEST -d 100 -r 100000 -c $CLIENTS, -n $N (-P 1) / $N_PIPELINED (-P 16), ops/s (median of $ROUNDS)"
    echo
    {
        printf '%s\t' test P "dg off" "dg everysec" "dg always" "redis off" "redis everysec" "redis always"
        printf '%s\t%s\n' "dg everysec / dg off (>= 0.9)" "dg always / redis always (>= 1.0)"
        for test in $TESTS; do
            for p in $PIPELINES; do
                printf '%s\t%s' "${test^^}" "$p"
                for target in "${TP_TARGETS[@]}"; do
                    printf '\t%s' "$(thousands "$(med "${RPS[$test,$p,$target]:-}")")"
                done
                local r1 r2
                r1=$(med "$(ratios "${RPS[$test,$p,dg-everysec]:-}" "${RPS[$test,$p,dg-off]:-}")")
                r2=$(med "$(ratios "${RPS[$test,$p,dg-always]:-}" "${RPS[$test,$p,redis-always]:-}")")
                [[ -z $r1 ]] || echo "everysec/off $r1" >>"$BENCH_WORK/targets"
                [[ -z $r2 ]] || echo "always/redis-always $r2" >>"$BENCH_WORK/targets"
                printf '\t%s\t%s\n' "$(fmt %.2f "$r1")" "$(fmt %.2f "$r2")"
            done
        done
    } | markdown_table
    echo
    echo "Server CPU µs per request (user + system time of the server over the run), and deltagrid's fsyncs (INFO persistence), median of $ROUNDS:"
    echo
    {
        printf '%s\t' test P "dg off CPU" "dg everysec CPU" "dg always CPU" "redis off CPU" "redis everysec CPU" "redis always CPU"
        printf '%s\t%s\n' "dg everysec: requests per fsync, mean fsync µs" "dg always: requests per fsync, mean fsync µs"
        for test in $TESTS; do
            for p in $PIPELINES; do
                printf '%s\t%s' "${test^^}" "$p"
                for target in "${TP_TARGETS[@]}"; do
                    printf '\t%s' "$(fmt %.2f "$(med "${CPU[$test,$p,$target]:-}")")"
                done
                for target in dg-everysec dg-always; do
                    printf '\t%s, %s' "$(thousands "$(med "${FSN[$test,$p,$target]:-}")")" \
                        "$(thousands "$(med "${FSMEAN[$test,$p,$target]:-}")")"
                done
                printf '\n'
            done
        done
    } | markdown_table
}

# --- 2. latency of one client ----------------------------------------------

LAT_TARGETS=(dg-always redis-always dg-off redis-off)

latency() {
    local csv=$OUT/persistence_latency.csv round target order name
    echo "date,round,requests,target,status,rps,avg_latency_ms,p50_latency_ms,p99_latency_ms,server_cpu_us_per_op,fsyncs,fsync_mean_us" >"$csv"
    for ((round = 1; round <= ROUNDS; round++)); do
        if ((round % 2 == 1)); then order=("${LAT_TARGETS[@]}"); else order=($(printf '%s\n' "${LAT_TARGETS[@]}" | tac)); fi
        say "latency: one client, SET -d 100 -n $LAT_N, round $round of $ROUNDS"
        for target in "${order[@]}"; do
            name=lat-$target-r$round
            start_target "$target" "$name"
            say "  $target (pid $SRV_PID, port $SRV_PORT)"
            bench_run "$SRV_PORT" "$SRV_PID" 1 1 "$LAT_N" set
            FS_N= FS_MEAN=
            [[ $target != dg-always ]] || fsync_stats "$SRV_PORT"
            stop_server "$SRV_PID"
            rm -rf "${DATA_DIR:?}/$name"
            echo "$STAMP,$round,$LAT_N,$target,$(csv_quote "$RB_STATUS"),$RB_RPS,$RB_AVG,$RB_P50,$RB_P99,$RB_CPU,$FS_N,$FS_MEAN" >>"$csv"
            [[ $RB_STATUS == ok ]] || continue
            RPS[lat,$target]+=" $RB_RPS"
            P50[lat,$target]+=" $RB_P50"
            AVG[lat,$target]+=" $RB_AVG"
            P99[lat,$target]+=" $RB_P99"
            [[ -z $FS_MEAN ]] || FSMEAN[lat,$target]+=" $FS_MEAN"
        done
    done

    echo
    echo "### Latency of one client: redis-benchmark -t set -d 100 -r 100000 -c 1 -P 1 -n $LAT_N (median of $ROUNDS)"
    echo
    {
        printf '%s\t' target "p50 ms" "mean ms" "p99 ms" "ops/s"
        printf '%s\n' "deltagrid mean fsync µs"
        for target in "${LAT_TARGETS[@]}"; do
            printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$target" "$(fmt %.3f "$(med "${P50[lat,$target]:-}")")" \
                "$(fmt %.3f "$(med "${AVG[lat,$target]:-}")")" "$(fmt %.3f "$(med "${P99[lat,$target]:-}")")" \
                "$(thousands "$(med "${RPS[lat,$target]:-}")")" "$(thousands "$(med "${FSMEAN[lat,$target]:-}")")"
        done
    } | markdown_table
    local r
    r=$(med "$(ratios "${P50[lat,dg-always]:-}" "${P50[lat,redis-always]:-}")")
    echo
    echo "p50 dg-always / redis-always: $(fmt %.2f "$r") (median of the rounds' ratios; below 1: deltagrid answers sooner)"
}

# --- 3. restart ------------------------------------------------------------

# The load: KEYS SETs of key:%010d to 100 random base64 bytes, in RESP.
make_load() {
    LOAD_FILE=$BENCH_WORK/load.resp
    python3 - "$KEYS" "$LOAD_FILE" <<'PY'
import base64, random, sys
n, path = int(sys.argv[1]), sys.argv[2]
rnd = random.Random(42)
with open(path, "wb", buffering=1 << 20) as f:
    for i in range(n):
        k = b"key:%010d" % i
        v = base64.b64encode(rnd.randbytes(75))
        f.write(b"*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n" % (len(k), k, len(v), v))
PY
    say "restart load: $KEYS SETs of 100-byte values, $(du -h "$LOAD_FILE" | cut -f1) of RESP"
}

# load_into PORT: redis-cli --pipe; sets LOAD_S; exits unless every reply is OK.
load_into() {
    local t0=$EPOCHREALTIME out
    out=$(redis-cli -p "$1" --pipe <"$LOAD_FILE" 2>&1) || true
    LOAD_S=$(elapsed_since "$t0")
    grep -q "errors: 0, replies: $KEYS" <<<"$out" || die "load into port $1: $out"
    local n
    n=$(redis-cli -p "$1" DBSIZE)
    [[ $n == "$KEYS" ]] || die "port $1 holds $n keys after the load, not $KEYS"
}

# wait_loaded PID PORT: waits until PING answers PONG and DBSIZE equals
# KEYS; sets RESTART_S (seconds since T0), GOT (the DBSIZE it saw) and
# RS_STATUS (ok, or why not: died, timeout, or keys missing 2 s after the
# node first answered DBSIZE).
wait_loaded() {
    local pid=$1 port=$2 deadline=$((SECONDS + RESTART_TIMEOUT)) first="" out
    RS_STATUS=ok GOT=
    while :; do
        if ! kill -0 "$pid" 2>/dev/null; then RS_STATUS="exited while loading"; break; fi
        out=$(timeout 2 redis-cli -p "$port" DBSIZE 2>/dev/null) || true
        if [[ $out =~ ^[0-9]+$ ]]; then
            GOT=$out
            if [[ $out == "$KEYS" && $(timeout 2 redis-cli -p "$port" PING 2>/dev/null) == PONG ]]; then
                RESTART_S=$(elapsed_since "$T0")
                return 0
            fi
            [[ -n $first ]] || first=$EPOCHREALTIME
            if awk -v e="$(elapsed_since "$first")" 'BEGIN { exit !(e > 2) }'; then
                RESTART_S=$(elapsed_since "$T0")
                RS_STATUS="$out keys, not $KEYS"
                break
            fi
        fi
        ((SECONDS < deadline)) || { RS_STATUS="timeout after ${RESTART_TIMEOUT}s"; break; }
        sleep 0.02
    done
    RESTART_S=
    say "    restart: $RS_STATUS"
    return 0
}

du_b() { du -sb "$@" 2>/dev/null | awk '{ s += $1 } END { print s + 0 }'; }
# redis_load_s NAME: the load time in Redis's log's last "DB loaded from" line.
redis_load_s() { grep -o 'DB loaded from [^:]*: [0-9.]* seconds' "$BENCH_WORK/$1.log" | tail -1 | awk '{ print $(NF - 1) }'; }

declare -A RS RSLOAD RSDISK RSSTAT
record_restart() {  # record_restart ROUND WHAT SERVER_LOAD_S DISK_BYTES DETAIL
    echo "$STAMP,$1,$KEYS,$2,$(csv_quote "$RS_STATUS"),$RESTART_S,$3,$4,$(csv_quote "$5")" >>"$RS_CSV"
    say "    $2: $RS_STATUS, restart ${RESTART_S:-n/a} s (server's own load time ${3:-n/a} s), ${4} bytes on disk; $5"
    [[ $RS_STATUS == ok ]] && RS[$2]+=" $RESTART_S"
    [[ $RS_STATUS == ok ]] || RSSTAT[$2]+="round $1: $RS_STATUS; "
    [[ -z $3 ]] || RSLOAD[$2]+=" $3"
    RSDISK[$2]+=" $4"
}

restart_dg() {
    local round=$1 name=rs-dg-r$1 port pid saves disk detail ms
    rm -rf "${DATA_DIR:?}/$name"
    dg_config "$name" log everysec
    port=$DG_PORT
    dg_launch "$name"
    up_or_die "$name" "$SRV_PID" "$port"
    say "  deltagrid (pid $SRV_PID, port $port): loading $KEYS keys"
    load_into "$port"
    sleep "$SETTLE"
    saves=$(info_field "$port" rdb_saves)
    [[ $saves == 0 ]] || say "    WARNING: deltagrid took $saves snapshots during the load: the log-only restart is not log-only"
    disk=$(du_b "$DATA_DIR/$name")
    say "    loaded in $LOAD_S s; log $(info_field "$port" persistence_log_bytes) bytes; rdb_saves $saves; kill -9"
    echo "$STAMP,$round,$KEYS,dg-load,ok,$LOAD_S,,$disk,\"rdb_saves=$saves\"" >>"$RS_CSV"
    LOADS[dg]+=" $LOAD_S"
    stop_server "$SRV_PID" KILL

    # From the log alone.
    dg_launch "$name"
    pid=$SRV_PID
    wait_loaded "$pid" "$port"
    ms=$(info_field "$port" loading_last_load_ms)
    detail="snapshot entries $(info_field "$port" persistence_loaded_snapshot_entries), log records $(info_field "$port" persistence_loaded_log_records)"
    record_restart "$round" dg-log "$(awk -v m="$ms" 'BEGIN { if (m != "") printf "%.3f", m / 1000 }')" "$disk" "$detail"

    # SAVE, then from the snapshot.
    local t0=$EPOCHREALTIME
    [[ $(redis-cli -p "$port" SAVE 2>&1) == OK ]] || say "    WARNING: SAVE did not answer OK"
    say "    SAVE took $(elapsed_since "$t0") s; snapshot $(info_field "$port" persistence_snapshot_bytes) bytes; kill -9"
    disk=$(du_b "$DATA_DIR/$name")
    stop_server "$pid" KILL
    dg_launch "$name"
    pid=$SRV_PID
    wait_loaded "$pid" "$port"
    ms=$(info_field "$port" loading_last_load_ms)
    detail="snapshot entries $(info_field "$port" persistence_loaded_snapshot_entries), log records $(info_field "$port" persistence_loaded_log_records), snapshots dir $(du_b "$DATA_DIR/$name/store/snapshots") bytes"
    record_restart "$round" dg-snapshot "$(awk -v m="$ms" 'BEGIN { if (m != "") printf "%.3f", m / 1000 }')" "$disk" "$detail"
    stop_server "$pid"
    rm -rf "${DATA_DIR:?}/$name"
}

restart_redis() {
    local round=$1 name=rs-redis-r$1 port pid disk
    rm -rf "${DATA_DIR:?}/$name"
    port=$(free_port)
    redis_launch "$name" "$port" "${REDIS_AOF[@]}" --appendfsync everysec
    up_or_die "$name" "$SRV_PID" "$port"
    say "  redis (pid $SRV_PID, port $port): loading $KEYS keys"
    load_into "$port"
    sleep "$SETTLE"
    disk=$(du_b "$DATA_DIR/$name/appendonlydir")
    say "    loaded in $LOAD_S s; AOF $disk bytes; kill -9"
    echo "$STAMP,$round,$KEYS,redis-load,ok,$LOAD_S,,$disk," >>"$RS_CSV"
    LOADS[redis]+=" $LOAD_S"
    stop_server "$SRV_PID" KILL

    # Replaying the AOF.
    redis_launch "$name" "$port" "${REDIS_AOF[@]}" --appendfsync everysec
    pid=$SRV_PID
    wait_loaded "$pid" "$port"
    record_restart "$round" redis-aof "$(redis_load_s "$name")" "$disk" "appendonlydir"

    # SAVE, then from dump.rdb with appendonly no.
    local t0=$EPOCHREALTIME
    [[ $(redis-cli -p "$port" SAVE 2>&1) == OK ]] || say "    WARNING: SAVE did not answer OK"
    disk=$(du_b "$DATA_DIR/$name/dump.rdb")
    say "    SAVE took $(elapsed_since "$t0") s; dump.rdb $disk bytes; kill -9"
    stop_server "$pid" KILL
    redis_launch "$name" "$port"
    pid=$SRV_PID
    wait_loaded "$pid" "$port"
    record_restart "$round" redis-rdb "$(redis_load_s "$name")" "$disk" "dump.rdb"
    stop_server "$pid"
    rm -rf "${DATA_DIR:?}/$name"
}

declare -A LOADS
restart() {
    RS_CSV=$OUT/persistence_restart.csv
    echo "date,round,keys,what,status,seconds,server_load_seconds,disk_bytes,detail" >"$RS_CSV"
    make_load
    local round
    for ((round = 1; round <= ROUNDS; round++)); do
        say "restart: $KEYS keys, round $round of $ROUNDS"
        if ((round % 2 == 1)); then
            restart_dg "$round"; restart_redis "$round"
        else
            restart_redis "$round"; restart_dg "$round"
        fi
    done
    rm -f "$LOAD_FILE"

    echo
    echo "### Restart after kill -9 with $KEYS keys of 100-byte values (median of $ROUNDS)"
    echo
    {
        printf '%s\t%s\t%s\t%s\n' "restart from" "seconds to DBSIZE = $KEYS" "server's own load s" "on disk MB"
        local what label
        for what in dg-log redis-aof dg-snapshot redis-rdb; do
            case $what in
                dg-log) label="deltagrid: log only (fsync everysec)" ;;
                redis-aof) label="Redis: AOF (appendfsync everysec, no RDB preamble)" ;;
                dg-snapshot) label="deltagrid: snapshot (after SAVE)" ;;
                redis-rdb) label="Redis: RDB (after SAVE, appendonly no)" ;;
            esac
            printf '%s\t%s\t%s\t%s\n' "$label" "$(fmt %.2f "$(med "${RS[$what]:-}")")" \
                "$(fmt %.2f "$(med "${RSLOAD[$what]:-}")")" "$(fmt %.1f "$(med "${RSDISK[$what]:-}" | awk '{ print $1 / 1e6 }')")"
        done
    } | markdown_table
    local r1 r2
    r1=$(med "$(ratios "${RS[dg-log]:-}" "${RS[redis-aof]:-}")")
    r2=$(med "$(ratios "${RS[dg-snapshot]:-}" "${RS[redis-rdb]:-}")")
    [[ -z $r1 ]] || echo "dg-log/redis-aof $r1" >>"$BENCH_WORK/targets"
    echo
    echo "deltagrid log / Redis AOF: $(fmt %.2f "$r1") (target <= 1.0); deltagrid snapshot / Redis RDB: $(fmt %.2f "$r2") (median of the rounds' ratios)"
    echo "Loading the keys with redis-cli --pipe took $(fmt %.2f "$(med "${LOADS[dg]:-}")") s into deltagrid (fsync everysec), $(fmt %.2f "$(med "${LOADS[redis]:-}")") s into Redis (appendfsync everysec)"
    local w
    for w in "${!RSSTAT[@]}"; do
        echo "NOT OK: $w: ${RSSTAT[$w]}"
    done
}

# --- run ---------------------------------------------------------------------

echo "Persistence, one deltagrid node vs Redis $REDIS_VERSION, loopback, $STAMP$( ((SMOKE)) && echo ", SMOKE RUN")"
echo "Command: $COMMAND (ROUNDS=$ROUNDS N=$N N_PIPELINED=$N_PIPELINED TESTS=\"$TESTS\" LAT_N=$LAT_N KEYS=$KEYS)"
echo "Machine: $MACHINE"
echo "Disk under the data directories: one 4 KiB O_DSYNC write ${DSYNC_US:-?} µs (dd, mean)"
echo "deltagrid: $DG_BIN ($("$DG_BIN" --version 2>/dev/null || echo "version unknown"))"
for part in $PARTS; do
    "$part"
done
echo
if [[ -s $BENCH_WORK/targets ]]; then
    awk '
        $1 == "everysec/off" { n1++; if ($2 >= 0.9) m1++ }
        $1 == "always/redis-always" { n2++; if ($2 >= 1.0) m2++ }
        $1 == "dg-log/redis-aof" { n3++; if ($2 <= 1.0) m3++ }
        END {
            if (n1) printf "Target dg everysec >= 0.9 x dg off: %d of %d rows\n", m1, n1
            if (n2) printf "Target dg always >= 1.0 x redis always: %d of %d rows\n", m2, n2
            if (n3) printf "Target dg log restart <= 1.0 x redis AOF restart: %s\n", m3 ? "met" : "not met"
        }' "$BENCH_WORK/targets"
fi
# What the servers logged beyond the routine (their logs go with BENCH_WORK;
# Redis's warning about vm.overcommit_memory is routine on this kind of host).
log_problems() { grep -i -E 'panic|error|warn' "$1" | grep -v 'Memory overcommit must be enabled' || true; }
problems=$(for f in "$BENCH_WORK"/*.log; do [[ -z $(log_problems "$f") ]] || echo "$f"; done)
if [[ -n $problems ]]; then
    say "server logs with panic/error/warn lines:"
    for f in $problems; do
        say "  $(basename "$f"): $(log_problems "$f" | wc -l) lines, first: $(log_problems "$f" | head -1 | cut -c1-200)"
    done
else
    say "no panic/error/warn line in any server log"
fi
echo "CSV: $OUT/persistence_*.csv"
