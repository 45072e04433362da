#!/usr/bin/env bash
# Side-by-side wall time: one `specbound study` over the docs' family (the
# bundled MiniLM truncated to 2, 4 and 6 layers, built by
# examples/study_family.rs as scripts/study-family does) versus the
# sum of one `specbound certify MODEL --out FILE` per model, in one run,
# REPEATS times each (the minimum is reported), with the ratio.
#
#   benches/compare_study.sh [REPEATS]
set -euo pipefail
cd "$(dirname "$0")/.."
REPEATS="${1:-3}"
cargo build --release -q --bin specbound --example study_family
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
./target/release/examples/study_family "$WORK/family" >/dev/null
BIN=./target/release/specbound
now() { date +%s%N; }   # nanoseconds
best_study=""
best_sum=""
for r in $(seq "$REPEATS"); do
  rm -rf "$WORK/out" "$WORK/single"
  t0=$(now)
  "$BIN" study "$WORK"/family/* --out "$WORK/out" --quiet >/dev/null
  t1=$(now)
  mkdir -p "$WORK/single"
  for m in "$WORK"/family/*; do
    "$BIN" certify "$m" --out "$WORK/single/$(basename "$m").json" >/dev/null
  done
  t2=$(now)
  s=$((t1 - t0))
  c=$((t2 - t1))
  if [ -z "$best_study" ] || [ "$s" -lt "$best_study" ]; then best_study=$s; fi
  if [ -z "$best_sum" ] || [ "$c" -lt "$best_sum" ]; then best_sum=$c; fi
done
# The study's certificates are the single runs' certificates (model paths aside).
for m in "$WORK"/family/*; do
  id=$(basename "$m")
  cmp -s <(grep -v '"path"' "$WORK/out/certificates/$id.json") <(grep -v '"path"' "$WORK/single/$id.json") \
    || { echo "certificates of $id differ" >&2; exit 1; }
done
printf 'models: %s\n' "$(ls "$WORK/family" | tr '\n' ' ')"
awk -v s="$best_study" -v c="$best_sum" -v n="$(ls "$WORK/family" | wc -l)" -v r="$REPEATS" 'BEGIN {
  printf "study (certificates, 6 tables, 5 figures, report): %.2f s\n", s / 1e9
  printf "sum of %d certify runs (certificates only):        %.2f s\n", n, c / 1e9
  printf "ratio study / sum: %.2f (minimum of %d runs each)\n", s / c, r
}'
