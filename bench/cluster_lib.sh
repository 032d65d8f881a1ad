# cluster_lib.sh — the emulated cluster that bench/cluster.sh,
# bench/cluster_train.sh and bench/costmodel.sh share; sourced, not run:
#
#   HOSTS=4 RATE=1gbit OUT=build/bench/x . bench/cluster_lib.sh
#   cl_up                                   # build it (torn down on exit)
#   cl_run FILE H R CMD...                  # CMD as H hosts x R ranks
#   cl_mpirun FILE H R CMD...               # the same under mpirun
#
# HOSTS network namespaces (ddpc-cl<i>), each with one veth to a bridge
# (ddpc-clbr, itself 198.18.0.254) at 198.18.0.<i+1>/24 (the range reserved for network
# benchmarking). Every link is shaped in both directions with tc tbf to
# RATE (none: not shaped): egress of the host on its own end, ingress on the bridge's end.
# (Rate only: this kernel has no netem, so no added delay.) Each namespace
# is a host to ddpc (its host id includes the network namespace), so ranks
# of one host share memory and ranks of two talk TCP over the shaped links.
# Everything is torn down on exit, whatever happens; without root cl_up says
# so and exits 0. Its functions' variables all start with cl_ (sh has no
# locals), so they leave the caller's alone. Rank 0's output goes to FILE, rank r's to FILE.rank<r>
# (removed when every rank succeeded; on a failure all are printed and the
# script exits 1).

HOSTS=${HOSTS:-2}
RATE=${RATE:-1gbit}
BIN=${DDPC_BIN:-build/bin}
TIMEOUT=${TIMEOUT:-600}
PORT=${PORT:-29731}
CL_BR=ddpc-clbr

cl_down() {
    cl_i=0
    while [ $cl_i -lt "$HOSTS" ]; do
        ip netns pids "ddpc-cl$cl_i" 2>/dev/null | xargs -r kill -9 2>/dev/null || true
        ip netns del "ddpc-cl$cl_i" 2>/dev/null || true
        ip link del "ddpc-clv$cl_i" 2>/dev/null || true
        cl_i=$((cl_i + 1))
    done
    ip link del "$CL_BR" 2>/dev/null || true
}

# tbf on dev (in namespace ns, or the root one when ns is empty): RATE, a
# burst of 256 KiB and room for 20 ms of queue; RATE=none leaves the veth
# unshaped (as fast as the kernel moves it).
cl_shape() {
    cl_ns=$1 cl_dev=$2
    [ "$RATE" = none ] && return 0
    cl_cmd="tc qdisc add dev $cl_dev root tbf rate $RATE burst 256kb latency 20ms"
    if [ -n "$cl_ns" ]; then ip netns exec "$cl_ns" $cl_cmd; else $cl_cmd; fi
}

cl_up() {
    if [ "$(id -u)" != 0 ]; then
        echo "$(basename "$0"): skipped: needs root (network namespaces, a bridge, tc)"
        exit 0
    fi
    trap cl_down EXIT
    trap 'exit 130' INT TERM HUP
    cl_down
    ip link add "$CL_BR" type bridge
    ip addr add 198.18.0.254/24 dev "$CL_BR"
    ip link set "$CL_BR" up
    cl_i=0
    while [ $cl_i -lt "$HOSTS" ]; do
        cl_ns=ddpc-cl$cl_i
        ip netns add "$cl_ns"
        ip link add "ddpc-clv$cl_i" type veth peer name eth0 netns "$cl_ns"
        ip link set "ddpc-clv$cl_i" master "$CL_BR" up
        ip netns exec "$cl_ns" ip addr add "198.18.0.$((cl_i + 1))/24" dev eth0
        ip netns exec "$cl_ns" ip link set eth0 up
        ip netns exec "$cl_ns" ip link set lo up
        cl_shape "$cl_ns" eth0
        cl_shape "" "ddpc-clv$cl_i"
        cl_i=$((cl_i + 1))
    done
    echo "$(basename "$0"): $HOSTS hosts, links $RATE each way (tbf)" >&2
}

