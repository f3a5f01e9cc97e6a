#!/usr/bin/env bash
# `make demo`: trains a small model on bundled data and shows a result a person can judge.
set -euo pipefail
build=${1:-build}
echo "== sgrad demo: a 2-layer MLP learns two interleaved spirals (loss should fall, accuracy rise)"
"$build/sgrad-example-mlp"
