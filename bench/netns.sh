# Two network namespaces joined by an emulated WAN link, for
# bench/wan_delta.sh (sourced), or by hand (run):
#
#   bash bench/netns.sh up | down | status | rate RATE
#
#   ns_dg1 (veth_dg1 10.77.0.1/24) <----veth----> ns_dg2 (veth_dg2 10.77.0.2/24)
#
# Loopback is up in each; both ends get `tc qdisc add dev ... root netem
# delay $WAN_DELAY $WAN_JITTER rate $WAN_RATE` (tc takes the jitter as the
# value after the delay, not as a `jitter` keyword), so a round trip
# crosses the delay twice and each direction is capped at the rate. On a
# kernel without netem, tbf caps the rate and there is no delay (see
# netns_shape).
# Environment (defaults): WAN_DELAY [10ms], WAN_JITTER [1ms], WAN_RATE [200mbit].
# Needs root (ip netns, tc). Sourced: netns_setup removes the namespaces
# again when the script exits (trap on EXIT, added to any trap already set).

NETNS1=ns_dg1
NETNS2=ns_dg2
NETNS_VETH1=veth_dg1
NETNS_VETH2=veth_dg2
NETNS_IP1=10.77.0.1
NETNS_IP2=10.77.0.2
WAN_DELAY=${WAN_DELAY:-10ms}
WAN_JITTER=${WAN_JITTER:-1ms}
WAN_RATE=${WAN_RATE:-200mbit}

netns_say() { printf '%s\n' "$*" >&2; }

# What netns_shape put on each end (set by it).
NETNS_SHAPING="none"

# The link as one line, for reports.
netns_link() {
    printf 'veth pair %s (%s) <-> %s (%s), on both ends: %s' \
        "$NETNS1" "$NETNS_IP1" "$NETNS2" "$NETNS_IP2" "$NETNS_SHAPING"
}

# netns_shape NS DEV: netem delay + jitter + rate on DEV's egress. Kernels
# built without sch_netem ("Specified qdisc kind is unknown") get tbf at
# the same rate instead, and NO delay or jitter: NETNS_SHAPING says which,
# and NETNS_NO_DELAY=1 is set so callers can say so loudly.
netns_shape() {
    local ns=$1 dev=$2 out
    if out=$(ip netns exec "$ns" tc qdisc add dev "$dev" root netem \
            delay "$WAN_DELAY" "$WAN_JITTER" rate "$WAN_RATE" 2>&1); then
        NETNS_SHAPING="tc netem delay $WAN_DELAY jitter $WAN_JITTER rate $WAN_RATE"
        return 0
    fi
    if [[ $out != *"qdisc kind is unknown"* ]]; then
        NETNS_WHY="tc netem on $ns/$dev failed: $out"
        return 1
    fi
    # burst: at least one 64 KB GSO packet and rate/HZ; latency bounds the queue.
    if ! out=$(ip netns exec "$ns" tc qdisc add dev "$dev" root tbf \
            rate "$WAN_RATE" burst 256kb latency 50ms 2>&1); then
        NETNS_WHY="this kernel has no netem, and tc tbf on $ns/$dev failed too: $out"
        return 1
    fi
    NETNS_NO_DELAY=1
    NETNS_SHAPING="tc tbf rate $WAN_RATE burst 256kb latency 50ms (NO delay/jitter: kernel $(uname -r) has no sch_netem; asked for delay $WAN_DELAY jitter $WAN_JITTER)"
}

# Whether this shell can create namespaces at all (root, ip, tc).
netns_possible() {
    [[ $(id -u) == 0 ]] || { NETNS_WHY="not root (uid $(id -u))"; return 1; }
    command -v ip >/dev/null || { NETNS_WHY="no 'ip' command (apt-get install -y iproute2)"; return 1; }
    command -v tc >/dev/null || { NETNS_WHY="no 'tc' command (apt-get install -y iproute2)"; return 1; }
}

