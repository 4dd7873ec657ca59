#!/usr/bin/env bash
# Runs units of Redis 7.0.15's own Tcl test suite in external mode against a
# real redis-server and against a deltagrid node, in the same run, and reports
# how much of what Redis passes deltagrid passes too (docs/redis-suite.md).
#
#   1. gets the suite: Debian bookworm's redis source package is exactly 7.0.15;
#      it is downloaded once with `apt-get source --download-only` (a deb-src
#      entry is added if apt has none) and unpacked with --skip-patches, i.e.
#      the tree as Redis tagged it, into ${XDG_CACHE_HOME:-~/.cache}/deltagrid/.
#      Nothing of Redis's code is committed here; each run works on a copy.
#   2. starts redis-server (DEBUG enabled, no persistence) and a deltagrid node
#      (--enable-debug-command) on free loopback ports, in a temp dir;
#   3. runs every unit with ./runtest --host/--port --singledb --ignore-encoding
#      --ignore-digest --durable --single unit/..., first against Redis, then
#      against deltagrid; external mode skips `external:skip` tests itself.
#      A test that makes no progress for REDIS_SUITE_TEST_TIMEOUT seconds ends
#      its unit (the suite's own --timeout); a unit is also killed after
#      REDIS_SUITE_UNIT_TIMEOUT seconds. Tests a hung unit never ran count as
#      failed for that target.
#   4. report.py compares the [ok]/[err]/[exception]/[skip] lines per test and
#      writes $OUT/report.md, $OUT/results.tsv and $OUT/results.json.
#   5. exits 0 only when both runs ran (Redis's run complete in every unit) and
#      deltagrid passes >= REDIS_SUITE_MIN_PERCENT of the tests Redis passes.
#
# Knobs:
#   REDIS_SUITE_UNITS="unit/type/string unit/expire ..."  units to run (space-separated)
#   DELTAGRID_BIN=path              server binary (default <repo>/target/debug/deltagrid)
#   REDIS_SUITE_MIN_PERCENT=85      gate, in percent of the tests Redis passes
#   REDIS_SUITE_UNIT_MIN="unit/type/set=90 ..."  per-unit gates as well (percent of what Redis passes there)
#   REDIS_SUITE_KEEP=1              keep the runtest logs, server logs and suite copies in $OUT
#   REDIS_SUITE_OUT=dir (or OUT)    where the report goes (default: a new temp dir)
#   REDIS_SUITE_TEST_TIMEOUT=120    seconds without progress before a unit counts as hung
#                                   (unit/hyperloglog's fuzzing prints nothing for ~30 s, against Redis too)
#   REDIS_SUITE_UNIT_TIMEOUT=240    hard limit per unit and target
#   REDIS_SUITE_ISOLATE=1           also run every failing test alone, to tell its own cause from
#                                   fallout of an earlier test (adds ~1 s per failing test)
#   REDIS_SUITE_CACHE=dir           cache (default ${XDG_CACHE_HOME:-$HOME/.cache}/deltagrid)
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
START=$SECONDS

REDIS_VERSION=7.0.15
DEFAULT_UNITS="unit/type/string unit/type/hash unit/type/set unit/type/zset unit/type/incr unit/bitops unit/hyperloglog unit/dump unit/expire unit/keyspace unit/scan unit/tracking unit/info-command unit/protocol unit/pubsub unit/multi unit/introspection unit/sort unit/scripting unit/functions"
UNITS="${REDIS_SUITE_UNITS:-$DEFAULT_UNITS}"
DELTAGRID_BIN="${DELTAGRID_BIN:-$ROOT/target/debug/deltagrid}"
MIN_PERCENT="${REDIS_SUITE_MIN_PERCENT:-85}"
KEEP="${REDIS_SUITE_KEEP:-0}"
TEST_TIMEOUT="${REDIS_SUITE_TEST_TIMEOUT:-120}"
UNIT_TIMEOUT="${REDIS_SUITE_UNIT_TIMEOUT:-240}"
CACHE_DIR="${REDIS_SUITE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/deltagrid}"
SUITE_DIR="$CACHE_DIR/redis-$REDIS_VERSION"
OUT="${REDIS_SUITE_OUT:-${OUT:-}}"
if [ -z "$OUT" ]; then
    OUT="$(mktemp -d "${TMPDIR:-/tmp}/redis-suite.XXXXXX")"
