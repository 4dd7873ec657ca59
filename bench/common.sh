# Shared by the scenario scripts under bench/ (sourced, not run): the
# command line every scenario takes, the deltagrid binary, redis-server and
# deltagrid processes on free loopback ports (stopped again when the script
# exits: only the processes started here), a python with matplotlib for the
# charts, and Markdown tables.
#
# Every scenario takes:
#   --out DIR   where its CSV/JSON and PNG charts go [docs/bench]
#   --smoke     (or SMOKE=1) a few seconds per scenario to check the harness,
#               not the numbers; output goes to a new temporary directory
#               unless --out names one, and never into docs/bench
# Environment:
#   DELTAGRID_BIN     deltagrid binary (default: the release build under
#                     $CARGO_TARGET_DIR or target/, built by cargo first)
#   DELTAGRID_BUILD=0 never build it
#   REDIS_SERVER      redis-server binary (default: redis-server on PATH)
#   PLOT_PYTHON       a python with matplotlib (default: bench/.venv, then
#                     tests/python/.venv, then .venv; bench/.venv is created
#                     with matplotlib from PyPI if none has it)

BENCH_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BENCH_WORK=$(mktemp -d "${TMPDIR:-/tmp}/deltagrid-bench.XXXXXX")
BENCH_PIDS=()

# Stops every process this script started and waits for them.
stop_started() {
    local pid
    for pid in "${BENCH_PIDS[@]}"; do
        kill -INT "$pid" 2>/dev/null || true
    done
    for pid in "${BENCH_PIDS[@]}"; do
        wait "$pid" 2>/dev/null || true
    done
    BENCH_PIDS=()
}

