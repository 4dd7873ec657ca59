# Shared by bench/throughput.sh and bench/latency.sh (sourced, not run):
# start redis-server and deltagrid side by side on free loopback ports, and
# stop exactly the processes started here when the script exits.
#
# After bench_start_servers:
#   REDIS_PORT                     redis-server's port (the script dies if Redis can't start)
#   DG_PORT, DG_ADMIN_PORT         deltagrid's ports
#   DG_UP=1|0, DG_STATUS           whether deltagrid answers PING, and if not, why
#   DG_BIN                         the deltagrid binary used
# Environment:
#   DELTAGRID_BIN   deltagrid binary (default target/release/deltagrid, built if missing)
#   DELTAGRID_BUILD=0  never build it
#   REDIS_SERVER    redis-server binary (default: redis-server on PATH)

BENCH_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BENCH_WORK=$(mktemp -d "${TMPDIR:-/tmp}/deltagrid-bench.XXXXXX")
BENCH_PIDS=()

bench_cleanup() {
    local pid
    for pid in "${BENCH_PIDS[@]}"; do
        kill "$pid" 2>/dev/null || true
    done
    for pid in "${BENCH_PIDS[@]}"; do
        wait "$pid" 2>/dev/null || true
    done
    rm -rf "$BENCH_WORK"
}
trap bench_cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# Once a child is reaped its pid may be reused: never kill it after that.
forget_pid() {
    local keep=() p
    for p in "${BENCH_PIDS[@]}"; do
        [[ $p == "$1" ]] || keep+=("$p")
    done
    BENCH_PIDS=("${keep[@]}")
}

say() { printf '%s\n' "$*" >&2; }

# A port nothing listens on right now (the kernel picks it; there is a small
# window before our server binds it, which the readiness check catches).
free_port() {
    if command -v python3 >/dev/null 2>&1; then
        python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
        return
    fi
    local p
    while :; do
        p=$((20000 + RANDOM % 40000))
        (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null || { echo "$p"; return; }
    done
}

# wait_ready PID PORT SECONDS: 0 once PORT answers PING with PONG, 1 if PID
# died, 2 on timeout.
wait_ready() {
    local pid=$1 port=$2 deadline=$((SECONDS + $3))
    while ((SECONDS < deadline)); do
        kill -0 "$pid" 2>/dev/null || return 1
        if [[ $(timeout 2 redis-cli -h 127.0.0.1 -p "$port" PING 2>/dev/null) == PONG ]]; then
            return 0
        fi
        sleep 0.1
    done
    return 2
}

start_redis() {
    local server=${REDIS_SERVER:-redis-server}
    command -v "$server" >/dev/null || { say "error: $server not found (apt-get install redis-server)"; exit 1; }
    REDIS_PORT=$(free_port)
    "$server" --bind 127.0.0.1 --port "$REDIS_PORT" --save "" --appendonly no \
        --daemonize no --logfile "$BENCH_WORK/redis.log" &
    local pid=$!
    BENCH_PIDS+=("$pid")
    if ! wait_ready "$pid" "$REDIS_PORT" 10; then
        say "error: redis-server did not come up on 127.0.0.1:$REDIS_PORT:"
        tail -5 "$BENCH_WORK/redis.log" >&2 || true
        exit 1
    fi
    REDIS_VERSION=$("$server" --version | sed -n 's/.* v=\([^ ]*\).*/\1/p')
    say "redis-server $REDIS_VERSION up on 127.0.0.1:$REDIS_PORT (pid $pid)"
}

# Finds or builds the deltagrid binary; sets DG_BIN, or DG_STATUS on failure.
find_deltagrid() {
    if [[ -n ${DELTAGRID_BIN:-} ]]; then
        DG_BIN=$DELTAGRID_BIN
        [[ -x $DG_BIN ]] || { DG_STATUS="DELTAGRID_BIN=$DG_BIN is not an executable file"; return 1; }
        return 0
    fi
    DG_BIN=$BENCH_ROOT/target/release/deltagrid
    # Always let cargo decide: a stale release binary would measure old code.
    if [[ ! -x $DG_BIN || ${DELTAGRID_BUILD:-1} != 0 ]]; then
        if [[ ${DELTAGRID_BUILD:-1} == 0 ]]; then
            DG_STATUS="$DG_BIN does not exist (DELTAGRID_BUILD=0: not building it)"
            return 1
        fi
        say "building deltagrid: cargo build --release -p deltagrid (log: $BENCH_WORK/build.log)"
        if ! (cd "$BENCH_ROOT" && cargo build --release -p deltagrid) >"$BENCH_WORK/build.log" 2>&1; then
            DG_STATUS="cargo build --release -p deltagrid failed: $(grep -m1 '^error' "$BENCH_WORK/build.log")"
            return 1
        fi
        [[ -x $DG_BIN ]] || { DG_STATUS="build succeeded but $DG_BIN is missing"; return 1; }
    fi
}

start_deltagrid() {
    DG_UP=0
    DG_PORT=$(free_port)
    DG_ADMIN_PORT=$(free_port)
    find_deltagrid || return 0
    "$DG_BIN" server --listen "127.0.0.1:$DG_PORT" --admin-listen "127.0.0.1:$DG_ADMIN_PORT" \
        >"$BENCH_WORK/deltagrid.log" 2>&1 &
    local pid=$! rc=0
    BENCH_PIDS+=("$pid")
    wait_ready "$pid" "$DG_PORT" 15 || rc=$?
    case $rc in
        0) DG_UP=1; DG_STATUS="up"
           say "deltagrid up on 127.0.0.1:$DG_PORT, admin 127.0.0.1:$DG_ADMIN_PORT (pid $pid, $DG_BIN)" ;;
        1) rc=0; wait "$pid" 2>/dev/null || rc=$?
           forget_pid "$pid"
           DG_STATUS="$DG_BIN server exited with code $rc before answering PING on 127.0.0.1:$DG_PORT; last output: $(tail -3 "$BENCH_WORK/deltagrid.log" | tr '\n' ' ')" ;;
        *) DG_STATUS="$DG_BIN server did not answer PING on 127.0.0.1:$DG_PORT within 15 s" ;;
    esac
}

