#!/usr/bin/env bash
# Installs the build given as $1 into a temporary prefix, then builds a separate program
# against it twice: with pkg-config and with CMake's find_package(sgrad).
set -euo pipefail
build=$(cd "$1" && pwd)
src=$(pwd)
if grep -q '^SGRAD_SANITIZE:BOOL=ON' "$build/CMakeCache.txt"; then
    echo "skipped: sanitizer build (the installed library needs the sanitizer runtime)"
    exit 77
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
cc -std=c11 "$src/tests/install_consumer.c" -o "$tmp/with_pkgconfig" $(pkg-config --cflags --libs sgrad) -lm
LD_LIBRARY_PATH="$libdir" "$tmp/with_pkgconfig"
cmake -S "$src/tests/install_consumer" -B "$tmp/consumer" -DCMAKE_PREFIX_PATH="$tmp/prefix" >/dev/null
cmake --build "$tmp/consumer" >/dev/null
LD_LIBRARY_PATH="$libdir" "$tmp/consumer/consumer"
echo "1 passed, 0 failed"