bench_cleanup() {
    stop_started
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
die() { say "error: $*"; exit 1; }

# The command line every scenario takes (see the top of this file). Sets
# SMOKE (0|1), OUT (absolute, created) and ARGS (every other argument, in
# order, for the scenario to parse or pass on).
bench_args() {
    SMOKE=${SMOKE:-0}
    [[ $SMOKE == 0 || $SMOKE == 1 ]] || die "SMOKE must be 0 or 1, not '$SMOKE'"
    local out=""
    ARGS=()
    while (($#)); do
        case $1 in
            --out) out=${2:?--out needs a directory}; shift 2 ;;
            --out=*) out=${1#--out=}; shift ;;
            --smoke) SMOKE=1; shift ;;
            *) ARGS+=("$1"); shift ;;
        esac
    done
    if [[ -z $out ]]; then
        if ((SMOKE)); then
            out=$(mktemp -d "${TMPDIR:-/tmp}/deltagrid-smoke.XXXXXX")
        else
            out=$BENCH_ROOT/docs/bench
        fi
    fi
    mkdir -p "$out"
    OUT=$(cd "$out" && pwd -P)
    local docs
    docs=$(realpath -m "$BENCH_ROOT/docs/bench")
    if ((SMOKE)) && [[ $OUT == "$docs" || $OUT == "$docs"/* ]]; then
        die "--smoke never writes into docs/bench (--out $out): give another directory"
    fi
    ((SMOKE == 0)) || say "smoke run: results go to $OUT"
}

# For scenarios that take nothing but --out/--smoke.
bench_no_more_args() {
    ((${#ARGS[@]} == 0)) || die "unknown argument: ${ARGS[0]} (this script takes --out DIR and --smoke)"
}

# A port nothing listens on right now and not handed out before in this
# run, below the kernel's ephemeral range: a port the kernel picks (bind to
# port 0) comes from the range outgoing connections take their local ports
# from, and a site's nodes dialing each other could take a port chosen for
# a node that had not bound it yet (seen once in CI: a site never formed).
free_port() {
    if command -v python3 >/dev/null 2>&1; then
        python3 "$BENCH_ROOT/tests/python/ports.py" "$BENCH_WORK/ports"
        return
    fi
    local p
    while :; do
        p=$((20000 + RANDOM % 12000))
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

# `taskset` prefixes for the servers a script starts (redis_up,
# start_deltagrid) and for its load client; empty unless pin_setup set them.
SERVER_PIN=()
CLIENT_PIN=()
# Extra server arguments a scenario may set before starting them.
REDIS_EXTRA_ARGS=()
DG_EXTRA_ARGS=()

# pin_setup: with PIN=1, servers on CPU 0 and the load client on the other
# CPUs (SERVER_CPUS / CLIENT_CPUS, taskset lists, override either), so that
# a server and the client never share a CPU or migrate between them.
pin_setup() {
    local s=${SERVER_CPUS:-} c=${CLIENT_CPUS:-}
    if [[ ${PIN:-0} == 1 ]]; then
        (($(nproc) >= 2)) || die "PIN=1 needs 2 CPUs or more (nproc: $(nproc))"
        s=${s:-0} c=${c:-$( (($(nproc) == 2)) && echo 1 || echo "1-$(($(nproc) - 1))")}
    fi
    [[ -n $s || -n $c ]] || return 0
    command -v taskset >/dev/null || die "PIN, SERVER_CPUS and CLIENT_CPUS need taskset (util-linux)"
    [[ -z $s ]] || SERVER_PIN=(taskset -c "$s")
    [[ -z $c ]] || CLIENT_PIN=(taskset -c "$c")
    say "pinned: servers on CPUs ${s:-any}, the load client on CPUs ${c:-any}"
}

# redis_up NAME PORT [redis-server options...]: starts redis-server on
# 127.0.0.1:PORT without persistence and waits for PING; exits on failure.
# REDIS_PID: the process started last.
redis_up() {
    local name=$1 port=$2 server=${REDIS_SERVER:-redis-server}
    shift 2
    command -v "$server" >/dev/null || die "$server not found (apt-get install redis-server)"
    mkdir -p "$BENCH_WORK/$name"  # its dir: a replica writes the RDB it syncs from there
    "${SERVER_PIN[@]}" "$server" --bind 127.0.0.1 --port "$port" --save "" --appendonly no --dir "$BENCH_WORK/$name" \
        --daemonize no --logfile "$BENCH_WORK/$name.log" "$@" &
    local pid=$!
    BENCH_PIDS+=("$pid")
    REDIS_PID=$pid
    if ! wait_ready "$pid" "$port" 10; then
        say "error: redis-server ($name) did not come up on 127.0.0.1:$port:"
        tail -5 "$BENCH_WORK/$name.log" >&2 || true
        exit 1
    fi
    REDIS_VERSION=$("$server" --version | sed -n 's/.* v=\([^ ]*\).*/\1/p')
    say "redis-server $REDIS_VERSION ($name) up on 127.0.0.1:$port (pid $pid)"
}

# cpu_ticks PID: user + system CPU time of a process, in clock ticks.
cpu_ticks() {
    awk '{ print $14 + $15 }' "/proc/$1/stat" 2>/dev/null || echo 0
}

# site_cpu_ticks: cpu_ticks summed over the nodes of the last start_site.
site_cpu_ticks() {
    local pid sum=0
    for pid in "${SITE_PIDS[@]}"; do
        sum=$((sum + $(cpu_ticks "$pid")))
    done
    echo "$sum"
}

# us_per_op TICKS OPS: CPU microseconds per operation.
us_per_op() {
    awk -v t="$1" -v n="$2" -v hz="$(getconf CLK_TCK)" 'BEGIN { if (n > 0) printf "%.2f", t * 1e6 / hz / n }'
}

# Sets REDIS_PORT: a redis-server alone (with REDIS_EXTRA_ARGS, if set).
start_redis() {
    REDIS_PORT=$(free_port)
    redis_up redis "$REDIS_PORT" "${REDIS_EXTRA_ARGS[@]}"
}

# tls_certs DIR: a CA, a server certificate for 127.0.0.1 and a client
# certificate (X.509 v3, RSA 2048) in DIR, made with openssl.
tls_certs() {
    local d=$1
    mkdir -p "$d"
    (
        cd "$d"
        openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 2 -subj /CN=bench-ca
        echo "subjectAltName=IP:127.0.0.1,DNS:localhost" >server.ext
        echo "extendedKeyUsage=clientAuth" >client.ext
        for who in server client; do
            openssl req -newkey rsa:2048 -nodes -keyout "$who.key" -out "$who.csr" -subj "/CN=$who"
            openssl x509 -req -in "$who.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -out "$who.crt" \
                -days 2 -extfile "$who.ext"
        done
    ) >"$d/openssl.log" 2>&1 || die "openssl could not make the TLS certificates (see $d/openssl.log)"
}

# Sets REDIS_PRIMARY_PORT and REDIS_REPLICA_PORT: a redis-server and one
# replica of it (replicaof), once the replica is in sync.
start_redis_with_replica() {
    REDIS_PRIMARY_PORT=$(free_port)
    REDIS_REPLICA_PORT=$(free_port)
    redis_up redis-primary "$REDIS_PRIMARY_PORT"
    redis_up redis-replica "$REDIS_REPLICA_PORT" --replicaof 127.0.0.1 "$REDIS_PRIMARY_PORT"
    local deadline=$((SECONDS + 20))
    until redis-cli -p "$REDIS_REPLICA_PORT" info replication | grep -q '^master_link_status:up' &&
          redis-cli -p "$REDIS_PRIMARY_PORT" info replication | grep -q '^connected_slaves:1'; do
        ((SECONDS < deadline)) || die "the Redis replica on port $REDIS_REPLICA_PORT did not sync within 20 s"
        sleep 0.1
    done
    say "redis replica on 127.0.0.1:$REDIS_REPLICA_PORT in sync with 127.0.0.1:$REDIS_PRIMARY_PORT"
}

# Finds or builds the deltagrid binary; sets DG_BIN, or DG_STATUS on failure.
find_deltagrid() {
    if [[ -n ${DELTAGRID_BIN:-} ]]; then
        DG_BIN=$DELTAGRID_BIN
        [[ -x $DG_BIN ]] || { DG_STATUS="DELTAGRID_BIN=$DG_BIN is not an executable file"; return 1; }
        return 0
    fi
    DG_BIN=${CARGO_TARGET_DIR:-$BENCH_ROOT/target}/release/deltagrid
    # Always let cargo decide: a stale release binary would measure old code.
    if [[ ${DELTAGRID_BUILD:-1} != 0 ]]; then
        say "building deltagrid: cargo build --release -p deltagrid (log: $BENCH_WORK/build.log)"
        if ! (cd "$BENCH_ROOT" && cargo build --release -p deltagrid) >"$BENCH_WORK/build.log" 2>&1; then
            DG_STATUS="cargo build --release -p deltagrid failed: $(grep -m1 '^error' "$BENCH_WORK/build.log")"
            return 1
        fi
    fi
    [[ -x $DG_BIN ]] || { DG_STATUS="$DG_BIN does not exist (DELTAGRID_BUILD=${DELTAGRID_BUILD:-1})"; return 1; }
}

# find_deltagrid, or exit saying why.
need_deltagrid() {
    find_deltagrid || die "deltagrid: $DG_STATUS"
    say "deltagrid binary: $DG_BIN"
}

# Sets DG_UP, DG_PORT, DG_ADMIN_PORT, DG_PID: one deltagrid node.
start_deltagrid() {
    DG_UP=0
    DG_PORT=$(free_port)
    DG_ADMIN_PORT=$(free_port)
    find_deltagrid || return 0
    local threads=()
    [[ -z ${DG_THREADS:-} ]] || threads=(--threads "$DG_THREADS")
    "${SERVER_PIN[@]}" "$DG_BIN" server --listen "127.0.0.1:$DG_PORT" --admin-listen "127.0.0.1:$DG_ADMIN_PORT" "${threads[@]}" \
        "${DG_EXTRA_ARGS[@]}" >"$BENCH_WORK/deltagrid.log" 2>&1 &
    local pid=$! rc=0
    BENCH_PIDS+=("$pid")
    DG_PID=$pid
    wait_ready "$pid" "$DG_PORT" 15 || rc=$?
    case $rc in
        0) DG_UP=1; DG_STATUS="up"
           say "deltagrid up on 127.0.0.1:$DG_PORT, admin 127.0.0.1:$DG_ADMIN_PORT (pid $pid, $DG_BIN, threads: ${DG_THREADS:-one per CPU})" ;;
        1) rc=0; wait "$pid" 2>/dev/null || rc=$?
           forget_pid "$pid"
           DG_STATUS="$DG_BIN server exited with code $rc before answering PING on 127.0.0.1:$DG_PORT; last output: $(tail -3 "$BENCH_WORK/deltagrid.log" | tr '\n' ' ')" ;;
        *) DG_STATUS="$DG_BIN server did not answer PING on 127.0.0.1:$DG_PORT within 15 s" ;;
    esac
}

