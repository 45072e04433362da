#!/usr/bin/env bash
# Wall time of `specbound svd` per method on tall matrices, to check that
# `--precision auto` costs a small multiple of the fastest method that meets
# its target (or stops and says which target it missed, see "note:" lines).
#
#   benches/auto_cost.sh [BINARY]
#
# BINARY defaults to target/release/specbound (built first). Matrices come
# from benches/make_matrix.py (Python standard library only) and are cached
# in target/bench-data.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN="${1:-target/release/specbound}"
if [ -z "${1:-}" ]; then cargo build --release -q; fi
DIR=target/bench-data
mkdir -p "$DIR"
for spec in "cluster 512 32" "cluster 2048 32" "graded 2048 32"; do
  set -- $spec
  f="$DIR/$1_$2x$3.npy"
  [ -f "$f" ] || python3 benches/make_matrix.py "$1" "$2" "$3" "$f"
  for p in f64 extended mpfr:128 auto; do
    t0=$(date +%s.%N)
    out=$("$BIN" svd "$f" --precision "$p" 2>&1 || true)
    t1=$(date +%s.%N)
    rad=$(printf '%s\n' "$out" | sed -n 's/^  max relative radius //p')
    notes=$(printf '%s\n' "$out" | grep -c '^note:' || true)
    printf '%-22s %-9s %8.2f s  max rel radius %-9s notes %s\n' \
      "$(basename "$f")" "$p" "$(echo "$t1 - $t0" | bc)" "$rad" "$notes"
  done
done
