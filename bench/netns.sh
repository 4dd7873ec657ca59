# Two network namespaces joined by an emulated WAN link, for
# bench/wan_delta.sh and bench/wan_load.sh (sourced), or by hand (run):
#
#   bash bench/netns.sh up | down | status | rate RATE
#
#   ns_dg1 (veth_dg1 10.77.0.1/24) <--> ns_dgl: bridge br_dg, shaped ends <--> ns_dg2 (veth_dg2 10.77.0.2/24)
#                                       veth_dgl1 (towards site 1)
#                                       veth_dgl2 (towards site 2)
#
# The link is a namespace of its own, a bridge between the two sites'
# veth pairs, and its shaping sits on the bridge's two ports, each
# shaping what goes towards its site: `tc qdisc add dev ... root netem
# delay $WAN_DELAY $WAN_JITTER rate $WAN_RATE` (tc takes the jitter as the
# value after the delay, not as a `jitter` keyword), so a round trip
# crosses the delay twice and each direction is capped at the rate. On a
# kernel without netem, tbf caps the rate and there is no delay (see
# netns_shape). Being in its own namespace, the link's work (forwarding,
# shaping, its timers) can be steered off a sending site's CPUs
# (bench/wan_common.sh steers it to the receiving site's), as a real link
# costs the sending hosts nothing: shaped on a site's own veth end, the
# shaping's timers and softirqs ran on that site's CPU.
# Environment (defaults): WAN_DELAY [10ms], WAN_JITTER [1ms], WAN_RATE [200mbit].
# Needs root (ip netns, tc). Sourced: netns_setup removes the namespaces
# again when the script exits (trap on EXIT, added to any trap already set).

NETNS1=ns_dg1
NETNS2=ns_dg2
NETNS_LINK=ns_dgl
NETNS_VETH1=veth_dg1
NETNS_VETH2=veth_dg2
# The link's ends: towards site 1 and towards site 2.
NETNS_LINK1=veth_dgl1
NETNS_LINK2=veth_dgl2
NETNS_BRIDGE=br_dg
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
    printf '%s (%s) <-> bridge in %s <-> %s (%s), each direction: %s' \
        "$NETNS1" "$NETNS_IP1" "$NETNS_LINK" "$NETNS2" "$NETNS_IP2" "$NETNS_SHAPING"
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

# Removes the namespaces (their veth ends go with them). Safe to call twice.
netns_cleanup() {
    local ns
    for ns in "$NETNS1" "$NETNS2" "$NETNS_LINK"; do
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
        ip netns add "$NETNS_LINK" &&
        ip link add "$NETNS_VETH1" netns "$NETNS1" type veth peer name "$NETNS_LINK1" netns "$NETNS_LINK" &&
        ip link add "$NETNS_VETH2" netns "$NETNS2" type veth peer name "$NETNS_LINK2" netns "$NETNS_LINK" &&
        ip -n "$NETNS_LINK" link add "$NETNS_BRIDGE" type bridge &&
        ip -n "$NETNS_LINK" link set "$NETNS_LINK1" master "$NETNS_BRIDGE" &&
        ip -n "$NETNS_LINK" link set "$NETNS_LINK2" master "$NETNS_BRIDGE" &&
        ip -n "$NETNS1" addr add "$NETNS_IP1/24" dev "$NETNS_VETH1" &&
        ip -n "$NETNS2" addr add "$NETNS_IP2/24" dev "$NETNS_VETH2" &&
        ip -n "$NETNS1" link set lo up &&
        ip -n "$NETNS2" link set lo up &&
        ip -n "$NETNS_LINK" link set "$NETNS_BRIDGE" up &&
        ip -n "$NETNS_LINK" link set "$NETNS_LINK1" up &&
        ip -n "$NETNS_LINK" link set "$NETNS_LINK2" up &&
        ip -n "$NETNS1" link set "$NETNS_VETH1" up &&
        ip -n "$NETNS2" link set "$NETNS_VETH2" up
    } 2>&1 ); then
        NETNS_WHY="setting up the namespaces failed: $(printf '%s\n' "$out" | grep -m1 .)"
        netns_cleanup
        return 1
    fi
    netns_shape "$NETNS_LINK" "$NETNS_LINK2" && netns_shape "$NETNS_LINK" "$NETNS_LINK1" || { netns_cleanup; return 1; }
    netns_say "network namespaces up: $(netns_link)"
}

# netns_rate RATE: changes the rate of both ends' shaping (netem or tbf,
# whichever netns_shape put there), keeping the rest.
netns_rate() {
    local rate=$1 ns dev ns_dev
    for ns_dev in "$NETNS_LINK:$NETNS_LINK1" "$NETNS_LINK:$NETNS_LINK2"; do
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
    for ns in "$NETNS1" "$NETNS2" "$NETNS_LINK"; do
        echo "== $ns"
        ip -n "$ns" -br addr 2>&1
        ip netns exec "$ns" tc qdisc show 2>&1 | grep -E "netem|tbf" || true
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
