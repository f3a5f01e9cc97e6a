# Sourced by the scripts that time sgrad-w2v in rounds (bench/w2v_threads.sh,
# bench/dist/w2v_mpi_rounds.sh); `me`, the script's name for messages, is set first.

# "THREADS RATE" from the summary line of the sgrad-w2v log $1: the threads it names and
# its words/sec/thread in thousands.
w2v_rate() {
    local r
    r=$(sed -n 's/.* \([0-9]*\) threads (deterministic[^)]*): [0-9.]* s, \([0-9.]*\)k words\/sec\/thread.*/\1 \2/p' "$1")
    if [ -z "$r" ]; then
        echo "$me: no summary line with a rate in $1 (-debug 0 or -hogwild 1 in FLAGS?)" >&2
        return 1
    fi
    echo "$r"
}

# run LOG COMMAND...: runs the command with its output in LOG; on failure shows LOG and
# ends the script.
run() {
    local log=$1
    shift
    if ! "$@" >"$log" 2>&1; then
        echo "$me: failed: $*" >&2
        cat "$log" >&2
        exit 1
    fi
}