fi
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/redis-suite-work.XXXXXX")"

log() { printf 'redis-suite: %s\n' "$*"; }
die() {
    printf 'redis-suite: %s\n' "$*" >&2
    exit 1
}

# shellcheck source=../shell.sh
. "$ROOT/tests/shell.sh"

SERVER_PID=""
cleanup() {
    # only the server started last can still be running: every other one
    # was stopped and reaped (so its pid may belong to someone else by now)
    if [ -n "$SERVER_PID" ]; then
        stop_server || true
    fi
    if [ "$KEEP" = "1" ]; then
        rm -rf "$OUT/work"
        mv "$WORK" "$OUT/work" 2>/dev/null || true
    else
        rm -rf "$WORK"
    fi
}
trap cleanup EXIT

# ---------------------------------------------------------------------------
# 1. The suite

tclsh_for_runtest() {
    # runtest looks for tclsh8.5, tclsh8.6 or tclsh8.7 by name
    command -v tclsh8.6 || command -v tclsh8.7 || command -v tclsh8.5 || true
}

APT_UPDATED=0
apt_install() {
    export DEBIAN_FRONTEND=noninteractive
    if [ "$APT_UPDATED" = "0" ]; then
        as_root apt-get update -q
        APT_UPDATED=1
    fi
    as_root apt-get install -y -q --no-install-recommends "$@"
}

suite_ready() {
    [ -f "$SUITE_DIR/.complete" ] &&
        grep -q "define REDIS_VERSION \"$REDIS_VERSION\"" "$SUITE_DIR/src/version.h" 2>/dev/null &&
        [ -f "$SUITE_DIR/tests/test_helper.tcl" ] && [ -f "$SUITE_DIR/runtest" ]
}

# Adds deb-src entries mirroring the configured deb ones, once.
add_deb_src() {
    local src=/etc/apt/sources.list.d/deltagrid-src.sources
    if [ -f /etc/apt/sources.list.d/debian.sources ]; then
        log "adding $src (deb-src twin of debian.sources)"
        sed 's/^Types:.*/Types: deb-src/' /etc/apt/sources.list.d/debian.sources |
            as_root tee "$src" >/dev/null
    elif [ -f /etc/apt/sources.list ] && grep -q '^deb ' /etc/apt/sources.list; then
        src=/etc/apt/sources.list.d/deltagrid-src.list
        log "adding $src (deb-src twin of sources.list)"
        sed -n 's/^deb /deb-src /p' /etc/apt/sources.list | as_root tee "$src" >/dev/null
    else
        die "no apt sources found to derive a deb-src entry from"
    fi
    as_root apt-get update -q
    APT_UPDATED=1
}

# A Debian version of the redis source package whose upstream is $REDIS_VERSION, or nothing
src_version() {
    { apt-cache showsrc redis 2>/dev/null || true; } |
        sed -n "s/^Version: \(.*:$REDIS_VERSION-.*\)/\1/p" | head -n 1
}

get_suite() {
    suite_ready && return 0
    log "getting Redis $REDIS_VERSION's test suite into $SUITE_DIR"
    command -v dpkg-source >/dev/null 2>&1 || apt_install dpkg-dev
    local dl="$CACHE_DIR/redis-src-download" ver dsc tmp
    mkdir -p "$dl"
    dsc="$(ls "$dl"/redis_"$REDIS_VERSION"-*.dsc 2>/dev/null | head -n 1 || true)"
    if [ -z "$dsc" ]; then
        ver="$(src_version)"
        if [ -z "$ver" ]; then
            add_deb_src
            ver="$(src_version)"
        fi
        [ -n "$ver" ] || die "apt has no redis source package of version $REDIS_VERSION (Debian bookworm has it)"
        (cd "$dl" && apt-get source -q --download-only "redis=$ver") ||
            die "apt-get source --download-only redis=$ver failed"
        dsc="$(ls "$dl"/redis_"$REDIS_VERSION"-*.dsc | head -n 1)"
    fi
    # --skip-patches: the tree as Redis tagged it, without Debian's patches
    # (which only add security fixes and their regression tests).
    # (unpacked next to the tarballs: dpkg-source links the .orig.tar.gz into
    # the parent of the directory it creates)
    tmp="$dl/redis-$REDIS_VERSION.tmp.$$"
    rm -rf "$tmp"
    # (dpkg-source checks the files against the .dsc, which apt verified; it
    # warns that it cannot check the .dsc's own signature without debian-keyring)
    dpkg-source -x --skip-patches "$dsc" "$tmp" >"$CACHE_DIR/dpkg-source.log" 2>&1 ||
        die "dpkg-source -x failed: $(cat "$CACHE_DIR/dpkg-source.log")"
    grep -q "define REDIS_VERSION \"$REDIS_VERSION\"" "$tmp/src/version.h" ||
        die "unpacked source is not Redis $REDIS_VERSION: $(grep REDIS_VERSION "$tmp/src/version.h" | head -n 1)"
    touch "$tmp/.complete"
    rm -rf "$SUITE_DIR"
    mv "$tmp" "$SUITE_DIR"
}

