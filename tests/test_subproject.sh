#!/usr/bin/env bash
# sgrad works as a CMake subproject: a parent project add_subdirectory()s the source tree,
# links sgrad::sgrad_static and sgrad::sgrad, and its programs run; sgrad's own programs
# and tests stay out of the parent's build. The parent uses the compiler of the build given
# as $1, and in a sanitizer build it turns SGRAD_SANITIZE on for sgrad and compiles its own
# programs with the same -fsanitize flags.
set -euo pipefail
build=$(cd "$1" && pwd)
src=$(pwd)
cc=$(sed -n 's/^CMAKE_C_COMPILER:[A-Z]*=//p' "$build/CMakeCache.txt")
san=()
if grep -q '^SGRAD_SANITIZE:BOOL=ON' "$build/CMakeCache.txt"; then
    san=(-DSGRAD_SANITIZE=ON "-DCMAKE_C_FLAGS=-fsanitize=address,undefined")
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/parent"
cat >"$tmp/parent/CMakeLists.txt" <<CMAKE
cmake_minimum_required(VERSION 3.16)
project(parent LANGUAGES C)
add_subdirectory("$src" sgrad)
add_executable(with_static "$src/tests/install_consumer.c")
target_link_libraries(with_static PRIVATE sgrad::sgrad_static m)
add_executable(with_shared "$src/tests/install_consumer.c")
target_link_libraries(with_shared PRIVATE sgrad::sgrad m)
CMAKE
cmake -S "$tmp/parent" -B "$tmp/b" -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_COMPILER="$cc" "${san[@]}" >/dev/null
cmake --build "$tmp/b" -j 2 >/dev/null
"$tmp/b/with_static"
"$tmp/b/with_shared"
if [ -e "$tmp/b/sgrad/sgrad-w2v" ] || [ -e "$tmp/b/sgrad/tests" ]; then
    echo "subproject: sgrad's programs or tests were built into the parent"; exit 1
fi
echo "1 passed, 0 failed"
