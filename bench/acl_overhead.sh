#!/usr/bin/env bash
# What ACL checks cost: one deltagrid node (and, beside it, redis-server)
# with 100 ACL users of 10 key patterns each; redis-benchmark SET and GET
# (-P 1 and -P 16, 50 clients, random keys key:__rand_int__) run as the
# default user (+@all ~* &*: a single bit test) and as user u99, whose
# keys match only its 10th pattern (every key is checked against 10 globs).
# The two alternate, ROUNDS times; the table gives medians of ops/s and of
# each round's ratio restricted/default, per server.
#
# usage: bash bench/acl_overhead.sh
# Environment: N [200000] requests per -P 1 run (10x with -P 16), ROUNDS [3],
#   DELTAGRID_BIN [target/release/deltagrid, or $CARGO_TARGET_DIR's],
#   REDIS_SERVER [redis-server]. Loopback only; servers stopped on exit.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

N=${N:-200000}
ROUNDS=${ROUNDS:-3}
BIN=${DELTAGRID_BIN:-${CARGO_TARGET_DIR:-target}/release/deltagrid}
REDIS=${REDIS_SERVER:-redis-server}
[ -x "$BIN" ] || { echo "no $BIN: cargo build --release (or set DELTAGRID_BIN)" >&2; exit 1; }
command -v redis-benchmark >/dev/null || { echo "redis-benchmark not found (apt-get install redis-tools)" >&2; exit 1; }

WORK=$(mktemp -d /tmp/acl-overhead.XXXXXX)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$WORK"; }
trap cleanup EXIT

# 100 users of 10 key patterns; the default user keeps +@all ~* &*.
{
    echo "user default on nopass ~* &* +@all"
    for u in $(seq 0 99); do
        line="user u$u on >pw"
        for p in $(seq 0 8); do line+=" ~p$p:*"; done
        echo "$line ~key:* &* +@all"
    done
} > "$WORK/users.acl"

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
DG=$(free_port); RS=$(free_port)
"$BIN" server --listen "127.0.0.1:$DG" --admin-listen "127.0.0.1:$(free_port)" --data-dir "$WORK/dg" \
    --persistence off --aclfile "$WORK/users.acl" > "$WORK/dg.log" 2>&1 &
PIDS+=($!)
"$REDIS" --port "$RS" --bind 127.0.0.1 --save "" --appendonly no --aclfile "$WORK/users.acl" \
    > "$WORK/redis.log" 2>&1 &
PIDS+=($!)
for p in $DG $RS; do
    for _ in $(seq 100); do redis-cli -p "$p" ping >/dev/null 2>&1 && break; sleep 0.1; done
done

# ops/s of one run: server port, test, pipeline, user args...
run() {
    local port=$1 test=$2 p=$3; shift 3
    local n=$N; ((p > 1)) && n=$((N * 10))
    redis-benchmark -h 127.0.0.1 -p "$port" -t "$test" -P "$p" -c 50 -n "$n" -r 100000 --csv "$@" 2>/dev/null \
        | awk -F'"' 'NR==2 {print $4}'
}

median() { sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

printf "| server | test | P | default ops/s | u99 (10 patterns) ops/s | ratio |\n|---|---|---|---|---|---|\n"
for server in deltagrid redis; do
    port=$DG; [ "$server" = redis ] && port=$RS
    for test in set get; do
        for p in 1 16; do
            defaults=(); users=(); ratios=()
            for r in $(seq "$ROUNDS"); do
                if ((r % 2)); then
                    d=$(run "$port" "$test" "$p"); u=$(run "$port" "$test" "$p" --user u99 -a pw)
                else
                    u=$(run "$port" "$test" "$p" --user u99 -a pw); d=$(run "$port" "$test" "$p")
                fi
                defaults+=("$d"); users+=("$u")
                ratios+=("$(awk -v u="$u" -v d="$d" 'BEGIN {printf "%.3f", u / d}')")
            done
            printf "| %s | %s | %s | %.0f | %.0f | %s |\n" "$server" "$test" "$p" \
                "$(printf '%s\n' "${defaults[@]}" | median)" "$(printf '%s\n' "${users[@]}" | median)" \
                "$(printf '%s\n' "${ratios[@]}" | median)"
        done
    done
done