# Redis and one deltagrid node side by side (throughput.sh). If deltagrid
# cannot run, says so loudly and carries on with Redis alone (DG_UP=0).
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

# start_site NAME BACKUPS [NODES=3]: a site of NODES deltagrid processes on
# loopback (replication = "sync"), `backups` = BACKUPS. Returns once every
# node reports cluster_state:ok and, with backups, every partition has an
# in-sync backup; exits otherwise. Sets SITE_PORTS (client ports, node 1
# first) and SITE_ADMIN_PORTS. SITE_NODE_TOML: lines added to every node's
# [node] section (e.g. SITE_NODE_TOML=$'threads = 1\nidle_poll_us = 0').
# SITE_PERSISTENCE [off]: node.persistence (Redis beside it keeps no AOF).
start_site() {
    local name=$1 backups=$2 nodes=${3:-3} dir=$BENCH_WORK/$1 i parts synced
    mkdir -p "$dir"
    local ports=() cports=() aports=() seeds=""
    for ((i = 0; i < nodes; i++)); do
        ports+=("$(free_port)"); cports+=("$(free_port)"); aports+=("$(free_port)")
        seeds+="\"127.0.0.1:${cports[$i]}\","
    done
    for ((i = 0; i < nodes; i++)); do
        cat >"$dir/n$i.toml" <<TOML
[node]
id = "n$((i + 1))"
listen = "127.0.0.1:${ports[$i]}"
admin_listen = "127.0.0.1:${aports[$i]}"
cluster_listen = "127.0.0.1:${cports[$i]}"
data_dir = "$dir/data$i"
persistence = "${SITE_PERSISTENCE:-off}"
${SITE_NODE_TOML:-}
[site]
id = 1
seeds = [${seeds%,}]
backups = $backups
replication = "sync"
TOML
        RUST_LOG=warn "$DG_BIN" server --config "$dir/n$i.toml" >"$dir/n$i.log" 2>&1 &
        BENCH_PIDS+=("$!")
    done
    local deadline=$((SECONDS + 60))
    for ((i = 0; i < nodes; i++)); do
        until redis-cli -p "${ports[$i]}" cluster info 2>/dev/null | grep -q "cluster_state:ok"; do
            if ((SECONDS >= deadline)); then
                local j
                for ((j = 0; j < nodes; j++)); do
                    echo "--- node $((j + 1)) log (tail):" >&2
                    tail -5 "$dir/n$j.log" >&2 || true
                done
                die "site $name: node $((i + 1)) (port ${ports[$i]}) not cluster_state:ok within 60 s"
            fi
            sleep 0.1
        done
    done
    # With backups, wait until every partition has an in-sync backup, so that
    # every measured write waits for one (`cluster status`: column 6 counts
    # primaries, column 8 in-sync backups, per active node).
    local counts
    while ((backups > 0)); do
        counts=$("$DG_BIN" cluster status --admin "127.0.0.1:${aports[0]}" 2>/dev/null |
            awk '$1 ~ /^n[0-9]/ && $5 == "active" { p += $6; s += $8 } END { print p + 0, s + 0 }')
        read -r parts synced <<<"$counts"
        ((parts > 0 && synced >= parts * backups)) && break
        ((SECONDS < deadline)) || die "site $name: $synced of $((parts * backups)) backups in sync after 60 s"
        sleep 0.2
    done
    say "site $name: $nodes nodes, backups = $backups, replication = sync, client ports ${ports[*]}"
    SITE_PORTS=("${ports[@]}")
    SITE_ADMIN_PORTS=("${aports[@]}")
    SITE_PIDS=("${BENCH_PIDS[@]: -nodes}")
}

