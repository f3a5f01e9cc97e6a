#!/usr/bin/env bash
# The shape of libsgrad_models (models/, DESIGN.md "Trainers are libraries first"):
# - no function in models/*/*.c is longer than 80 lines (its opening line to its closing
#   brace at column 0: functions here are written with the brace alone on a line);
# - models/ is a client of the public headers: a file includes only <system> headers,
#   sgrad.h, sgrad_models.h, sgrad_kge.h and models' own private headers ("common/...",
#   "w2v/...", "fasttext/...", "kge/..." or one of its own directory), never a src/ or tools/ header;
# - no test compiles a .c file in by #include: the tests link the libraries.
# Each check first runs on a planted violation, so a checker that cannot fail does not pass.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
max=80

# longest FILES...: prints "file:line: name is N lines" for each function over $max
longest() {
    awk -v max="$max" '
        FNR == 1 { start = 0 }
        /^[A-Za-z_][A-Za-z0-9_ \t\*]*\(/ && !/;[ \t]*$/ { head = FNR; name = $0; sub(/\(.*/, "", name); sub(/.*[ \t\*]/, "", name) }
        /^\{/ && head { start = head; fname = name; head = 0 }
        /^\}/ && start {
            n = FNR - start + 1
            if (n > max) { printf "%s:%d: %s is %d lines (at most %d)\n", FILENAME, start, fname, n, max; bad = 1 }
            start = 0
        }
        END { exit bad }' "$@"
}

# includes FILES...: prints each include that models/ may not make
includes() {
    local bad=0 f inc
    for f in "$@"; do
        while IFS= read -r inc; do
            case "$inc" in
            sgrad.h | sgrad_models.h | sgrad_kge.h | common/*.h | w2v/*.h | fasttext/*.h | kge/*.h) ;;
            */*) echo "layout: $f includes \"$inc\" (models/ includes sgrad.h, sgrad_models.h and its own headers)"; bad=1 ;;
            *) [ -e "$(dirname "$f")/$inc" ] || { echo "layout: $f includes \"$inc\", not a header of its directory"; bad=1; } ;;
            esac
        done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f")
    done
    return $bad
}

# c_includes FILES...: prints each #include of a .c file
c_includes() { ! grep -Hn '^[[:space:]]*#[[:space:]]*include[[:space:]]*[<"][^>"]*\.c[>"]' "$@"; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# self-tests: a planted 81-line function, a planted src/ include, a planted .c include
{ echo "int planted(void)"; echo "{"; for i in $(seq 78); do echo "    x++;"; done; echo "}"; } >"$tmp/long.c"
if longest "$tmp/long.c" >/dev/null; then echo "layout: the length check missed a planted 81-line function"; exit 1; fi
printf '#include "ops/ops.h"\n' >"$tmp/up.c"
if includes "$tmp/up.c" >/dev/null; then echo "layout: the include check missed a planted src/ include"; exit 1; fi
printf '#include "../models/w2v/train.c"\n' >"$tmp/test_x.c"
if c_includes "$tmp/test_x.c" >/dev/null; then echo "layout: the test check missed a planted .c include"; exit 1; fi

mapfile -t sources < <(find "$here/models" -name '*.c' | sort)
mapfile -t headers < <(find "$here/models" -name '*.h' | sort)
longest "${sources[@]}"
includes "${sources[@]}" "${headers[@]}"
c_includes "$here"/tests/*.c "$here"/tests/*/*.c
n=$(awk '/^\{/ {n++} END {print n}' "${sources[@]}")
echo "layout: ${#sources[@]} files of models/, $n functions, none over $max lines; includes public or its own; no test includes a .c file"
echo "1 passed, 0 failed"
