#!/usr/bin/env bash
# Memory per key (issue 40): deltagrid next to Redis, loaded the same way in
# the same run, for each shape the issue names (the shapes of
# tests/python/test_memory_per_key.py):
#   string  16-byte key, 16-byte value
#   hash    5 fields (`field:N` = `value:N`)
#   set     10 members (`member:N`)
#   zset    10 members (scores 0..9)
#   list    10 elements (`element:N`; not in TYPES unless named: no target)
# For each shape both servers start empty, KEYS keys go in through
# `redis-cli --pipe`, and per key it prints: the RSS growth of each process
# and their ratio, deltagrid's mean `MEMORY USAGE` over 100 keys spread over
# the load, and the growth of `used_memory` (INFO memory) of each.
#
# WAN=1: instead of one node, two one-node sites linked by WAN (each
# targets the other). Site 1 writes the first 55% of the keys, site 2 the
# last 55% (a tenth of the keys is written at both); once both sites hold
# every key it prints the RSS growth per key at each site next to Redis
# holding the same keys.
#
# usage: bash bench/memory.sh      (KEYS [1000000] TYPES ["string hash set zset"] WAN [0] MEMBERS: override the fields/members per key)
# Needs a release build (DELTAGRID_BIN; see bench/common.sh) and redis-server.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
bench_args "$@"
bench_no_more_args

KEYS=${KEYS:-1000000}
TYPES=${TYPES:-"string hash set zset"}
WAN=${WAN:-0}

info_used() { redis-cli -p "$1" INFO memory | tr -d '\r' | awk -F: '$1 == "used_memory" { print $2 }'; }
rss() { awk '/^VmRSS:/ { print $2 * 1024 }' "/proc/$1/status"; }
dbsize() { redis-cli -p "$1" DBSIZE 2>/dev/null || echo 0; }

# commands TYPE [FROM TO]: the load, one command per key, keys FROM..TO-1
# (default all KEYS).
commands() {
    local members=${MEMBERS:-$([[ $1 == hash ]] && echo 5 || echo 10)}
    awk -v from="${2:-0}" -v to="${3:-$KEYS}" -v m="$members" -v t="$1" 'BEGIN {
        for (i = from; i < to; i++) {
            if (t == "string") { printf "SET string:%09d value:%010d\n", i, i; continue }
            if (t == "hash") { line = sprintf("HSET hash:%011d", i); for (j = 0; j < m; j++) line = line " field:" j " value:" j }
            else if (t == "set") { line = sprintf("SADD set:%012d", i); for (j = 0; j < m; j++) line = line " member:" j }
            else if (t == "list") { line = sprintf("RPUSH list:%011d", i); for (j = 0; j < m; j++) line = line " element:" j }
            else { line = sprintf("ZADD zset:%011d", i); for (j = 0; j < m; j++) line = line " " j " member:" j }
            print line
        }
    }'
}

# load PORT TYPE [FROM TO]: fails unless redis-cli --pipe reports no error.
load() {
    local out
    out=$(commands "$2" "${3:-0}" "${4:-$KEYS}" | redis-cli -p "$1" --pipe)
    grep -q "errors: 0" <<<"$out" || die "load into port $1: $out"
}

# usage_mean PORT TYPE: the mean MEMORY USAGE of 100 keys spread over the
# load (key names: the shape, a colon and the index, zero-padded to 16 bytes).
declare -A width=([string]=9 [hash]=11 [set]=12 [zset]=11 [list]=11)
usage_mean() {
    awk -v n="$KEYS" -v t="$2" -v w="${width[$2]}" 'BEGIN {
        for (j = 0; j < 100; j++) printf "MEMORY USAGE %s:%0*d\n", t, w, int(j * n / 100) }' |
        redis-cli -p "$1" | awk '{ s += $1; n++ } END { printf "%.0f", s / n }'
}

per_key() { awk -v b="$1" -v k="$KEYS" 'BEGIN { printf "%.0f", b / k }'; }

# measure_redis TYPE: Redis alone, loaded; sets R_RSS and R_USED (B/key).
measure_redis() {
    start_redis
    local r0 u0
    r0=$(rss "$REDIS_PID"); u0=$(info_used "$REDIS_PORT")
    load "$REDIS_PORT" "$1"
    R_RSS=$(per_key $(($(rss "$REDIS_PID") - r0))); R_USED=$(per_key $(($(info_used "$REDIS_PORT") - u0)))
    kill "$REDIS_PID" 2>/dev/null || true
    wait "$REDIS_PID" 2>/dev/null || true
    forget_pid "$REDIS_PID"
}

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }

one_node() {
    printf '| shape | keys | Redis RSS B/key | deltagrid RSS B/key | ratio | deltagrid MEMORY USAGE mean | used_memory B/key (Redis / deltagrid) |\n'
    printf '|---|---:|---:|---:|---:|---:|---:|\n'
    local t g0 u0 g_rss g_used usage
    for t in $TYPES; do
        measure_redis "$t"
        start_deltagrid
        ((DG_UP)) || die "deltagrid not started: $DG_STATUS"
        g0=$(rss "$DG_PID"); u0=$(info_used "$DG_PORT")
        load "$DG_PORT" "$t"
        [[ $(dbsize "$DG_PORT") == "$KEYS" ]] || die "deltagrid holds $(dbsize "$DG_PORT") keys, not $KEYS"
        g_rss=$(per_key $(($(rss "$DG_PID") - g0))); g_used=$(per_key $(($(info_used "$DG_PORT") - u0)))
        usage=$(usage_mean "$DG_PORT" "$t")
        printf '| %s | %d | %d | %d | %s | %d | %d / %d |\n' "$t" "$KEYS" "$R_RSS" "$g_rss" "$(ratio "$g_rss" "$R_RSS")" \
            "$usage" "$R_USED" "$g_used"
        kill "$DG_PID" 2>/dev/null || true
        wait "$DG_PID" 2>/dev/null || true
        forget_pid "$DG_PID"
    done
}

