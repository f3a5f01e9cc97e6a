#!/usr/bin/env bash
# Documents state what is true now and history lives in git: no calendar date may appear in
# a Markdown file (docs/performance.md alone records when each figure was measured) or in
# a source file of the library, the trainers, the programs or the Python package.
#
# Usage: tests/test_no_dates.sh [BUILD_DIR [ROOT]]. ROOT (default: the current directory)
# is the tree checked; its files are those git lists (tracked, or new and not ignored), or
# every file when ROOT is not a git checkout. Without ROOT the script first checks itself:
# it plants a date in a scratch tree and must see that tree fail, so the check cannot
# silently pass.
#
# Source files are scanned whole, not only their comments: a date in a string or a
# message is as much a diary entry as one in a comment, and a whole-file scan needs no
# parser for C, Python and shell comments.
#
# Dates caught (years 1900-2099): 2026-12-06 and 2026-12 (ISO; the month must be 01-12, so
# "2000-2048" or a shape "(2048-1)" does not match), 2026/12/06, 06/12/2026 and 6.12.2026,
# "Dec 2026", "December 6, 2026", "6 December 2026". Version numbers (1.13, 4.2.0), sizes
# (2048x512) and ranges of plain numbers do not match.
set -euo pipefail

month='(Jan|January|Feb|February|Mar|March|Apr|April|May|Jun|June|Jul|July|Aug|August|Sep|Sept|September|Oct|October|Nov|November|Dec|December)'
year='(19|20)[0-9]{2}'
pattern="(^|[^0-9.])${year}-(0[1-9]|1[0-2])(-[0-3][0-9])?([^0-9]|$)"
pattern+="|(^|[^0-9.])${year}/[01]?[0-9]/[0-3]?[0-9]([^0-9]|$)"
pattern+="|(^|[^0-9./])[0-3]?[0-9][/.][01]?[0-9][/.]${year}([^0-9]|$)"
pattern+="|\\b${month}\\.? +([0-3]?[0-9](st|nd|rd|th)?,? +)?${year}\\b"
pattern+="|\\b[0-3]?[0-9](st|nd|rd|th)? +${month},? +${year}\\b"

# The files checked under ROOT, one a line.
list_files() {
    local root=$1
    if git -C "$root" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
        git -C "$root" ls-files --cached --others --exclude-standard
    else
        (cd "$root" && find . -type f ! -path './.git/*' | sed 's|^\./||')
    fi
}

# Prints every dated line under ROOT as path:line:text; returns 1 when there is one.
scan() {
    local root=$1 found=0 f
    while IFS= read -r f; do
        [ -f "$root/$f" ] || continue # listed by git but deleted in the work tree
        case "$f" in
        docs/performance.md | tests/test_no_dates.sh) continue ;; # the figures; this check's own examples
        *.md) ;;
        src/*.c | src/*.h | tools/*.c | tools/*.h | models/*.c | models/*.h) ;;
        include/*.h | bench/*.c | bench/*.h | tests/*.c | tests/*.h | fuzz/*.c | fuzz/*.h) ;;
        src/*.py | tools/*.py | models/*.py | python/*.py | python/*.pyi) ;;
        bench/*.py | bench/*.sh | data/*.py | tests/*.py | tests/*.sh | fuzz/*.sh) ;;
        tools/*.sh | python/*.sh | src/*.txt | python/*.toml | python/*.cfg) ;;
        CMakeLists.txt | */CMakeLists.txt | cmake/*.cmake | cmake/*.in | .ci/*) ;;
        *) continue ;;
        esac
        if grep -nIE "$pattern" "$root/$f" | sed "s|^|$f:|"; then found=1; fi
    done < <(list_files "$root" | sort -u)
    return $found
}

if [ $# -lt 2 ]; then
    # Self-check: a scratch tree with one clean file must pass, and each planted date (in
    # a Markdown file, a C comment, a Python docstring) must fail it; a version number, a
    # shape and a range must not.
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    mkdir -p "$tmp/docs" "$tmp/src/core" "$tmp/python/sgrad"
    printf '# Clean\n\nPyTorch 1.13, gensim 4.2.0, (2048,512)@(512,256), 1000-2000 rows, 3.2 / alpha.\n' >"$tmp/README.md"
    printf '| what | date |\n| x | 2026-12-06 |\n' >"$tmp/docs/performance.md"
    printf '/* n = 2048 - 1; sizes 2000-10000 */\nint x;\n' >"$tmp/src/core/a.c"
    if ! scan "$tmp" >/dev/null; then echo "self-check: a clean tree failed"; scan "$tmp" || true; exit 1; fi
    for plant in "docs/guide.md:measured on 2026-12-06" "docs/guide.md:in Dec 2026" \
        "docs/guide.md:on December 6, 2026" "src/core/b.c:/* 06/12/2026: slower */" \
        "src/core/b.c:/* since 2026-12 */" "python/sgrad/m.py:\"\"\"Before 6 December 2026.\"\"\""; do
        rm -f "$tmp/docs/guide.md" "$tmp/src/core/b.c" "$tmp/python/sgrad/m.py"
        printf '%s\n' "${plant#*:}" >"$tmp/${plant%%:*}"
        if scan "$tmp" >/dev/null; then echo "self-check: planted '${plant#*:}' in ${plant%%:*} was not caught"; exit 1; fi
    done
    echo "self-check: 6 planted dates caught, the clean tree passes"
fi

root=${2:-.}
[ -d "$root" ] || { echo "no such directory: $root"; exit 1; }
if ! scan "$root"; then
    echo "dates found above: state what is true now (git keeps the history); measured figures go in docs/performance.md"
    exit 1
fi
echo "no dates outside docs/performance.md"
