# Shared by the WAN benchmark scripts (wan_delta.sh, wan_load.sh); source
# after common.sh and netns.sh. Functions, no side effects on sourcing.

# "A" or "A-B", for taskset -c.
cpu_range() {
    if (($1 == $2)); then echo "$1"; else echo "$1-$2"; fi
}

# "0-2,5" -> hex CPU mask "27" (for rps_cpus).
cpu_mask() {
    local mask=0 part a b
    for part in ${1//,/ }; do
        a=${part%-*} b=${part#*-}
        for ((c = a; c <= b; c++)); do mask=$((mask | (1 << c))); done
    done
    printf '%x' "$mask"
}

# Receive packet steering: the packets a veth end receives are processed
# on the given CPUs. Without it a veth hands each packet to the receiving
# stack on the sending CPU, and site 1 pays for site 2's TCP receive work
# and for the link's (separate machines and a real link would each do
# their own).
steer_receive() {
    local ns=$1 dev=$2 cpus=$3 q
    for q in $(ip netns exec "$ns" sh -c "ls -d /sys/class/net/$dev/queues/rx-*" 2>/dev/null); do
        ip netns exec "$ns" sh -c "echo $(cpu_mask "$cpus") > $q/rps_cpus" 2>/dev/null || return 1
    done
}

# Where the two sites run. As root, in two network namespaces joined by an
# emulated link (bench/netns.sh), removed again on exit; otherwise, or if
# they cannot be made, on loopback, and the output says so loudly. Sets
# WAN_NETNS_UP (0|1), and RUN: the benchmark command ($DG_BIN bench
# SCENARIO --out $OUT, --smoke when SMOKE=1) with its placement arguments,
# for the caller to add its own and run.
wan_placement() {
    local scenario=$1
    RUN=("$DG_BIN" bench "$scenario" --out "$OUT")
    ((SMOKE == 0)) || RUN+=(--smoke)
    WAN_NETNS_UP=0
    if [[ ${WAN_NETNS:-1} != 0 ]] && netns_setup; then
        WAN_NETNS_UP=1
        echo "link: $(netns_link)"
        # The publishers' TCP pacing is part of what site 1 pays per byte
        # (docs/benchmarks.md, WAN under load, session 24).
        echo "TCP congestion control in $NETNS1: $(ip netns exec "$NETNS1" sysctl -n net.ipv4.tcp_congestion_control 2>/dev/null || echo unknown)"
        if [[ ${NETNS_NO_DELAY:-0} == 1 ]]; then
            echo
            echo "*** NOTE: this kernel has no netem: the link is rate-limited ($WAN_RATE, tbf) but has NO added delay or jitter."
            echo
        fi
        RUN=(ip netns exec "$NETNS1" "${RUN[@]}"
             --site1-netns "$NETNS1" --site1-ip "$NETNS_IP1" --site2-netns "$NETNS2" --site2-ip "$NETNS_IP2"
             --link "$(netns_link)")
    else
        local why=${NETNS_WHY:-WAN_NETNS=0}
        echo
        echo "*** NO NETWORK EMULATION (loopback fallback): $why."
        echo "*** Both sites run on 127.0.0.1 with no delay, jitter or rate limit; WAN figures are loopback figures."
        echo
        RUN+=(--link "loopback, no emulation ($why)")
    fi
    # WAN_PIN_SITES=1: each site on its own CPUs, as two data centers are on
    # their own machines (site 1's nodes, its clients and the benchmark on
    # WAN_SITE1_CPUS, site 2's nodes and clients on WAN_SITE2_CPUS).
    if [[ ${WAN_PIN_SITES:-0} == 1 ]]; then
        local half=$(( $(nproc) / 2 ))
        if ((half < 1)) || ! command -v taskset >/dev/null; then
            echo "*** WAN_PIN_SITES=1 needs taskset and 2 CPUs or more: not pinned."
        else
            local c1=${WAN_SITE1_CPUS:-$(cpu_range 0 $((half - 1)))} c2=${WAN_SITE2_CPUS:-$(cpu_range $half $(($(nproc) - 1)))}
            echo "CPUs: site 1 (nodes, clients, benchmark) $c1; site 2 (nodes, clients) $c2"
            if ((WAN_NETNS_UP)); then
                # The link's work (bridge, shaping, its timers) for what
                # site 1 sends runs on site 2's CPUs and the other way
                # round (WAN_LINK_CPUS=sender: on the sender's, as when
                # each site's veth end was shaped).
                local l1=$c2 l2=$c1
                if [[ ${WAN_LINK_CPUS:-receiver} == sender ]]; then l1=$c1 l2=$c2; fi
                if steer_receive "$NETNS1" "$NETNS_VETH1" "$c1" && steer_receive "$NETNS2" "$NETNS_VETH2" "$c2" &&
                    steer_receive "$NETNS_LINK" "$NETNS_LINK1" "$l1" && steer_receive "$NETNS_LINK" "$NETNS_LINK2" "$l2"; then
                    echo "receive processing: $NETNS_VETH1 on CPUs $c1, $NETNS_VETH2 on CPUs $c2 (rps_cpus);" \
                        "the link: from site 1 on CPUs $l1, from site 2 on CPUs $l2"
                else
                    echo "*** could not set rps_cpus: each site's packets are received on the sender's CPU."
                fi
            fi
            RUN=(taskset -c "$c1" "${RUN[@]}" --site1-cpus "$c1" --site2-cpus "$c2")
        fi
    fi
}