command -v redis-server >/dev/null 2>&1 || apt_install redis-server
[ -n "$(tclsh_for_runtest)" ] || apt_install tcl
[ -n "$(tclsh_for_runtest)" ] || die "tclsh 8.5+ still missing after installing tcl"
command -v python3 >/dev/null 2>&1 || apt_install python3
get_suite
log "suite: $SUITE_DIR ($(sed -n 's/^#define REDIS_VERSION "\(.*\)"/\1/p' "$SUITE_DIR/src/version.h"), upstream tree, Debian patches not applied)"
log "redis-server: $(redis-server --version)"
case "$(redis-server --version)" in
*"v=$REDIS_VERSION "*) ;;
*) log "warning: redis-server is not $REDIS_VERSION: the baseline comes from another version" ;;
esac

[ -x "$DELTAGRID_BIN" ] || die "deltagrid binary $DELTAGRID_BIN not found (cargo build -p deltagrid, or set DELTAGRID_BIN)"
DELTAGRID_BIN="$(cd "$(dirname "$DELTAGRID_BIN")" && pwd)/$(basename "$DELTAGRID_BIN")"
log "deltagrid: $DELTAGRID_BIN"

# A private copy of the suite per target. The one change to it, made here and
# nowhere else: in external mode the harness (tests/support/server.tcl,
# run_external_server_test) sends `r function flush` right after `r flushall`
# before every start_server block, outside any catch. A server without the
# FUNCTION command answers an error there, which aborts the whole unit as an
# [exception] before its first test. The copy wraps that one call in `catch`,
# for both targets (no effect on Redis, where it succeeds); whether the target
# refuses FUNCTION FLUSH is probed below and written in the report.
make_copy() {
    local dst="$1"
    mkdir -p "$dst"
    cp -a "$SUITE_DIR/tests" "$SUITE_DIR/runtest" "$dst/"
    rm -rf "$dst/tests/tmp"
    mkdir -p "$dst/tests/tmp"
    local f="$dst/tests/support/server.tcl"
    [ "$(grep -c '^    r function flush$' "$f")" = "1" ] ||
        die "expected exactly one 'r function flush' line in $f"
    sed -i 's/^    r function flush$/    catch {r function flush} ;# deltagrid redis-suite\/run.sh: FUNCTION may be missing/' "$f"
    grep -q '^    catch {r function flush}' "$f" || die "patching $f failed"
}

# ---------------------------------------------------------------------------
# 2. The servers

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# ping PORT: true when a RESP server there answers PING with +PONG
ping_port() {
    local line=""
    { exec 3<>"/dev/tcp/127.0.0.1/$1"; } 2>/dev/null || return 1
    printf 'PING\r\n' >&3
    IFS= read -r -t 2 line <&3 || true
    exec 3<&- 3>&-
    [ "${line%$'\r'}" = "+PONG" ]
}

