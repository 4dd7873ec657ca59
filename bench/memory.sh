#!/usr/bin/env bash
# Bytes per key of small sets and sorted sets (and, for reference, strings
# and hashes) on one deltagrid node next to Redis, loaded the same way.
#
# For each type it starts both servers empty, loads KEYS keys of MEMBERS
# small members each through redis-cli --pipe, and reports, per key, the
# growth of `used_memory` (INFO memory: Redis's allocator count, deltagrid's
# counting allocator) and of the process RSS.
#
# usage: bash bench/memory_types.sh        (KEYS [1000000] MEMBERS [3] TYPES ["set zset hash string"])
# Needs a release build (DELTAGRID_BIN; see bench/common.sh) and redis-server.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
bench_args "$@"
bench_no_more_args

KEYS=${KEYS:-1000000}
MEMBERS=${MEMBERS:-3}
TYPES=${TYPES:-"set zset hash string"}

info_used() { redis-cli -p "$1" INFO memory | tr -d '\r' | awk -F: '$1 == "used_memory" { print $2 }'; }
rss() { awk '/^VmRSS:/ { print $2 * 1024 }' "/proc/$1/status"; }

# commands TYPE: the load, one command per key.
commands() {
    awk -v n="$KEYS" -v m="$MEMBERS" -v t="$1" 'BEGIN {
        for (i = 0; i < n; i++) {
            line = ""
            if (t == "set") { line = "SADD set:" i; for (j = 0; j < m; j++) line = line " member:" j }
            else if (t == "zset") { line = "ZADD zset:" i; for (j = 0; j < m; j++) line = line " " j " member:" j }
            else if (t == "hash") { line = "HSET hash:" i; for (j = 0; j < m; j++) line = line " field:" j " v" j }
            else { line = "SET string:" i " value:" i }
            print line
        }
    }'
}

say "machine: $(machine_line)"
printf '| type | keys | members | redis used_memory B/key | deltagrid used_memory B/key | ratio | redis RSS B/key | deltagrid RSS B/key |\n'
printf '|---|---:|---:|---:|---:|---:|---:|---:|\n'
for t in $TYPES; do
    bench_start_servers
    ((DG_UP)) || { say "deltagrid not started: $DG_STATUS"; exit 1; }
    r0=$(info_used "$REDIS_PORT"); g0=$(info_used "$DG_PORT")
    rr0=$(rss "$REDIS_PID"); gr0=$(rss "$DG_PID")
    commands "$t" | redis-cli -p "$REDIS_PORT" --pipe >/dev/null
    commands "$t" | redis-cli -p "$DG_PORT" --pipe >/dev/null
    [[ $(redis-cli -p "$DG_PORT" DBSIZE) == "$KEYS" ]] || { say "deltagrid holds $(redis-cli -p "$DG_PORT" DBSIZE) keys, not $KEYS"; exit 1; }
    r1=$(info_used "$REDIS_PORT"); g1=$(info_used "$DG_PORT")
    rr1=$(rss "$REDIS_PID"); gr1=$(rss "$DG_PID")
    awk -v t="$t" -v k="$KEYS" -v m="$MEMBERS" -v r=$((r1 - r0)) -v g=$((g1 - g0)) -v rr=$((rr1 - rr0)) -v gr=$((gr1 - gr0)) \
        'BEGIN { printf "| %s | %d | %d | %.0f | %.0f | %.2f | %.0f | %.0f |\n", t, k, m, r / k, g / k, g / r, rr / k, gr / k }'
    kill "$REDIS_PID" "$DG_PID" 2>/dev/null || true
    wait "$REDIS_PID" "$DG_PID" 2>/dev/null || true
    forget_pid "$REDIS_PID"
    forget_pid "$DG_PID"
done
