#!/usr/bin/env bash
# Fails when a library file includes the private header of a higher layer (the order is
# src/README.md's), or a private header that belongs to no layer; when a file outside
# src/optim reads an optimizer's internals (check_optim_private); and, given a build
# directory, when an object file calls a function defined in a higher layer (a public sg_
# function is declared to every layer by sgrad.h, so only the symbols show such a call).
# It first checks itself on planted violations, so a checker that cannot fail does not
# pass.
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

# Only src/optim sees an optimizer's internals. Elsewhere no file includes optim/optim.h
# (which defines sg_optim and the per-parameter state sg__pstate; io includes the
# checkpoint interface optim/state_io.h instead), names the optimizer's internal types,
# reads its options union (o.sgd, o.adagrad, o.adam) or a parameter state's fields, or
# touches a tensor's optim_state (core declares it; autograd's lifetime seam reaches it as
# an sg__param_owner). Comment lines are not read.
optim_internals='#[[:space:]]*include[[:space:]]*"optim/optim\.h"|\b(sg__pstate|sg__optim_ops|sg__optim_kind|sg__lr_run|SG__OPT_[A-Z_]+)\b|struct[[:space:]]+sg_optim[[:space:]]*\{|\bo\.(sgd|adagrad|adam)\b|->(state|state_name|last|runs)\[|->(n_state|lagging|n_runs|cap_runs)\b'

# check_optim_private SRC_DIR: prints each violation, returns 1 if there was one
check_optim_private() {
    local src=$1 bad=0 f rel hits
    while IFS= read -r f; do
        rel=${f#"$src"/}
        case $rel in optim/*) continue ;; esac
        hits=$({ grep -nE "$optim_internals" "$f"
                 case $rel in core/* | autograd/*) ;; *) grep -nw 'optim_state' "$f" ;; esac
               } | grep -vE '^[0-9]+:[[:space:]]*(/\*|\*([[:space:]/]|$))' | sort -t: -k1,1n -u || true)
        if [ -n "$hits" ]; then
            printf '%s\n' "$hits" | sed "s|^|layers: $rel:|; s|\$| (optimizer internals: only src/optim reads them, see optim/state_io.h)|"
            bad=1
        fi
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

# self-test: each planted reach into an optimizer's internals outside src/optim is caught,
# and the same lines inside src/optim are not
planted=('#include "optim/optim.h"' 'static int f(sg__pstate *ps) { return 0; }'
         'double m(const sg_optim *o) { return o->o.sgd.momentum; }' 'x = ps->state[1]->data;'
         '*n = ps->n_state;' 'if (p->optim_state) f(p);' 'if (opt->kind == SG__OPT_SGD) g();')
for line in "${planted[@]}"; do
    rm -rf "$tmp/io" "$tmp/optim"
    mkdir -p "$tmp/io" "$tmp/optim"
    printf '%s\n' "$line" > "$tmp/io/bad.c"
    printf '%s\n' "$line" > "$tmp/optim/ok.c"
    if check_optim_private "$tmp" >/dev/null; then echo "layers: the checker missed a planted \"$line\" in io/"; exit 1; fi
    rm "$tmp/io/bad.c"
    if ! check_optim_private "$tmp" >/dev/null; then echo "layers: the checker refused \"$line\" in optim/"; exit 1; fi
done

check "$here/src"
echo "layers: $(find "$here/src" -name '*.[ch]' | wc -l) files, no upward include"
check_optim_private "$here/src"
echo "layers: no file outside src/optim reads optimizer internals"

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
