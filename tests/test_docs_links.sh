#!/usr/bin/env bash
# Every relative Markdown link of the manual resolves: in README.md, docs/*.md,
# bench/README.md, python/README.md and tools/*/README.md, each [text](target) whose
# target is not a URL must name an existing file or directory (relative to the
# document), and a #anchor, on this document or on another Markdown file, must match one
# of that file's headings as GitHub spells anchors (lower case; punctuation other than
# '-' and '_' dropped; spaces to '-'; a repeated heading gets -1, -2, ...). Links inside
# fenced code blocks and inline code are not links and are skipped.
#
# Usage: tests/test_docs_links.sh [BUILD_DIR] (BUILD_DIR is unused), from the repository root.
set -euo pipefail
if ! command -v python3 >/dev/null; then
    echo "skipped: needs python3"
    exit 77
fi
docs=(README.md docs/*.md bench/README.md python/README.md tools/*/README.md)
python3 - "${docs[@]}" <<'PY'
import os, re, sys

def anchors(path, cache={}):
    if path not in cache:
        seen, out, fence = {}, set(), False
        for line in open(path, encoding="utf-8"):
            if re.match(r"^\s*(```|~~~)", line):
                fence = not fence
                continue
            m = None if fence else re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
            if not m:
                continue
            slug = re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-")
            n = seen.get(slug, 0)
            seen[slug] = n + 1
            out.add(slug if n == 0 else f"{slug}-{n}")
        cache[path] = out
    return cache[path]

link = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
bad = checked = 0
for doc in sys.argv[1:]:
    if not os.path.isfile(doc):
        continue
    fence = False
    for no, line in enumerate(open(doc, encoding="utf-8"), 1):
        if re.match(r"^\s*(```|~~~)", line):
            fence = not fence
            continue
        if fence:
            continue
        for target in link.findall(re.sub(r"`[^`]*`", "", line)):
            if re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", target):
                continue  # a URL or mailto:
            checked += 1
            path, _, anchor = target.partition("#")
            dest = os.path.normpath(os.path.join(os.path.dirname(doc), path)) if path else doc
            if not os.path.exists(dest):
                print(f"{doc}:{no}: {target}: no such file {dest}")
                bad += 1
            elif anchor and dest.endswith(".md") and os.path.isfile(dest) \
                    and anchor.lower() not in anchors(dest):
                print(f"{doc}:{no}: {target}: no heading for #{anchor} in {dest}")
                bad += 1
if checked < 10:
    print(f"only {checked} relative links found: the scan is broken")
    sys.exit(1)
print(f"{checked} relative links checked, {bad} broken")
sys.exit(1 if bad else 0)
PY
