#!/usr/bin/env bash
# Runs every fuzz target (the proptest harnesses in crates/*/tests/fuzz.rs,
# see docs/fuzzing.md) for FUZZ_SECONDS each, one after another (one core;
# the build uses what it can), in release, and prints a summary table:
# target, cases run, seconds, result.
#
#   FUZZ_SECONDS=600 bash bench/fuzz.sh              # the long run (10 min a target)
#   FUZZ_SECONDS=5 bash bench/fuzz.sh resp wan       # some crates only
#
# Knobs:
#   FUZZ_SECONDS=N    seconds per target (default 60)
#   FUZZ_CASES=N      cases per batch (default 2000; a batch is the unit a
#                     failure is shrunk and replayed in)
#   FUZZ_TARGETS="crate::test ..."  only these targets (default: all below)
#   CARGO_TARGET_DIR  as usual (default: target)
#   FUZZ_LOG_DIR      where each target's output goes (default: a temp dir)
# Exits non-zero when a target fails; its log holds the shrunk input (hex)
# and the seed to replay it (FUZZ_SEED=... FUZZ_CASES=...).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

FUZZ_SECONDS="${FUZZ_SECONDS:-60}"
export FUZZ_SECONDS
LOG_DIR="${FUZZ_LOG_DIR:-$(mktemp -d -t deltagrid-fuzz.XXXXXX)}"
mkdir -p "$LOG_DIR"

# crate::test, in priority order (peer-facing decoders first).
ALL_TARGETS=(
    resp::request_decoder
    resp::reply_decoder
    resp::request_round_trip
    resp::reply_round_trip
    cluster::data_link_decoder
    cluster::metadata_rpc_decoder
    cluster::data_link_round_trip
    cluster::metadata_rpc_round_trip
    wan::wan_wire_decoder
    wan::wan_wire_round_trip
    wan::settled_marks_round_trip
    framing::frame_and_payload_decoder
    framing::payload_round_trip
    journal::record_decoder
    journal::record_round_trip
    journal::segment_open
    persist::record_decoder
    persist::record_round_trip
    persist::snapshot_reader
    persist::snapshot_round_trip
    backup::chunk_block_decoder
    backup::index_decoder
    backup::resolved_decoder
    backup::key_list_and_envelope
    backup::manifest_json
    backup::chunk_round_trip
    backup::index_round_trip
    backup::resolved_round_trip
    keyspace::change_codec
    keyspace::change_round_trip
    commands::restore_payload_decoder
    commands::restore_round_trip
    commands::function_payload_round_trip
    acl::acl_file_parser
    acl::acl_setuser_rules
)

if [[ -n "${FUZZ_TARGETS:-}" ]]; then
    read -r -a TARGETS <<<"$FUZZ_TARGETS"
elif [[ $# -gt 0 ]]; then
    TARGETS=()
    for t in "${ALL_TARGETS[@]}"; do
        for c in "$@"; do
            [[ "${t%%::*}" == "$c" ]] && TARGETS+=("$t")
        done
    done
else
    TARGETS=("${ALL_TARGETS[@]}")
fi

crates=()
for t in "${TARGETS[@]}"; do
    c="${t%%::*}"
    [[ " ${crates[*]-} " == *" $c "* ]] || crates+=("$c")
done

echo "== building the fuzz targets (release): ${crates[*]}"
pkgs=()
for c in "${crates[@]}"; do pkgs+=(-p "$c"); done
cargo test --release --locked "${pkgs[@]}" --test fuzz --no-run 2>"$LOG_DIR/build.log" || {
    tail -30 "$LOG_DIR/build.log"
    exit 1
}

# The test binary of each crate, from cargo's JSON messages.
declare -A EXE
while IFS=$'\t' read -r name exe; do
    EXE[$name]=$exe
done < <(cargo test --release --locked "${pkgs[@]}" --test fuzz --no-run --message-format=json 2>/dev/null |
    python3 -c '
import json, sys
for line in sys.stdin:
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] == "fuzz":
        pkg = m["package_id"]
        # "path+file:///.../crates/resp#0.1.0" or "resp 0.1.0 (path+file://...)"
        name = pkg.split("#")[0].rstrip("/").split("/")[-1] if "#" in pkg else pkg.split()[0]
        print(name + "\t" + m["executable"])
')

failed=0
rows=()
echo "== running ${#TARGETS[@]} targets, ${FUZZ_SECONDS}s each (logs: $LOG_DIR)"
for t in "${TARGETS[@]}"; do
    c="${t%%::*}"
    test="${t##*::}"
    exe="${EXE[$c]:-}"
    log="$LOG_DIR/$c-$test.log"
    if [[ -z "$exe" ]]; then
        rows+=("$t|-|-|no test binary")
        failed=1
        continue
    fi
    start=$SECONDS
    if (cd "crates/$c" && "$exe" --exact "$test" --nocapture --test-threads=1) >"$log" 2>&1; then
        result=ok
    else
        result="FAILED (see $log)"
        failed=1
    fi
    line=$(grep -m1 -oE 'fuzz .*: [0-9]+ cases in [0-9.]+s' "$log" || true)
    cases=$(sed -E 's/.*: ([0-9]+) cases in.*/\1/' <<<"$line")
    secs=$((SECONDS - start))
    grep -q "ignored" "$log" && grep -q "1 ignored" "$log" && result="ignored (known bug)"
    rows+=("$t|${cases:--}|$secs|$result")
    echo "   $t: ${cases:--} cases, ${secs}s, $result"
done

echo
printf '| %-42s | %12s | %7s | %s\n' target cases seconds result
printf '|%s|%s|%s|%s\n' "$(printf -- '-%.0s' {1..44})" "$(printf -- '-%.0s' {1..14})" "$(printf -- '-%.0s' {1..9})" "--------"
for r in "${rows[@]}"; do
    IFS='|' read -r t n s res <<<"$r"
    printf '| %-42s | %12s | %7s | %s\n' "$t" "$n" "$s" "$res"
done
exit $failed
