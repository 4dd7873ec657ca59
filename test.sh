#!/usr/bin/env bash
# Runs every deltagrid test on a fresh Debian machine:
#   1. installs what is missing (redis-server/redis-cli/redis-benchmark, iproute2,
#      Python venv + tests/python/requirements.txt, and a Rust toolchain if absent)
#   2. cargo build --workspace --locked --features deltagrid/s3   (debug)
#   3. cargo test --workspace --locked --features deltagrid/s3, then
#      cargo fmt --check, cargo clippy -D warnings and cargo doc -D warnings
#   4. python -m pytest tests/python -q -n 2 (black-box, against target/debug/deltagrid;
#      two pytest-xdist workers, a file per worker at a time, ports apart)
#   5. bash tests/redis-suite/run.sh         (Redis 7.0.15's own Tcl units against the node
#      and against redis-server; table of what deltagrid passes, docs/redis-suite.md)
#   6. bash bench/smoke.sh                   (every benchmark scenario for a few
#      seconds against the same binary: tables, CSV/JSON and charts are made)
# Exits non-zero on any failure.
#
# Knobs:
#   SKIP_CARGO=1            skip steps 2-3 (and the Rust install); for local iteration
#   DELTAGRID_BIN=path      server binary for pytest (default: <target dir>/debug/deltagrid)
#   DELTAGRID_TEST_TARGET=redis   run the black-box tests against redis-server instead
#   PYTHON=path             use this interpreter instead of ./.venv
#   PYTEST_TIMEOUT=secs     hard limit for the pytest step (default 1800)
#   PYTEST_WORKERS=N        pytest-xdist workers (default 2; 0 runs the tests in this process)
#   SKIP_REDIS_SUITE=1      skip step 5
#   REDIS_SUITE_MIN_PERCENT=N     fail step 5 below N% of what Redis passes (default 92: the
#                           level reached, 95.1% with lists, less some margin for tests that vary
#                           between runs; issue 38 asks for 85)
#   REDIS_SUITE_UNIT_MIN="unit=N ..."  per-unit gates (default: 90% for each data-type unit
#                           of issue 39: set, zset, incr, bitops, hyperloglog; 88% for
#                           scripting and functions)
#   SKIP_BENCH_SMOKE=1      skip step 6
#   extra arguments are passed to pytest, e.g. ./test.sh -k tracking -x
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$ROOT"

SKIP_CARGO="${SKIP_CARGO:-0}"
START=$SECONDS

section() {
    printf '\n==== %s ====\n' "$*"
}

die() {
    printf 'test.sh: %s\n' "$*" >&2
    exit 1
}

# shellcheck source=tests/shell.sh
. "$ROOT/tests/shell.sh"

# ---------------------------------------------------------------------------
section "Dependencies"

APT_PKGS=()
command -v redis-server >/dev/null 2>&1 || APT_PKGS+=(redis-server)
if ! command -v redis-cli >/dev/null 2>&1 || ! command -v redis-benchmark >/dev/null 2>&1; then
    APT_PKGS+=(redis-tools)
fi
command -v python3 >/dev/null 2>&1 || APT_PKGS+=(python3)
# ip (network namespaces, veth, bridges) for tests/python/test_partition.py
command -v ip >/dev/null 2>&1 || APT_PKGS+=(iproute2)
# openssl makes the certificates of tests/python/test_tls.py
command -v openssl >/dev/null 2>&1 || APT_PKGS+=(openssl)
if [ -z "${PYTHON:-}" ] && [ ! -x .venv/bin/python ]; then
    # Debian splits venv/ensurepip out of python3
    if ! command -v python3 >/dev/null 2>&1 || ! python3 -c 'import ensurepip, venv' >/dev/null 2>&1; then
        APT_PKGS+=(python3-venv)
    fi
fi
NEED_RUSTUP=0
if [ "$SKIP_CARGO" != "1" ]; then
    if ! command -v cargo >/dev/null 2>&1 && [ -x "$HOME/.cargo/bin/cargo" ]; then
        export PATH="$HOME/.cargo/bin:$PATH"
    fi
    if ! command -v cargo >/dev/null 2>&1; then
        NEED_RUSTUP=1
        command -v curl >/dev/null 2>&1 || APT_PKGS+=(curl ca-certificates)
    fi
    command -v cc >/dev/null 2>&1 || APT_PKGS+=(gcc libc6-dev)
fi

if [ "${#APT_PKGS[@]}" -gt 0 ]; then
    echo "installing with apt-get: ${APT_PKGS[*]}"
    export DEBIAN_FRONTEND=noninteractive
    as_root apt-get update
    as_root apt-get install -y --no-install-recommends "${APT_PKGS[@]}"
else
    echo "system packages: all present"
fi

if [ "$NEED_RUSTUP" = "1" ]; then
    echo "installing a Rust toolchain with rustup"
    curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs | sh -s -- -y --profile minimal
    export PATH="$HOME/.cargo/bin:$PATH"
