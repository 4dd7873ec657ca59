#!/usr/bin/env bash
# Reverse delta restore (REFERENCE.md experiment 3, WAL-G): base + 5
# incremental backups of one node, restored base-first vs newest-first, plus
# a single full backup of the final data; per-layer times, tables, and
# docs/bench/restore.{json,png}. Loopback and a local directory only.
#
#   bash bench/restore.sh                      (200,000 keys x 1000 B)
#   bash bench/restore.sh --keys 500000 --rounds 0.9,0.5,0.3,0.2,0.6
#   bash bench/restore.sh --smoke --out /tmp/x (5,000 keys; checks the harness)
# Environment: DELTAGRID_BIN / DELTAGRID_BUILD / CARGO_TARGET_DIR as in
# bench/wan_common.sh; PLOT_PYTHON: a python with redis and matplotlib.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
source "$(dirname "${BASH_SOURCE[0]}")/wan_common.sh"

wan_args "$@"
wan_binary
wan_plot_python
[[ -n $PY ]] || { say "error: no python with matplotlib"; exit 1; }
"$PY" -c 'import redis' 2>/dev/null || "$PY" -m pip install -q redis
"$PY" "$BENCH_ROOT/bench/restore.py" --bin "$DG_BIN" --out "$OUT" "${ARGS[@]}"
