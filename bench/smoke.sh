#!/usr/bin/env bash
# Runs every benchmark scenario under bench/ in smoke mode (a few seconds
# each) so that the harness cannot rot: each must print its table and write
# its CSV/JSON and PNG charts. Checks the figures exist, not what they say.
# One summary line per scenario; exits non-zero if any failed.
#
# usage: bash bench/smoke.sh [SCENARIO...]   (default: all, in this order)
#   throughput latency site_latency site_throughput wan_delta wan_load restore
#
# Environment:
#   DELTAGRID_BIN  binary to run (default: the debug build,
#                  ${CARGO_TARGET_DIR:-target}/debug/deltagrid, built with
#                  `cargo build -p deltagrid` if missing; no release build needed)
#   SMOKE_OUT      keep every scenario's output under this directory (default:
#                  a temporary one, removed when every scenario passed)
#   SMOKE_TIMEOUT  seconds before one scenario is stopped [300]
# As root on Debian it installs what is missing (redis-server, redis-tools,
# python3-venv), and bench/.venv gets matplotlib from PyPI. The WAN
# scenarios use network namespaces as root and fall back to loopback (and
# say so) otherwise.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
ALL=(throughput latency site_latency site_throughput wan_delta wan_load restore)
SCENARIOS=("${ALL[@]}")
(($# == 0)) || SCENARIOS=("$@")
START=$SECONDS

# What each scenario must have written into its --out directory.
declare -A FILES=(
    [throughput]="throughput.csv throughput.png"
    [latency]="latency.json latency.csv latency.png"
    [site_latency]="site_latency.json site_latency.csv site_latency.png"
    [site_throughput]="site_throughput.csv site_throughput.png"
    [wan_delta]="wan_delta.json wan_delta.csv wan_delta_bytes.png wan_delta_updates.png"
    [wan_load]="wan_load.json wan_load.csv wan_load_queue.png wan_load_partitions.png wan_load_ack.png wan_load_outage.png wan_load_clients.png"
    [restore]="restore.json restore.png"
)
# A line of its table on stdout.
declare -A TABLE=(
    [throughput]="^| test "
    [latency]="^| workload "
    [site_latency]="^| workload "
    [site_throughput]="^| test "
    [wan_delta]="^== compared with GemFire"
    [wan_load]="^== compared with Hazelcast"
    [restore]="^reverse is "
)
for s in "${SCENARIOS[@]}"; do
    [[ -n ${FILES[$s]:-} ]] || die "unknown scenario '$s' (${ALL[*]})"
done

# Debian packages the scenarios need, when missing and we may install them.
missing=()
command -v redis-server >/dev/null || missing+=(redis-server)
command -v redis-benchmark >/dev/null && command -v redis-cli >/dev/null || missing+=(redis-tools)
python3 -c 'import ensurepip, venv' 2>/dev/null || missing+=(python3-venv)
if ((${#missing[@]})); then
    if [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null; then
        say "installing: ${missing[*]}"
        DEBIAN_FRONTEND=noninteractive apt-get update -q >&2
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}" >&2
    else
        die "missing: ${missing[*]} (apt-get install ${missing[*]})"
    fi
fi

if [[ -z ${DELTAGRID_BIN:-} ]]; then
    DELTAGRID_BIN=${CARGO_TARGET_DIR:-$BENCH_ROOT/target}/debug/deltagrid
    if [[ ! -x $DELTAGRID_BIN ]]; then
        say "building the debug binary: cargo build -p deltagrid"
        (cd "$BENCH_ROOT" && cargo build -p deltagrid) >&2
    fi
fi
[[ -x $DELTAGRID_BIN ]] || die "DELTAGRID_BIN=$DELTAGRID_BIN is not an executable file"
export DELTAGRID_BIN
plot_python
[[ -n $PY ]] || die "no python with matplotlib for the charts"
export PLOT_PYTHON=$PY

if [[ -n ${SMOKE_OUT:-} ]]; then
    mkdir -p "$SMOKE_OUT"
    ROOT_OUT=$(cd "$SMOKE_OUT" && pwd)
else
    ROOT_OUT=$(mktemp -d "${TMPDIR:-/tmp}/deltagrid-smoke.XXXXXX")
fi
echo "bench smoke: ${SCENARIOS[*]}"
echo "binary: $DELTAGRID_BIN; python: $PY; output: $ROOT_OUT"

failed=0
for s in "${SCENARIOS[@]}"; do
    out=$ROOT_OUT/$s log=$ROOT_OUT/$s.log t0=$SECONDS rc=0
    mkdir -p "$out"
    timeout --kill-after=10 "${SMOKE_TIMEOUT:-300}" \
        bash "$BENCH_ROOT/bench/$s.sh" --smoke --out "$out" >"$log" 2>&1 </dev/null || rc=$?
    problems=()
    if ((rc == 124)); then
        problems+=("timed out after ${SMOKE_TIMEOUT:-300} s")
    elif ((rc != 0)); then
        problems+=("exit code $rc")
    fi
    grep -q -- "${TABLE[$s]}" "$log" || problems+=("no table in its output")
    for f in ${FILES[$s]}; do
        [[ -s $out/$f ]] || problems+=("no $f")
    done
    note=""
    grep -q "NO NETWORK EMULATION" "$log" && note=" (loopback fallback: no network namespaces)"
    if ((${#problems[@]} == 0)); then
        printf 'ok      %-16s %4d s  %s%s\n' "$s" $((SECONDS - t0)) "${FILES[$s]}" "$note"
    else
        failed=$((failed + 1))
        printf 'FAILED  %-16s %4d s  %slog: %s\n' "$s" $((SECONDS - t0)) "$(printf '%s; ' "${problems[@]}")" "$log"
        tail -15 "$log" | sed 's/^/    /'
    fi
done

echo "bench smoke: $((${#SCENARIOS[@]} - failed)) of ${#SCENARIOS[@]} scenarios ok in $((SECONDS - START)) s"
if ((failed)); then
    echo "outputs and logs kept in $ROOT_OUT"
    exit 1
fi
[[ -n ${SMOKE_OUT:-} ]] || rm -rf "$ROOT_OUT"
