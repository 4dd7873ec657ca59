#!/usr/bin/env bash
# Single-client latency against a 3-node site, backups = 0 vs backups = 1
# with replication = "sync" (REFERENCE.md experiment 4: GigaSpaces measured
# +130% for synchronous replication; our target is under +80% at p50).
# Each site is three `deltagrid server` processes on loopback; the client
# talks to node 1 with keys under a hash tag node 1 owns, so every op is
# local to it (and, with backups = 1, waits for its backup's ack).
#
# Environment: OPS [20000], WARMUP [2000], RATE [0]; DELTAGRID_BIN /
# DELTAGRID_BUILD as in bench/common.sh. Loopback only.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
latency_settings
find_deltagrid || { say "deltagrid: $DG_STATUS"; exit 1; }

echo "Site latency, one client, one op in flight to node 1 of 3, $OPS ops after $WARMUP warm-up, rate $RATE ($STAMP)"
machine_line
echo
for backups in 0 1; do
    start_site "$backups"
    tag=$(local_tag "${SITE_PORTS[0]}")
    echo "## backups = $backups (replication = sync), keys under $tag"
    "$DG_BIN" bench latency --port "${SITE_PORTS[0]}" --ops "$OPS" --warmup "$WARMUP" --rate "$RATE" \
        --key-prefix "$tag:lat" --echo-floor "$([[ $backups == 0 ]] && echo true || echo false)" \
        --json "$OUT/site-latency-b$backups-$STAMP.json"
    echo
    bench_cleanup
    BENCH_PIDS=()
done
