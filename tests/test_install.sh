#!/usr/bin/env bash
# Installs the build given as $1 into a temporary prefix, then builds a separate program
# against it twice: with pkg-config and with CMake's find_package(sgrad); and runs the
# installed programs (bin/sgrad-w2v trains on a tiny corpus, bin/sgrad-fasttext trains and
# tests a tiny classifier, bin/sgrad-bench prints its usage). In a sanitizer build the
# consumers are compiled with the same -fsanitize flags, since the installed library then
# needs the sanitizer runtime.
set -euo pipefail
build=$(cd "$1" && pwd)
src=$(pwd)
cc=$(sed -n 's/^CMAKE_C_COMPILER:[A-Z]*=//p' "$build/CMakeCache.txt")
san=
if grep -q '^SGRAD_SANITIZE:BOOL=ON' "$build/CMakeCache.txt"; then
    san="-fsanitize=address,undefined"
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
libdir=$(ls -d "$tmp"/prefix/lib*/ | head -n1)
export PKG_CONFIG_PATH="$libdir/pkgconfig"
# The .pc file forces no rpath on its users: they choose how to find the library.
if pkg-config --libs sgrad | grep -q rpath; then
    echo "install: sgrad.pc puts an rpath into its users' links"; exit 1
fi
# shellcheck disable=SC2046,SC2086
"$cc" -std=c11 $san "$src/tests/install_consumer.c" -o "$tmp/with_pkgconfig" $(pkg-config --cflags --libs sgrad) -lm
LD_LIBRARY_PATH="$libdir" "$tmp/with_pkgconfig"
# A static user: libsgrad.a and what `pkg-config --static` adds for it (Libs.private: libm,
# OpenMP, and the BLAS of a build with one, which the program's matmul needs).
# shellcheck disable=SC2046,SC2086
"$cc" -std=c11 $san "$src/tests/install_consumer.c" -o "$tmp/with_pkgconfig_static" \
    $(pkg-config --cflags sgrad) $(pkg-config --static --libs sgrad | sed 's/-lsgrad\b/-l:libsgrad.a/') -lm
"$tmp/with_pkgconfig_static"
cmake -S "$src/tests/install_consumer" -B "$tmp/consumer" -DCMAKE_PREFIX_PATH="$tmp/prefix" \
    -DCMAKE_C_COMPILER="$cc" -DCMAKE_C_FLAGS="$san" >/dev/null
cmake --build "$tmp/consumer" >/dev/null
LD_LIBRARY_PATH="$libdir" "$tmp/consumer/consumer"
"$tmp/consumer/consumer_static"
for p in "$tmp/with_pkgconfig_static" "$tmp/consumer/consumer_static"; do
    if readelf -d "$p" | grep NEEDED | grep -q libsgrad; then
        echo "install: $p, linked statically, needs libsgrad.so"; exit 1
    fi
done
blas=$(sed -n 's/^SGRAD_BLAS_LIBRARY:FILEPATH=//p' "$build/CMakeCache.txt")
if grep -q 'SG_BLAS_HAS_CBLAS:INTERNAL=1' "$build/CMakeCache.txt" && [ -n "$blas" ]; then
    pkg-config --static --libs sgrad | grep -q -- "-l$(basename "${blas%%.so*}" | sed 's/^lib//')" ||
        { echo "install: sgrad.pc's Libs.private does not name the BLAS ($blas)"; exit 1; }
    echo "install: static users link the BLAS ($blas) through sgrad.pc and sgrad::sgrad_static"
fi

# The trainers, when the build has them (SGRAD_BUILD_MODELS): sgrad_models.pc (shared and
# static) and find_package(sgrad COMPONENTS models), each consumer training and reloading
# a model through sgrad_models.h.
if [ -f "$libdir/pkgconfig/sgrad_models.pc" ]; then
    [ -f "$tmp/prefix/include/sgrad_models.h" ] || { echo "install: sgrad_models.h is not installed"; exit 1; }
    # shellcheck disable=SC2046,SC2086
    "$cc" -std=c11 $san "$src/tests/install_consumer_models.c" -o "$tmp/models_pkgconfig" \
        $(pkg-config --cflags --libs sgrad_models) -lm
    LD_LIBRARY_PATH="$libdir" "$tmp/models_pkgconfig" "$tmp/m1.sgw2v"
    # shellcheck disable=SC2046,SC2086
    "$cc" -std=c11 $san "$src/tests/install_consumer_models.c" -o "$tmp/models_pkgconfig_static" \
        $(pkg-config --cflags sgrad_models) \
        $(pkg-config --static --libs sgrad_models | sed 's/-lsgrad_models\b/-l:libsgrad_models.a/; s/-lsgrad\b/-l:libsgrad.a/') -lm
    "$tmp/models_pkgconfig_static" "$tmp/m2.sgw2v"
    cmake -S "$src/tests/install_consumer_models" -B "$tmp/consumer_models" -DCMAKE_PREFIX_PATH="$tmp/prefix" \
        -DCMAKE_C_COMPILER="$cc" -DCMAKE_C_FLAGS="$san" >/dev/null
    cmake --build "$tmp/consumer_models" >/dev/null
    LD_LIBRARY_PATH="$libdir" "$tmp/consumer_models/consumer_models" "$tmp/m3.sgw2v"
    "$tmp/consumer_models/consumer_models_static" "$tmp/m4.sgw2v"
    if readelf -d "$tmp/models_pkgconfig_static" | grep NEEDED | grep -q libsgrad; then
        echo "install: $tmp/models_pkgconfig_static, linked statically, needs a libsgrad*.so"; exit 1
    fi
    echo "install: sgrad_models found by pkg-config and by find_package(sgrad COMPONENTS models)"
