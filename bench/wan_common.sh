# Shared by the WAN benchmark scripts (wan_delta.sh, wan_load.sh); source
# after common.sh. Functions, no side effects on sourcing.

# Sets DG_BIN: $DELTAGRID_BIN, or the release binary under $CARGO_TARGET_DIR
# (default target/), built first unless DELTAGRID_BUILD=0. Exits on failure.
wan_binary() {
    if [[ -n ${DELTAGRID_BIN:-} ]]; then
        DG_BIN=$DELTAGRID_BIN
    else
        DG_BIN=${CARGO_TARGET_DIR:-$BENCH_ROOT/target}/release/deltagrid
        if [[ ${DELTAGRID_BUILD:-1} != 0 ]]; then
            say "building deltagrid: cargo build --release -p deltagrid (log: $BENCH_WORK/build.log)"
            if ! (cd "$BENCH_ROOT" && cargo build --release -p deltagrid) >"$BENCH_WORK/build.log" 2>&1; then
                say "error: cargo build --release -p deltagrid failed: $(grep -m1 '^error' "$BENCH_WORK/build.log")"
                exit 1
            fi
        fi
    fi
    [[ -x $DG_BIN ]] || { say "error: $DG_BIN is not an executable file (DELTAGRID_BUILD=${DELTAGRID_BUILD:-1})"; exit 1; }
}

# Splits the script's arguments: sets OUT (--out, made absolute because the
# benchmark runs in another namespace's shell; default docs/bench) and the
# array ARGS with everything else.
wan_args() {
    OUT=$BENCH_ROOT/docs/bench
    ARGS=()
    while (($#)); do
        case $1 in
            --out) OUT=${2:?--out needs a directory}; shift 2 ;;
            --out=*) OUT=${1#--out=}; shift ;;
            *) ARGS+=("$1"); shift ;;
        esac
    done
    mkdir -p "$OUT"
    OUT=$(cd "$OUT" && pwd)
}

# Sets PY to a python with matplotlib ($PLOT_PYTHON, bench/.venv,
# tests/python/.venv, or a new bench/.venv); empty when none can be had.
wan_plot_python() {
    PY=${PLOT_PYTHON:-}
    if [[ -z $PY ]]; then
        for cand in "$BENCH_ROOT/bench/.venv/bin/python" "$BENCH_ROOT/tests/python/.venv/bin/python"; do
            if [[ -x $cand ]] && "$cand" -c 'import matplotlib' 2>/dev/null; then PY=$cand; break; fi
        done
    fi
    if [[ -z $PY ]]; then
        say "no python with matplotlib: creating $BENCH_ROOT/bench/.venv"
        python3 -m venv "$BENCH_ROOT/bench/.venv" && "$BENCH_ROOT/bench/.venv/bin/pip" install -q matplotlib \
            && PY=$BENCH_ROOT/bench/.venv/bin/python
    fi
}
