#!/usr/bin/env bash
# The shared library exports exactly the public API: every dynamic symbol it defines is a
# function declared SG_API in include/sgrad.h, and no internal sg__ name leaks. When the
# MPI module is built, the same holds for libsgrad_dist and include/sgrad_dist.h, and
# libsgrad itself does not depend on MPI; so for libsgrad_models and include/sgrad_models.h
# with include/sgrad_kge.h.
set -euo pipefail
build=$1
lib=$(ls "$build"/libsgrad.so.* 2>/dev/null | head -n1 || true)
if [ -z "$lib" ]; then echo "skipped: no shared library in $build"; exit 77; fi
if ! command -v nm >/dev/null; then echo "skipped: no nm"; exit 77; fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
# check LIB HEADER...: LIB's defined dynamic symbols are exactly the HEADERs' SG_API functions
check() {
    local lib=$1; shift
    local header="$*"
    nm -D --defined-only "$lib" | awk '$2 ~ /^[TtWwDdBbRr]$/ {print $3}' | sort -u >"$tmp/exported"
    sed -n 's/^SG_API .*[ *]\(sg_[a-z0-9_]*\)(.*/\1/p' "$@" | sort -u >"$tmp/declared"
    if grep -v '^sg_' "$tmp/exported" | grep -q .; then
        echo "exports: $lib: symbols outside the sg_ namespace:"; grep -v '^sg_' "$tmp/exported"; fail=1
    fi
    if grep -q '^sg__' "$tmp/exported"; then
        echo "exports: $lib: internal sg__ symbols:"; grep '^sg__' "$tmp/exported"; fail=1
    fi
    if comm -23 "$tmp/exported" "$tmp/declared" | grep -q .; then
        echo "exports: $lib: exported but not declared SG_API in $header:"; comm -23 "$tmp/exported" "$tmp/declared"; fail=1
    fi
    if comm -13 "$tmp/exported" "$tmp/declared" | grep -q .; then
        echo "exports: $lib: declared SG_API in $header but not exported:"; comm -13 "$tmp/exported" "$tmp/declared"; fail=1
    fi
    echo "exports: $(basename "$lib"): $(wc -l <"$tmp/exported") public symbols, none internal"
}
check "$lib" include/sgrad.h
if readelf -d "$lib" 2>/dev/null | grep NEEDED | grep -qi mpi; then
    echo "exports: $lib depends on MPI (only libsgrad_dist may)"; fail=1
fi
models=$(ls "$build"/libsgrad_models.so.* 2>/dev/null | head -n1 || true)
if [ -n "$models" ]; then # the trainers: sgrad_models.h's functions, none of their internals
    check "$models" include/sgrad_models.h include/sgrad_kge.h
else
    echo "exports: no libsgrad_models in $build (SGRAD_BUILD_MODELS=OFF), not checked"
fi
dist=$(ls "$build"/libsgrad_dist.so.* 2>/dev/null | head -n1 || true)
if [ -n "$dist" ]; then
    check "$dist" include/sgrad_dist.h
else
    echo "exports: no libsgrad_dist in $build (built without MPI), not checked"
fi
[ "$fail" = 0 ] || exit 1
echo "1 passed, 0 failed"