# Waits for pids; on a failure prints file* and exits 1 (with CL_SOFT=1:
# says so, renames file to file.failed and returns 1).
cl_wait() {
    cl_file=$1
    shift
    cl_fail=0
    for cl_pid in "$@"; do wait "$cl_pid" || cl_fail=1; done
    if [ $cl_fail != 0 ]; then
        echo "$(basename "$0"): failed ($cl_file):" >&2
        tail -n 5 "$cl_file"* >&2
        [ "${CL_SOFT:-0}" = 1 ] || exit 1
        mv "$cl_file" "$cl_file.failed"
        return 1
    fi
    rm -f "$cl_file".rank*
}

# cl_run FILE H R CMD...: CMD on hosts 0..H-1, R ranks each, with
# torchrun's variables (store on host 0) and GLOO_SOCKET_IFNAME=eth0.
cl_run() {
    cl_file=$1 cl_h_n=$2 cl_r_n=$3
    shift 3
    PORT=$((PORT + 1))
    cl_pids=
    cl_h=0
    while [ $cl_h -lt "$cl_h_n" ]; do
        cl_l=0
        while [ $cl_l -lt "$cl_r_n" ]; do
            cl_r=$((cl_h * cl_r_n + cl_l))
            if [ $cl_r = 0 ]; then cl_dst=$cl_file; else cl_dst=$cl_file.rank$cl_r; fi
            ip netns exec "ddpc-cl$cl_h" env RANK=$cl_r WORLD_SIZE=$((cl_h_n * cl_r_n)) LOCAL_RANK=$cl_l \
                LOCAL_WORLD_SIZE="$cl_r_n" GROUP_RANK=$cl_h MASTER_ADDR=198.18.0.1 MASTER_PORT=$PORT \
                GLOO_SOCKET_IFNAME=eth0 timeout "$TIMEOUT" "$@" > "$cl_dst" 2>&1 &
            cl_pids="$cl_pids $!"
            cl_l=$((cl_l + 1))
        done
        cl_h=$((cl_h + 1))
    done
    cl_wait "$cl_file" $cl_pids
}

# cl_mpirun FILE H R CMD...: CMD as H*R MPI ranks under mpirun, R on each
# host, as on a real cluster: mpirun (in the root namespace, reached at the
# bridge's 198.18.0.254) starts one orted per host through a "remote
# shell" (plm_rsh_agent) that enters the host's namespace (and a UTS
# namespace named after the host, as ORTE wants every node named apart);
# the ranks reach their orted over that namespace's loopback. OpenMPI's
# TCP BTL only, on eth0 (--mca btl tcp,self: ranks of one host talk TCP
# over its loopback, where ddpc uses shared memory); no binding (ddpc does
# not pin); mpi_yield_when_idle, as ranks outnumber this machine's cores
# (mpirun only sees R slots per host, so it would spin). MPI_ARGS adds
# mpirun options (e.g. a tuned algorithm).
cl_mpirun() {
    cl_file=$1 cl_h_n=$2 cl_r_n=$3
    shift 3
    cl_dir=$(dirname "$cl_file")
    cat > "$cl_dir/netns_rsh.sh" <<'EOF'
#!/bin/sh
# netns_rsh.sh HOST CMD: CMD in host 198.18.0.<i+1>'s namespace ddpc-cl<i>
h=$1
shift
exec ip netns exec "ddpc-cl$((${h##*.} - 1))" unshare --uts sh -c "hostname $h && $*"
EOF
    chmod +x "$cl_dir/netns_rsh.sh"
    : > "$cl_dir/mpi_hosts"
    cl_h=0
    while [ $cl_h -lt "$cl_h_n" ]; do
        echo "198.18.0.$((cl_h + 1)) slots=$cl_r_n" >> "$cl_dir/mpi_hosts"
        cl_h=$((cl_h + 1))
    done
    timeout "$TIMEOUT" mpirun --allow-run-as-root --hostfile "$cl_dir/mpi_hosts" -np $((cl_h_n * cl_r_n)) \
        --map-by slot --bind-to none --mca mpi_yield_when_idle 1 \
        --mca plm_rsh_agent "$cl_dir/netns_rsh.sh" --mca routed direct \
        --mca oob_tcp_if_include 198.18.0.0/24 --mca pml ob1 --mca btl tcp,self \
        --mca btl_tcp_if_include eth0 ${MPI_ARGS:-} "$@" > "$cl_file" 2>&1 &
    cl_wait "$cl_file" $!
}
