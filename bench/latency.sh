#!/usr/bin/env bash
# Single-client latency (REFERENCE.md experiment 4, GigaSpaces' method):
# one client, one op in flight, warm-up, then percentiles and the average
# of the best 80%, for deltagrid and Redis 7 started side by side in the
# same run, with the loopback TCP echo round trip of the same request as
# the floor. Prints both tables; writes JSON next to the throughput CSVs.
#
# Environment: OPS [20000], WARMUP [2000], RATE [0 = unthrottled; e.g.
# RATE=2000 for a throttled run], plus DELTAGRID_BIN / DELTAGRID_BUILD /
# REDIS_SERVER (see bench/common.sh). Loopback only.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

latency_settings

bench_start_servers
((DG_UP == 1)) || { say "deltagrid is required for this benchmark: $DG_STATUS"; exit 1; }

echo "Latency, one client, one op in flight, $OPS ops after $WARMUP warm-up, rate ${RATE} ops/s (0 = unthrottled), $STAMP"
machine_line
echo
echo "## deltagrid (127.0.0.1:$DG_PORT)"
"$DG_BIN" bench latency --port "$DG_PORT" --ops "$OPS" --warmup "$WARMUP" --rate "$RATE" \
    --json "$OUT/latency-deltagrid-$STAMP.json"
echo
echo "## Redis $REDIS_VERSION (127.0.0.1:$REDIS_PORT), same client"
"$DG_BIN" bench latency --port "$REDIS_PORT" --ops "$OPS" --warmup "$WARMUP" --rate "$RATE" \
    --echo-floor false --json "$OUT/latency-redis-$STAMP.json"