local_tag() {  # a hash tag whose slot node at port $1 serves
    local port=$1 i
    for i in $(seq 0 5000); do
        if [[ $(redis-cli -p "$port" set "{t$i}probe" 1 2>/dev/null) == OK ]]; then
            echo "{t$i}"
            return
        fi
    done
    die "no local hash tag found on port $port"
}

# Sets PY to a python with matplotlib ($PLOT_PYTHON, bench/.venv,
# tests/python/.venv, .venv, or a new bench/.venv with matplotlib from
# PyPI); empty (and says why) when none can be had.
plot_python() {
    PY=${PLOT_PYTHON:-}
    local cand
    if [[ -z $PY ]]; then
        for cand in "$BENCH_ROOT/bench/.venv/bin/python" "$BENCH_ROOT/tests/python/.venv/bin/python" \
                    "$BENCH_ROOT/.venv/bin/python"; do
            if [[ -x $cand ]] && "$cand" -c 'import matplotlib' 2>/dev/null; then PY=$cand; break; fi
        done
    fi
    if [[ -z $PY ]]; then
        say "no python with matplotlib: creating $BENCH_ROOT/bench/.venv (pip install matplotlib)"
        if python3 -m venv "$BENCH_ROOT/bench/.venv" >&2 &&
           "$BENCH_ROOT/bench/.venv/bin/pip" install -q --disable-pip-version-check matplotlib >&2; then
            PY=$BENCH_ROOT/bench/.venv/bin/python
        else
            say "could not make bench/.venv with matplotlib (Debian: apt-get install python3-venv): charts will be skipped"
        fi
    fi
}

# Runs the chart script bench/SCRIPT with ARGS under the python that has
# matplotlib (plot_python), or says the charts were skipped.
chart() {
    local script=$1
    shift
    plot_python
    if [[ -n $PY ]]; then
        "$PY" "$BENCH_ROOT/bench/$script" "$@"
    else
        echo "charts skipped: no python with matplotlib"
    fi
}

# Reads tab-separated rows (the first is the header) and prints a Markdown
# table: first column left-aligned, the rest right-aligned.
markdown_table() {
    awk -F'\t' '
        { n = NR; for (i = 1; i <= NF; i++) { c[n, i] = $i; if (length($i) > w[i]) w[i] = length($i) }; nf = NF }
        END {
            for (r = 1; r <= n; r++) {
                line = "|"
                for (i = 1; i <= nf; i++) line = line " " sprintf(i == 1 ? "%-" w[i] "s" : "%" w[i] "s", c[r, i]) " |"
                print line
                if (r == 1) {
                    line = "|"
                    for (i = 1; i <= nf; i++) { d = ""; for (k = 0; k < w[i] + (i == 1 ? 2 : 1); k++) d = d "-"; line = line d (i == 1 ? "" : ":") "|" }
                    print line
                }
            }
        }'
}
