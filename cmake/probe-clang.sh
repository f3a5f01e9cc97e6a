#!/bin/sh
# Can CLANG build for MODE (tsan: -fsanitize=thread with its OpenMP runtime, libomp; fuzz:
# -fsanitize=fuzzer,address,undefined)? Prints nothing when it can; otherwise one line
# saying what is missing and how to get it (Debian), for `make` to show as a skip.
# usage: sh cmake/probe-clang.sh CLANG tsan|fuzz
cc=$1
mode=$2
if ! command -v "$cc" >/dev/null 2>&1; then
    echo "no $cc (apt-get install clang)"
    exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
case $mode in
tsan)
    printf '#include <omp.h>\nint main(void) { int n = 0;\n#pragma omp parallel reduction(+:n)\nn += omp_get_thread_num() >= 0;\nreturn n < 1; }\n' >"$tmp/p.c"
    flags="-fsanitize=thread -fopenmp"
    need="clang with libomp (apt-get install clang libomp-dev libclang-rt-dev)" ;;
fuzz)
    printf '#include <stddef.h>\n#include <stdint.h>\nint LLVMFuzzerTestOneInput(const uint8_t *d, size_t n);\nint LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { (void)d; (void)n; return 0; }\n' >"$tmp/p.c"
    flags="-fsanitize=fuzzer,address,undefined"
    need="clang with libFuzzer (apt-get install clang libclang-rt-dev)" ;;
*)
    echo "probe-clang.sh: unknown mode $mode"
    exit 0 ;;
esac
# shellcheck disable=SC2086
if ! "$cc" $flags "$tmp/p.c" -o "$tmp/p" >"$tmp/log" 2>&1; then
    echo "$cc cannot build with $flags: needs $need"
elif [ "$mode" = tsan ] && ! TSAN_OPTIONS=ignore_noninstrumented_modules=1 "$tmp/p" >/dev/null 2>&1; then
    echo "a $flags program built by $cc does not run here"
fi
