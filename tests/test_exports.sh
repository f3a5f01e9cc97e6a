#!/usr/bin/env bash
# The shared library exports exactly the public API: every dynamic symbol it defines is a
# function declared SG_API in include/sgrad.h, and no internal sg__ name leaks.
set -euo pipefail
build=$1
lib=$(ls "$build"/libsgrad.so.* 2>/dev/null | head -n1 || true)
if [ -z "$lib" ]; then echo "skipped: no shared library in $build"; exit 77; fi
if ! command -v nm >/dev/null; then echo "skipped: no nm"; exit 77; fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
nm -D --defined-only "$lib" | awk '$2 ~ /^[TtWwDdBbRr]$/ {print $3}' | sort -u >"$tmp/exported"
sed -n 's/^SG_API .*[ *]\(sg_[a-z0-9_]*\)(.*/\1/p' include/sgrad.h | sort -u >"$tmp/declared"
fail=0
if grep -v '^sg_' "$tmp/exported" | grep -q .; then
    echo "exports: symbols outside the sg_ namespace:"; grep -v '^sg_' "$tmp/exported"; fail=1
fi
if grep -q '^sg__' "$tmp/exported"; then
    echo "exports: internal sg__ symbols:"; grep '^sg__' "$tmp/exported"; fail=1
fi
if comm -23 "$tmp/exported" "$tmp/declared" | grep -q .; then
    echo "exports: exported but not declared SG_API in sgrad.h:"; comm -23 "$tmp/exported" "$tmp/declared"; fail=1
fi
if comm -13 "$tmp/exported" "$tmp/declared" | grep -q .; then
    echo "exports: declared SG_API but not exported:"; comm -13 "$tmp/exported" "$tmp/declared"; fail=1
fi
[ "$fail" = 0 ] || exit 1
echo "exports: $(wc -l <"$tmp/exported") public symbols, none internal"
echo "1 passed, 0 failed"
