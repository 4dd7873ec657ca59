# Shell helpers test.sh and tests/redis-suite/run.sh share; source it after
# defining `die MESSAGE`.

# Runs its arguments as root: directly, through sudo, or dies saying why.
as_root() {
    if [ "$(id -u)" -eq 0 ]; then
        "$@"
    elif command -v sudo >/dev/null 2>&1; then
        sudo "$@"
    else
        die "need root (or sudo) to run: $*"
    fi
}
