#!/usr/bin/env bash
# Single-client latency against a 3-node site, backups = 0 vs backups = 1
# with replication = "sync" (issue 3's target: sync replication under +80%
# at p50; GigaSpaces measured +130%), for SET empty / HSET 8 fields / SET
# 100 B / GET 100 B, unthrottled: bench/latency.sh with a 3-node site and
# only the deltagrid targets.
#
# usage: bash bench/site_latency.sh [--out DIR] [--smoke]   (and any bench/latency.sh option)
# Writes <out>/site_latency.{json,csv,png}. Environment: as bench/latency.sh
# (RATE defaults to 0 here: unthrottled only).
set -euo pipefail
RATE=${RATE:-0} exec bash "$(dirname "${BASH_SOURCE[0]}")/latency.sh" --name site_latency --nodes 3 \
    --targets dg-b0,dg-b1 --workloads empty,hash8,bytes:100,get:100 "$@"
