#!/usr/bin/env bash
# sgrad-fasttext's verbs end to end: `test` prints N, P@k, R@k as fastText does, with N
# the lines holding a known label and P@k, R@k recomputed here (awk) from `predict`'s
# labels against the gold ones, for k = 1, 2, -1 (all labels) and with a threshold th
# (fastText 0.9.2's [k] [th]); predict-prob gives k labels per line, probabilities
# descending; with k = -1 every label, whose softmax probabilities (each p + 1e-5) sum to
# 1; with th the labels of k = -1 whose probability is >= th, in order, at most k; bad k
# or th is refused; predict reads stdin as "-"; -thread 1 and 2 train bitwise the same model.
# Where fastText is installed, its `test` on the same file counts the same N and its
# output has the same three line names. Skips (exit 77) without the programs.
# usage: tests/test_fasttext_cli.sh BUILD_DIR
set -uo pipefail
build=${1:-build}
ft=$build/sgrad-fasttext
if [ ! -x "$ft" ]; then
    echo "SKIP test_fasttext_cli: $ft is not built here (SGRAD_BUILD_TOOLS=OFF)"
    exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
# three topics; every 9th line has a second label; a few test lines have an unknown label
# or none
for i in $(seq 300); do
    t=$((i % 3)); extra=""; [ $((i % 9)) -eq 0 ] && extra=" __label__t$(((t + 1) % 3))"
    echo "__label__t$t$extra w$t w$((t + 3)) w$(((i * 7) % 10)) x$((i % 4))"
done >"$tmp/train.txt"
{ for i in $(seq 90); do
    t=$((i % 3)); echo "w$t x$((i % 5)) __label__t$t w$(((i * 3) % 10))"
done; echo "__label__zz w1 w2"; echo "w1 w4 no label"; } >"$tmp/test.txt"
"$ft" supervised -input "$tmp/train.txt" -output "$tmp/m" -dim 10 -epoch 5 -wordNgrams 2 \
    -bucket 10000 -thread 1 -verbose 0 || { echo "FAIL: training"; exit 1; }
"$ft" supervised -input "$tmp/train.txt" -output "$tmp/m2" -dim 10 -epoch 5 -wordNgrams 2 \
    -bucket 10000 -thread 2 -verbose 0
cmp -s "$tmp/m.bin" "$tmp/m2.bin" || { echo "FAIL: -thread 1 and 2 trained different models"; fail=1; }