# resp_cmd PORT WORD...: sends one command, prints the first line of the reply
resp_cmd() {
    local port="$1" line="" a
    shift
    { exec 3<>"/dev/tcp/127.0.0.1/$port"; } 2>/dev/null || return 1
    {
        printf '*%d\r\n' "$#"
        for a in "$@"; do printf '$%d\r\n%s\r\n' "${#a}" "$a"; done
    } >&3
    IFS= read -r -t 5 line <&3 || true
    exec 3<&- 3>&-
    printf '%s\n' "${line%$'\r'}"
}

wait_ping() {
    local port="$1" pid="$2" tries=200
    while [ "$tries" -gt 0 ]; do
        ping_port "$port" && return 0
        kill -0 "$pid" 2>/dev/null || return 1
        tries=$((tries - 1))
        sleep 0.05
    done
    return 1
}

mkdir -p "$OUT/logs/redis" "$OUT/logs/deltagrid"
: >"$OUT/runs.tsv"
printf 'target\tunit\trc\tseconds\tkilled\tserver_alive_after\n' >"$OUT/runs.tsv"
: >"$OUT/events.tsv"

# Every unit gets a fresh server (and so does every test run alone by the
# isolation step): a test that fails half-way may leave a CONFIG SET behind
# (maxmemory, say), which must not spill into the next unit. The port stays.
REDIS_PORT="$(free_port)"
DG_PORT="$(free_port)"
DG_ADMIN="$(free_port)"
STARTS=0
DG_ARGS=()
if "$DELTAGRID_BIN" server --help 2>/dev/null | grep -q -- '--enable-debug-command'; then
    DG_ARGS+=(--enable-debug-command)
else
    log "warning: this deltagrid has no --enable-debug-command"
fi

# start_server TARGET: starts a fresh redis-server or deltagrid; sets SERVER_PID
start_server() {
    STARTS=$((STARTS + 1))
    local data="$WORK/data/$1.$STARTS" port
    mkdir -p "$data"
    if [ "$1" = redis ]; then
        port="$REDIS_PORT"
        redis-server --bind 127.0.0.1 --port "$port" --enable-debug-command yes \
            --save '' --appendonly no --dir "$data" --daemonize no >>"$WORK/redis-server.log" 2>&1 &
    else
        port="$DG_PORT"
        # No persistence, as redis-server beside it (--appendonly no).
        "$DELTAGRID_BIN" server --listen "127.0.0.1:$port" --admin-listen "127.0.0.1:$DG_ADMIN" \
            --data-dir "$data" --persistence off "${DG_ARGS[@]}" >>"$WORK/deltagrid-server.log" 2>&1 &
    fi
    SERVER_PID=$!
    wait_ping "$port" "$SERVER_PID" || die "$1 did not start on 127.0.0.1:$port (log: $WORK/$1-server.log)"
    rm -rf "$WORK/data/$1.$((STARTS - 1))" 2>/dev/null || true
}

# stop_server: SIGTERM, then SIGKILL after 10 s; true if it was still running
stop_server() {
    local pid="$SERVER_PID" tries=100 alive=0
    if kill -0 "$pid" 2>/dev/null; then
        alive=1
        kill "$pid" 2>/dev/null || true
        while [ "$tries" -gt 0 ] && kill -0 "$pid" 2>/dev/null; do
            tries=$((tries - 1))
            sleep 0.1
        done
        kill -9 "$pid" 2>/dev/null || true
    fi
    wait "$pid" 2>/dev/null || true
    SERVER_PID=""
    [ "$alive" = 1 ]
}

port_of() { if [ "$1" = redis ]; then echo "$REDIS_PORT"; else echo "$DG_PORT"; fi; }

# runtest_unit TARGET UNIT LOG TEST_TIMEOUT UNIT_TIMEOUT [--only NAME]: one runtest, returns its status
runtest_unit() {
    local target="$1" unit="$2" out="$3" tt="$4" ut="$5"
    shift 5
    (
        cd "$WORK/suite-$target"
        TERM=dumb exec timeout --kill-after=10 "$ut" ./runtest \
            --host 127.0.0.1 --port "$(port_of "$target")" --singledb --ignore-encoding --ignore-digest \
            --durable --clients 1 --timeout "$tt" --single "$unit" "$@"
    ) >"$out" 2>&1 </dev/null
}