else
    echo "install: no libsgrad_models in this build (SGRAD_BUILD_MODELS=OFF), not checked"
fi

# The MPI module, when the build has it: sgrad_dist.pc and find_package(sgrad COMPONENTS
# dist), each program run on 2 ranks.
if [ -f "$libdir/pkgconfig/sgrad_dist.pc" ]; then
    if pkg-config --libs sgrad_dist | grep -q rpath; then
        echo "install: sgrad_dist.pc puts an rpath into its users' links"; exit 1
    fi
    . "$src/tests/dist/mpi_env.sh"
    mpi+=(-np 2 -x LD_LIBRARY_PATH="$libdir")
    # shellcheck disable=SC2046,SC2086
    "$cc" -std=c11 $san "$src/tests/install_consumer_dist.c" -o "$tmp/dist_pkgconfig" \
        $(pkg-config --cflags --libs sgrad_dist) -lm
    timeout 120 "${mpi[@]}" "$tmp/dist_pkgconfig"
    cmake -S "$src/tests/install_consumer_dist" -B "$tmp/consumer_dist" -DCMAKE_PREFIX_PATH="$tmp/prefix" \
        -DCMAKE_C_COMPILER="$cc" -DCMAKE_C_FLAGS="$san" >/dev/null
    cmake --build "$tmp/consumer_dist" >/dev/null
    timeout 120 "${mpi[@]}" "$tmp/consumer_dist/consumer_dist"
    echo "install: sgrad_dist found by pkg-config and by find_package(sgrad COMPONENTS dist), run on 2 ranks"
else
    echo "install: no MPI module in this build (SGRAD_MPI=OFF), sgrad_dist not checked"
fi

# The programs, when the build has them (SGRAD_BUILD_TOOLS, on by default).
if grep -q '^SGRAD_BUILD_TOOLS:BOOL=OFF' "$build/CMakeCache.txt"; then
    echo "install: programs not built here (SGRAD_BUILD_TOOLS=OFF), not checked"
else
    bin=$tmp/prefix/bin
    for p in sgrad-w2v sgrad-fasttext sgrad-bench; do
        [ -x "$bin/$p" ] || { echo "install: $bin/$p is not installed"; exit 1; }
    done
    # No arguments: usage on stderr and exit status 2.
    status=0
    "$bin/sgrad-w2v" >/dev/null 2>"$tmp/usage.txt" || status=$?
    if [ "$status" -ne 2 ] || ! grep -q -- "-train FILE" "$tmp/usage.txt"; then
        echo "install: bin/sgrad-w2v without arguments exited $status, stderr:"; cat "$tmp/usage.txt"; exit 1
    fi
    for i in 1 2 3 4 5 6 7 8; do echo "a b c d a b c d the end"; done >"$tmp/corpus.txt"
    "$bin/sgrad-w2v" -train "$tmp/corpus.txt" -output "$tmp/v.txt" -size 8 -iter 1 -min-count 1 \
        -threads 1 2>/dev/null
    [ "$(head -n1 "$tmp/v.txt")" = "6 8" ] || { echo "install: bin/sgrad-w2v wrote no 6 x 8 table"; exit 1; }
    "$bin/sgrad-bench" --help | grep -q '^usage: sgrad-bench' \
        || { echo "install: bin/sgrad-bench --help printed no usage"; exit 1; }
    for i in 1 2 3 4 5 6; do echo "__label__x a b"; echo "__label__y c d"; done >"$tmp/labelled.txt"
    "$bin/sgrad-fasttext" supervised -input "$tmp/labelled.txt" -output "$tmp/m" -dim 4 -verbose 0 &&
        [ "$("$bin/sgrad-fasttext" test "$tmp/m.bin" "$tmp/labelled.txt" | head -n1)" = "$(printf 'N\t12')" ] ||
        { echo "install: bin/sgrad-fasttext did not train and test"; exit 1; }
    echo "install: bin/sgrad-w2v, bin/sgrad-fasttext and bin/sgrad-bench installed and run"
fi
echo "1 passed, 0 failed"
