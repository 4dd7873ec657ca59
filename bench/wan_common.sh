# Shared by the WAN benchmark scripts (wan_delta.sh, wan_load.sh); source
# after common.sh and netns.sh. Functions, no side effects on sourcing.

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
}
