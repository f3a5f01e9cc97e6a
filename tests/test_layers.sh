#!/usr/bin/env bash
# Fails when a library file includes the private header of a higher layer (the order is
# src/README.md's), or a private header that belongs to no layer; and, given a build
# directory, when an object file calls a function defined in a higher layer (a public sg_
# function is declared to every layer by sgrad.h, so only the symbols show such a call).
# It first checks itself on a planted upward include, so a checker that cannot fail does
# not pass.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)

# rank of a path relative to src/ (a file's own layer, or an included header's)
rank() {
    case "$1" in
    core/*) echo 0 ;; sparse/*) echo 1 ;; autograd/*) echo 2 ;; ops/*) echo 3 ;;
    optim/*) echo 4 ;; io/*) echo 5 ;; dist/*) echo 6 ;; context.c) echo 7 ;;
    *) echo -1 ;;
    esac
}

# check SRC_DIR: prints each violation, returns 1 if there was one
check() {
    local src=$1 bad=0 f rel own inc r
    while IFS= read -r f; do
        rel=${f#"$src"/}
        own=$(rank "$rel")
        if [ "$own" -lt 0 ]; then echo "layers: $rel is in no layer (see src/README.md)"; bad=1; continue; fi
        while IFS= read -r inc; do
            [ "$inc" = sgrad.h ] && continue
            # the dist layer's public header (include/), for src/dist only
            if [ "$inc" = sgrad_dist.h ] && [ "$own" = 6 ]; then continue; fi
            r=$(rank "$inc")
            if [ "$r" -lt 0 ]; then
                echo "layers: $rel includes \"$inc\", which is no layer's private header"; bad=1
            elif [ "$r" -gt "$own" ]; then
                echo "layers: $rel (rank $own) includes \"$inc\" of a higher layer (rank $r)"; bad=1
            fi
        done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f")
    done < <(find "$src" -name '*.[ch]' ! -path '*/README*' | sort)
    return $bad
}

# self-test: a planted sparse -> ops include must be caught
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/sparse" "$tmp/ops"
printf '#include "ops/ops.h"\n' > "$tmp/sparse/bad.c"
printf '#include "sparse/sparse.h"\n' > "$tmp/ops/ok.c"
if check "$tmp" >/dev/null; then echo "layers: the checker missed a planted upward include"; exit 1; fi

check "$here/src"
echo "layers: $(find "$here/src" -name '*.[ch]' | wc -l) files, no upward include"

# The objects of libsgrad and, when built, of libsgrad_dist (src/dist, rank 6).
objdir=${1:+$1/CMakeFiles/sgrad_objects.dir/src}
distdir=${1:+$1/CMakeFiles/sgrad_dist_objects.dir/src}
if [ -n "$objdir" ] && [ -d "$objdir" ] && command -v nm >/dev/null; then
    : >"$tmp/defs"
    : >"$tmp/uses"
    while IFS= read -r o; do
        case $o in "$objdir"/*) rel=${o#"$objdir"/} ;; *) rel=${o#"$distdir"/} ;; esac
        rel=${rel%.o}
        r=$(rank "$rel")
        nm --defined-only "$o" | awk -v r="$r" '$2 ~ /^[TDBR]$/ {print $3, r}' >>"$tmp/defs"
        nm -u "$o" | awk -v r="$r" -v f="$rel" '$2 ~ /^sg_/ {print $2, r, f}' >>"$tmp/uses"
    done < <(find "$objdir" ${distdir:+$( [ -d "$distdir" ] && echo "$distdir")} -name '*.o' | sort)
    if ! awk 'NR == FNR { rank[$1] = $2; next }
              ($1 in rank) && rank[$1] > $2 {
                  printf "layers: %s (rank %d) calls %s, defined in rank %d\n", $3, $2, $1, rank[$1]; bad = 1 }
              END { exit bad }' "$tmp/defs" "$tmp/uses"; then
        exit 1
    fi
    echo "layers: $(wc -l <"$tmp/uses") calls between object files, none upward"
fi
echo "1 passed, 0 failed"