fi

for tool in redis-server redis-cli redis-benchmark; do
    command -v "$tool" >/dev/null 2>&1 || die "$tool still missing after install"
done
redis-server --version

# The Debian package may have started a redis-server on 6379. The tests bind
# only free ephemeral loopback ports, so it cannot collide with them; leave it.
if (exec 3<>/dev/tcp/127.0.0.1/6379) 2>/dev/null; then
    echo "note: something listens on 127.0.0.1:6379 (probably the packaged redis-server);" \
         "no conflict: the tests use free ephemeral ports"
fi

if [ -n "${PYTHON:-}" ]; then
    PY="$PYTHON"
else
    if [ ! -x .venv/bin/python ] || ! .venv/bin/python -c 'import sys' >/dev/null 2>&1; then
        rm -rf .venv
        python3 -m venv .venv
    fi
    PY="$ROOT/.venv/bin/python"
fi
"$PY" -m pip install -q --disable-pip-version-check -r tests/python/requirements.txt
"$PY" -c 'import redis, pytest, prometheus_client; print("python", __import__("sys").version.split()[0], "| redis-py", redis.__version__, "| pytest", pytest.__version__)'

# ---------------------------------------------------------------------------
TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"
if [ "$SKIP_CARGO" = "1" ]; then
    section "cargo build / cargo test: skipped (SKIP_CARGO=1)"
else
    # Habits that enforce themselves: formatting, clippy and rustdoc warnings fail.
    section "cargo fmt --check"
    cargo fmt --all --check || die "cargo fmt --check: run 'cargo fmt' and commit"

    # The s3 feature lets test_backup.py run against an S3 endpoint (moto).
    section "cargo build --workspace --locked --features deltagrid/s3"
    cargo --version
    cargo build --workspace --locked --features deltagrid/s3

    section "cargo test --workspace --locked --features deltagrid/s3"
    cargo test --workspace --locked --features deltagrid/s3

    section "cargo clippy --workspace --all-targets -- -D warnings"
    cargo clippy --workspace --all-targets --locked --features deltagrid/s3 -- -D warnings

    section "cargo doc --no-deps (RUSTDOCFLAGS=-D warnings)"
    RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --locked --document-private-items
    export DELTAGRID_REQUIRE_S3=1
fi

# ---------------------------------------------------------------------------
section "pytest tests/python"
export DELTAGRID_BIN="${DELTAGRID_BIN:-$TARGET_DIR/debug/deltagrid}"
if [ "${DELTAGRID_TEST_TARGET:-deltagrid}" = "redis" ]; then
    echo "target: redis-server ($(command -v redis-server))"
else
    [ -x "$DELTAGRID_BIN" ] || die "server binary $DELTAGRID_BIN not found (build it, or unset SKIP_CARGO)"
    echo "target: $DELTAGRID_BIN"
fi
# Most tests wait on servers rather than compute: two workers halve the
# step. A file runs on one worker (test_partition's namespaces are shared
# by its tests); tests/python/ports.py gives each worker its own ports.
timeout --kill-after=30 "${PYTEST_TIMEOUT:-1800}" \
    "$PY" -m pytest tests/python -q -p no:cacheprovider -n "${PYTEST_WORKERS:-2}" --dist loadfile "$@"

# ---------------------------------------------------------------------------
if [ "${SKIP_REDIS_SUITE:-0}" = "1" ]; then
    section "tests/redis-suite/run.sh: skipped (SKIP_REDIS_SUITE=1)"
elif [ "${DELTAGRID_TEST_TARGET:-deltagrid}" = "redis" ]; then
    section "tests/redis-suite/run.sh: skipped (DELTAGRID_TEST_TARGET=redis)"
else
    section "tests/redis-suite/run.sh (Redis 7.0.15's Tcl units: deltagrid vs redis-server)"
    REDIS_SUITE_MIN_PERCENT="${REDIS_SUITE_MIN_PERCENT:-92}" \
    REDIS_SUITE_UNIT_MIN="${REDIS_SUITE_UNIT_MIN:-unit/type/set=90 unit/type/zset=90 unit/type/incr=90 unit/bitops=90 unit/hyperloglog=90 unit/scripting=88 unit/functions=88}" \
        bash tests/redis-suite/run.sh
fi

# ---------------------------------------------------------------------------
if [ "${SKIP_BENCH_SMOKE:-0}" = "1" ]; then
    section "bench/smoke.sh: skipped (SKIP_BENCH_SMOKE=1)"
elif [ "${DELTAGRID_TEST_TARGET:-deltagrid}" = "redis" ]; then
    section "bench/smoke.sh: skipped (DELTAGRID_TEST_TARGET=redis)"
else
    section "bench/smoke.sh (every benchmark scenario, a few seconds each)"
    bash bench/smoke.sh
fi

section "All tests passed ($((SECONDS - START)) s)"