# start_wan_site N: one-node site N (1 or 2) whose [wan] targets the other;
# the ports of both must be set (PORT_n, ADMIN_n, WANPORT_n). Sets PID_n.
start_wan_site() {
    local n=$1 other=$((3 - $1)) dir=$BENCH_WORK/site$1
    local port=PORT_$n admin=ADMIN_$n wan=WANPORT_$n owan=WANPORT_$other
    mkdir -p "$dir"
    cat >"$dir/node.toml" <<TOML
[node]
id = "site$n-n1"
listen = "127.0.0.1:${!port}"
admin_listen = "127.0.0.1:${!admin}"
data_dir = "$dir/data"
persistence = "off"
[site]
id = $n
name = "site$n"
[wan]
listen = "127.0.0.1:${!wan}"
[[wan.targets]]
name = "site$other"
endpoints = ["127.0.0.1:${!owan}"]
TOML
    RUST_LOG=warn "$DG_BIN" server --config "$dir/node.toml" >"$dir/node.log" 2>&1 &
    BENCH_PIDS+=("$!")
    printf -v "PID_$n" '%s' "$!"
    wait_ready "$!" "${!port}" 15 || die "site $n did not come up: $(tail -3 "$dir/node.log" | tr '\n' ' ')"
}

two_sites() {
    need_deltagrid
    printf '| shape | keys | Redis RSS B/key | site 1 RSS B/key | ratio | site 2 RSS B/key | ratio | steady: site 1 / site 2 RSS B/key (ratios) | MEMORY USAGE mean (site 1 / 2) | used_memory B/key (Redis / site 1 / site 2) | RSS B/key after MEMORY PURGE (site 1 / 2) |\n'
    printf '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n'
    local t n r0_1 r0_2 u0_1 u0_2 lo=$((KEYS * 45 / 100)) hi=$((KEYS * 55 / 100)) deadline
    for t in $TYPES; do
        measure_redis "$t"
        for n in 1 2; do
            printf -v "PORT_$n" '%s' "$(free_port)"
            printf -v "ADMIN_$n" '%s' "$(free_port)"
            printf -v "WANPORT_$n" '%s' "$(free_port)"
        done
        start_wan_site 1
        start_wan_site 2
        r0_1=$(rss "$PID_1"); r0_2=$(rss "$PID_2")
        u0_1=$(info_used "$PORT_1"); u0_2=$(info_used "$PORT_2")
        load "$PORT_1" "$t" 0 "$hi" &
        local l1=$!
        load "$PORT_2" "$t" "$lo" "$KEYS"
        wait "$l1" || die "load into site 1 failed"
        deadline=$((SECONDS + 300))
        until [[ $(dbsize "$PORT_1") == "$KEYS" && $(dbsize "$PORT_2") == "$KEYS" ]]; do
            ((SECONDS < deadline)) || die "sites hold $(dbsize "$PORT_1") / $(dbsize "$PORT_2") keys after 300 s, not $KEYS"
            sleep 0.2
        done
        sleep 1  # the last acknowledgements, and the logs' trimming after them
        local s1 s2 used1 used2 p1 p2
        s1=$(per_key $(($(rss "$PID_1") - r0_1))); s2=$(per_key $(($(rss "$PID_2") - r0_2)))
        used1=$(per_key $(($(info_used "$PORT_1") - u0_1))); used2=$(per_key $(($(info_used "$PORT_2") - u0_2)))
        # Steady: once the cron has had its chance to trim (at most every
        # 10 s, when RSS stands 8 MiB or an eighth above the heap in use).
        sleep 11
        local t1 t2
        t1=$(per_key $(($(rss "$PID_1") - r0_1))); t2=$(per_key $(($(rss "$PID_2") - r0_2)))
        # What the allocator holds free (glibc's arenas) beside what is used.
        redis-cli -p "$PORT_1" MEMORY PURGE >/dev/null; redis-cli -p "$PORT_2" MEMORY PURGE >/dev/null
        p1=$(per_key $(($(rss "$PID_1") - r0_1))); p2=$(per_key $(($(rss "$PID_2") - r0_2)))
        printf '| %s | %d | %d | %d | %s | %d | %s | %d / %d (%s / %s) | %d / %d | %d / %d / %d | %d / %d |\n' "$t" "$KEYS" "$R_RSS" \
            "$s1" "$(ratio "$s1" "$R_RSS")" "$s2" "$(ratio "$s2" "$R_RSS")" \
            "$t1" "$t2" "$(ratio "$t1" "$R_RSS")" "$(ratio "$t2" "$R_RSS")" \
            "$(usage_mean "$PORT_1" "$t")" "$(usage_mean "$PORT_2" "$t")" "$R_USED" "$used1" "$used2" "$p1" "$p2"
        kill -INT "$PID_1" "$PID_2" 2>/dev/null || true
        wait "$PID_1" "$PID_2" 2>/dev/null || true
        forget_pid "$PID_1"
        forget_pid "$PID_2"
    done
}

say "machine: $(machine_line)"
if [[ $WAN == 1 ]]; then
    say "two one-node sites linked by WAN; site 1 writes keys 0..$((KEYS * 55 / 100 - 1)), site 2 keys $((KEYS * 45 / 100))..$((KEYS - 1))"
    two_sites
else
    one_node
fi