for args in 1 2 -1 "2 0.4" "-1 0.3"; do
    k=${args%% *} n=${args// /_}
    "$ft" test "$tmp/m.bin" "$tmp/test.txt" $args >"$tmp/test$n.txt" || { echo "FAIL: test $args"; fail=1; }
    "$ft" predict "$tmp/m.bin" "$tmp/test.txt" $args >"$tmp/pred$n.txt"
    want=$(paste -d'|' "$tmp/test.txt" "$tmp/pred$n.txt" | awk -F'|' -v k=$k '
        { n = split($1, w, " "); g = 0; delete gold
          for (i = 1; i <= n; i++) if (w[i] ~ /^__label__t/) { gold[w[i]] = 1; g++ }
          if (g == 0) next
          N++; G += g; m = split($2, p, " "); P += m
          for (i = 1; i <= m; i++) if (p[i] in gold) H++ }
        END { printf "N\t%d\nP@%d\t%.3g\nR@%d\t%.3g\n", N, k, H / P, k, H / G }')
    if [ "$(cat "$tmp/test$n.txt")" != "$want" ]; then
        echo "FAIL: test $args printed"; cat "$tmp/test$n.txt"; echo "recomputed from predict:"; echo "$want"; fail=1
    fi
done
"$ft" predict-prob "$tmp/m.bin" "$tmp/test.txt" -1 >"$tmp/all.txt"
awk '{ s = 0; for (i = 2; i <= NF; i += 2) s += $i
       if (NF != 6 || s < 0.9999 || s > 1.0001) { print "line " NR ": " $0; bad = 1 } }
     END { exit bad }' "$tmp/all.txt" || { echo "FAIL: predict-prob -1 does not give every label"; fail=1; }
for args in "-1 0.3" "1 0.3" "2 0.4" "-1 1.5"; do
    k=${args%% *} th=${args#* }
    "$ft" predict-prob "$tmp/m.bin" "$tmp/test.txt" $args >"$tmp/th.txt" || { echo "FAIL: predict-prob $args"; fail=1; }
    # fastText keeps p >= th; printed is p + 1e-5 (6 digits): lines that close are not judged
    paste -d'|' "$tmp/all.txt" "$tmp/th.txt" | awk -F'|' -v k=$k -v th=$th '
        { n = split($1, a, " "); m = split($2, b, " "); want = ""; c = 0; near = 0
          for (i = 2; i <= n; i += 2) {
              if (a[i] - 1e-5 - th < 1e-4 && th - (a[i] - 1e-5) < 1e-4) near = 1
              if (a[i] - 1e-5 >= th && (k < 0 || c < k)) { want = want " " a[i - 1]; c++ } }
          got = ""; for (i = 1; i < m; i += 2) got = got " " b[i]
          if (!near && got != want) { print "line " NR ": " $2 " wanted" want; bad = 1 } }
        END { exit bad }' || { echo "FAIL: predict-prob $args is not the labels of p >= th"; fail=1; }
done
[ "$(sort -u "$tmp/th.txt")" = "" ] || { echo "FAIL: th 1.5 kept a label"; fail=1; }
awk '$2 >= 0.3 { n++ } END { exit !n }' "$tmp/all.txt" || { echo "FAIL: no probability >= 0.3 (the th test needs some)"; fail=1; }
for bad in "0" "-2" "x" "1 x" "1 nan"; do
    "$ft" predict "$tmp/m.bin" "$tmp/test.txt" $bad >/dev/null 2>"$tmp/err.txt" && { echo "FAIL: predict accepted k th = $bad"; fail=1; }
    grep -q "bad k\|bad threshold" "$tmp/err.txt" || { echo "FAIL: predict $bad:"; cat "$tmp/err.txt"; fail=1; }
done
[ "$(head -n1 "$tmp/test1.txt")" = "$(printf 'N\t90')" ] || { echo "FAIL: N is not 90"; fail=1; }

"$ft" predict-prob "$tmp/m.bin" "$tmp/test.txt" 3 >"$tmp/prob.txt"
awk '{ if (NF != 6) bad = 1
       for (i = 2; i <= NF; i += 2) { if ($i <= 0 || $i > 1.00001 || (i > 2 && $i > $(i - 2))) bad = 1
                                      if ($(i - 1) !~ /^__label__t[012]$/) bad = 1 } }
     END { exit bad }' "$tmp/prob.txt" || { echo "FAIL: predict-prob lines:"; head -3 "$tmp/prob.txt"; fail=1; }
[ "$(wc -l <"$tmp/prob.txt")" -eq 92 ] || { echo "FAIL: predict-prob did not answer every line"; fail=1; }
"$ft" predict "$tmp/m.bin" - 2 <"$tmp/test.txt" | cmp -s - "$tmp/pred2.txt" || { echo "FAIL: predict from stdin differs"; fail=1; }

if command -v fasttext >/dev/null; then
    fasttext supervised -input "$tmp/train.txt" -output "$tmp/f" -dim 10 -epoch 5 -wordNgrams 2 \
        -bucket 10000 -thread 1 -verbose 0
    fasttext test "$tmp/f.bin" "$tmp/test.txt" >"$tmp/ftest.txt"
    [ "$(cut -f1 "$tmp/ftest.txt" | tr '\n' ' ')" = "$(cut -f1 "$tmp/test1.txt" | tr '\n' ' ')" ] &&
        [ "$(head -n1 "$tmp/ftest.txt")" = "$(head -n1 "$tmp/test1.txt")" ] ||
        { echo "FAIL: fastText's test output:"; cat "$tmp/ftest.txt"; echo "ours:"; cat "$tmp/test1.txt"; fail=1; }
else
    echo "fasttext not installed: the comparison with its output is skipped"
fi
# -help after a verb prints the usage and exits 0 (it once asked for a value)
for verb in supervised skipgram cbow; do
    "$ft" $verb -help >"$tmp/help.txt" 2>&1 && grep -q "sgrad-fasttext skipgram|cbow" "$tmp/help.txt" ||
        { echo "FAIL: sgrad-fasttext $verb -help"; cat "$tmp/help.txt"; fail=1; }
done
exit $fail