run_target() {
    local target="$1" unit rc t0 secs killed alive name lf
    make_copy "$WORK/suite-$target"
    start_server "$target"
    printf 'function_flush\t%s\t%s\n' "$target" "$(resp_cmd "$(port_of "$target")" FUNCTION FLUSH)" >>"$OUT/events.tsv"
    stop_server || true
    for unit in $UNITS; do
        [ -f "$WORK/suite-$target/tests/$unit.tcl" ] || die "no such unit in the suite: $unit"
        name="${unit#unit/}"
        lf="$OUT/logs/$target/${name//\//_}.log"
        start_server "$target"
        t0=$SECONDS
        rc=0
        runtest_unit "$target" "$unit" "$lf" "$TEST_TIMEOUT" "$UNIT_TIMEOUT" || rc=$?
        secs=$((SECONDS - t0))
        killed=0
        if [ "$rc" = "124" ] || [ "$rc" = "137" ]; then killed=1; fi
        alive=0
        stop_server && alive=1
        printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$target" "$unit" "$rc" "$secs" "$killed" "$alive" >>"$OUT/runs.tsv"
        printf '  %-10s %-22s %3ss  ok %3s  err %3s%s%s%s\n' "$target" "$unit" "$secs" \
            "$(grep -c '^\[ok\]' "$lf" || true)" "$(grep -c '^\[err\]' "$lf" || true)" \
            "$(grep -q '^\[TIMEOUT\]' "$lf" && echo '  HUNG' || true)" \
            "$([ "$killed" = 1 ] && echo '  KILLED' || true)" \
            "$([ "$alive" = 0 ] && echo '  SERVER DIED' || true)"
    done
}

log "redis-server on 127.0.0.1:$REDIS_PORT, deltagrid on 127.0.0.1:$DG_PORT; units: $UNITS"
run_target redis
run_target deltagrid

# Optional diagnosis: each test Redis passes and deltagrid fails is run again
# alone (runtest --only NAME: its start_server block's setup still runs, the
# other tests are skipped) on a fresh deltagrid and, when it fails there too,
# on a fresh Redis. A test that passes alone failed in the full run only
# because of an earlier test (e.g. replies left unread); one that Redis fails
# alone needs the state earlier tests leave.
isolate() {
    python3 "$HERE/report.py" --out "$OUT" --units "$UNITS" --list-failures >"$WORK/failures.tsv" || return 0
    local n=0 unit test target
    printf 'n\tunit\ttest\n' >"$OUT/isolation.tsv"
    mkdir -p "$OUT/logs/isolate"
    while IFS=$'\t' read -r unit test; do
        n=$((n + 1))
        printf '%s\t%s\t%s\n' "$n" "$unit" "$test" >>"$OUT/isolation.tsv"
        for target in deltagrid redis; do
            # Redis only for what deltagrid fails alone
            if [ "$target" = redis ] && grep -q '^\[ok\]' "$OUT/logs/isolate/$n.deltagrid.log"; then
                break
            fi
            start_server "$target"
            runtest_unit "$target" "$unit" "$OUT/logs/isolate/$n.$target.log" 10 60 --only "$test" || true
            stop_server || true
        done
    done <"$WORK/failures.tsv"
    log "isolation: ran $n failing tests alone"
}
if [ "${REDIS_SUITE_ISOLATE:-0}" = "1" ]; then
    isolate
fi

if [ "$KEEP" = "1" ]; then
    cp "$WORK/deltagrid-server.log" "$WORK/redis-server.log" "$OUT/logs/" 2>/dev/null || true
fi

# ---------------------------------------------------------------------------
# 4-5. Report and gate
rc=0
python3 "$HERE/report.py" --out "$OUT" --units "$UNITS" --min-percent "$MIN_PERCENT" \
    --unit-min "${REDIS_SUITE_UNIT_MIN:-}" \
    --redis-version "$(redis-server --version)" --deltagrid-bin "$DELTAGRID_BIN" \
    --seconds "$((SECONDS - START))" || rc=$?
[ "$KEEP" = "1" ] || rm -rf "$OUT/logs"
log "report: $OUT/report.md (also results.tsv, results.json)$([ "$KEEP" = "1" ] && echo "; logs: $OUT/logs, suite copies: $OUT/work")"
log "took $((SECONDS - START)) s"
exit "$rc"