# Removes both namespaces (their veth ends go with them). Safe to call twice.
netns_cleanup() {
    local ns
    for ns in "$NETNS1" "$NETNS2"; do
        if ip netns list 2>/dev/null | grep -qw "^$ns"; then
            ip netns del "$ns" && netns_say "removed network namespace $ns"
        fi
    done
}

netns_add_exit_trap() {
    local prev
    prev=$(trap -p EXIT | sed -n "s/^trap -- '\(.*\)' EXIT$/\1/p")
    # shellcheck disable=SC2064  # expand $prev now
    trap "netns_cleanup; ${prev:-:}" EXIT
}

# Creates both namespaces and the link, removed again when the script
# exits; returns non-zero (after removing whatever it made) if any step
# fails, with the reason in NETNS_WHY.
netns_setup() {
    netns_possible || return 1
    netns_add_exit_trap
    netns_create
}

# netns_setup without the trap (bash bench/netns.sh up).
netns_create() {
    netns_cleanup  # leftovers of an earlier run that did not get to clean up
    local out
    # (set -e does not apply inside an `if` condition: hence the && chain.)
    if ! out=$( {
        ip netns add "$NETNS1" &&
        ip netns add "$NETNS2" &&
        ip link add "$NETNS_VETH1" netns "$NETNS1" type veth peer name "$NETNS_VETH2" netns "$NETNS2" &&
        ip -n "$NETNS1" addr add "$NETNS_IP1/24" dev "$NETNS_VETH1" &&
        ip -n "$NETNS2" addr add "$NETNS_IP2/24" dev "$NETNS_VETH2" &&
        ip -n "$NETNS1" link set lo up &&
        ip -n "$NETNS2" link set lo up &&
        ip -n "$NETNS1" link set "$NETNS_VETH1" up &&
        ip -n "$NETNS2" link set "$NETNS_VETH2" up
    } 2>&1 ); then
        NETNS_WHY="setting up the namespaces failed: $(printf '%s\n' "$out" | grep -m1 .)"
        netns_cleanup
        return 1
    fi
    netns_shape "$NETNS1" "$NETNS_VETH1" && netns_shape "$NETNS2" "$NETNS_VETH2" || { netns_cleanup; return 1; }
    netns_say "network namespaces up: $(netns_link)"
}

# netns_rate RATE: changes the rate of both ends' shaping (netem or tbf,
# whichever netns_shape put there), keeping the rest.
netns_rate() {
    local rate=$1 ns dev ns_dev
    for ns_dev in "$NETNS1:$NETNS_VETH1" "$NETNS2:$NETNS_VETH2"; do
        ns=${ns_dev%%:*} dev=${ns_dev#*:}
        if ip netns exec "$ns" tc qdisc show dev "$dev" | grep -q netem; then
            ip netns exec "$ns" tc qdisc change dev "$dev" root netem delay "$WAN_DELAY" "$WAN_JITTER" rate "$rate"
        else
            ip netns exec "$ns" tc qdisc change dev "$dev" root tbf rate "$rate" burst 256kb latency 50ms
        fi
    done
}

netns_status() {
    local ns
    for ns in "$NETNS1" "$NETNS2"; do
        echo "== $ns"
        ip -n "$ns" -br addr 2>&1
        ip netns exec "$ns" tc qdisc show 2>&1 | grep -E "netem|tbf"
    done
    if command -v ping >/dev/null; then
        ip netns exec "$NETNS1" ping -c 3 -q "$NETNS_IP2" 2>&1 | tail -1
    fi
}

if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
    set -euo pipefail
    case ${1:-} in
        up) { netns_possible && netns_create; } || { netns_say "error: $NETNS_WHY"; exit 1; } ;;
        down) netns_cleanup ;;
        status) netns_status ;;
        rate) [[ -n ${2:-} ]] || { netns_say "usage: bash bench/netns.sh rate RATE"; exit 2; }; netns_rate "$2" ;;
        *) netns_say "usage: bash bench/netns.sh up|down|status|rate RATE"; exit 2 ;;
    esac
fi
