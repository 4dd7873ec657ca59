#!/usr/bin/env bash
# Reverse delta restore (docs/benchmarks.md experiment 3, WAL-G): base + 5
# incremental backups of one node, restored base-first vs newest-first, plus
# a single full backup of the final data; per-layer times, tables, and
# restore.json / restore.png in --out. Loopback and a local directory only.
#
#   bash bench/restore.sh                        (200,000 keys x 1000 B)
#   bash bench/restore.sh --keys 500000 --rounds 0.9,0.5,0.3,0.2,0.6
#   bash bench/restore.sh --smoke                (5,000 keys; checks the harness)
# Environment: see bench/common.sh (DELTAGRID_BIN, DELTAGRID_BUILD, PLOT_PYTHON).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

bench_args "$@"
need_deltagrid
plot_python
[[ -n $PY ]] || die "no python with matplotlib for the charts"
"$PY" -c 'import redis' 2>/dev/null || "$PY" -m pip install -q redis
echo "Reverse delta restore (WAL-G experiment, docs/benchmarks.md experiment 3), $(date -u +%Y-%m-%dT%H%M%SZ)$( ((SMOKE)) && echo ', smoke run')"
machine_line
echo
smoke=()
((SMOKE == 0)) || smoke=(--smoke)
"$PY" "$BENCH_ROOT/bench/restore.py" --bin "$DG_BIN" --out "$OUT" "${smoke[@]}" "${ARGS[@]}"