bench_start_servers() {
    start_redis
    start_deltagrid
    if ((DG_UP == 0)); then
        say ""
        say "*** deltagrid is NOT being measured: $DG_STATUS"
        say "*** Only the Redis side will be reported."
        say ""
    fi
}

machine_line() {
    local cpu mem
    cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
    mem=$(awk '/^MemTotal/ {printf "%.1f GiB", $2 / 1048576}' /proc/meminfo)
    printf '%s cores (nproc), %s RAM, CPU "%s", load average %s' \
        "$(nproc)" "$mem" "$cpu" "$(cut -d' ' -f1-3 /proc/loadavg)"
}

# Starts a 3-node site (release binary, loopback, replication = sync) with
# `backups` = $1; sets SITE_PORTS to the nodes' client ports.
start_site() {
    local backups=$1 dir=$BENCH_WORK/site-b$1 i
    mkdir -p "$dir"
    local ports=() cports=() seeds=""
    for i in 1 2 3; do ports+=("$(free_port)"); cports+=("$(free_port)"); done
    for i in 0 1 2; do seeds+="\"127.0.0.1:${cports[$i]}\","; done
    for i in 0 1 2; do
        cat >"$dir/n$i.toml" <<TOML
[node]
id = "n$((i + 1))"
listen = "127.0.0.1:${ports[$i]}"
admin_listen = "127.0.0.1:$(free_port)"
cluster_listen = "127.0.0.1:${cports[$i]}"
data_dir = "$dir/data$i"
[site]
id = 1
seeds = [${seeds%,}]
backups = $backups
replication = "sync"
TOML
        RUST_LOG=warn "$DG_BIN" server --config "$dir/n$i.toml" >"$dir/n$i.log" 2>&1 &
        BENCH_PIDS+=("$!")
    done
    for i in 0 1 2; do
        for _ in $(seq 1 200); do
            redis-cli -p "${ports[$i]}" cluster info 2>/dev/null | grep -q "cluster_state:ok" && break
            sleep 0.05
        done
    done
    SITE_PORTS=("${ports[@]}")
}

local_tag() {  # a hash tag whose slot node at port $1 serves
    local port=$1 i
    for i in $(seq 0 5000); do
        if [[ $(redis-cli -p "$port" set "{t$i}probe" 1 2>/dev/null) == OK ]]; then
            echo "{t$i}"
            return
        fi
    done
    say "no local hash tag found on port $port"
    exit 1
}

# Settings shared by the latency scripts: OPS, WARMUP, RATE from the
# environment, a run STAMP, and the OUT directory for JSON results.
latency_settings() {
    OPS=${OPS:-20000}
    WARMUP=${WARMUP:-2000}
    RATE=${RATE:-0}
    STAMP=$(date -u +%Y-%m-%dT%H%M%SZ)
    OUT=$BENCH_ROOT/bench/results
    mkdir -p "$OUT"
}
