# Sourced by the bench scripts that run sgrad-w2v on a corpus (bench/w2v_threads.sh,
# bench/dist/w2v_mpi_rounds.sh, bench/fasttext_subword_compare.sh); `me`, the script's
# name for messages, is set first.

# w2v_corpus_ready PATH DEFAULT: the corpus at PATH, fetched (bench/brown_corpus.sh) only
# when PATH is the default Brown path; any other missing or empty PATH ends the script,
# so that a mistyped CORPUS is not quietly replaced by Brown.
w2v_corpus_ready() {
    [ -s "$1" ] && return 0
    if [ "$1" = "$2" ]; then
        bench/brown_corpus.sh "$1"
        return
    fi
    echo "$me: no corpus at $1 (CORPUS)" >&2
    exit 2
}

# "THREADS RATE" from the summary line of the sgrad-w2v log $1: the threads it names and
# its words/sec/thread in thousands.
w2v_summary() {
    local r
    r=$(sed -n 's/.* \([0-9]*\) threads (deterministic[^)]*): [0-9.]* s, \([0-9.]*\)k words\/sec\/thread.*/\1 \2/p' "$1")
    if [ -z "$r" ]; then
        echo "$me: no summary line with a rate in $1 (-debug 0 or -hogwild 1 in FLAGS?)" >&2
        return 1
    fi
    echo "$r"
}

# Words/sec/thread (thousands) of the log $1.
w2v_rate() {
    local r
    r=$(w2v_summary "$1") || return 1
    echo "${r#* }"
}

# Total words/sec of training of the log $1: words/sec/thread times the threads.
w2v_total_rate() {
    local r
    r=$(w2v_summary "$1") || return 1
    awk -v r="$r" 'BEGIN { split(r, a, " "); printf "%.1f\n", 1000 * a[1] * a[2] }'
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
