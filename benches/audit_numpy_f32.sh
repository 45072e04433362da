#!/usr/bin/env bash
# What `specbound audit` says about other tools' singular values of a real
# MiniLM matrix (encoder.layer.0.intermediate.dense.weight, 1536 x 384,
# float32 as stored): numpy.linalg.svd of the float32 array (numpy computes
# in float64 and returns float32), numpy.linalg.svd in float64, and
# scipy.linalg.svd of the float32 array (LAPACK sgesdd in single precision):
#
#   benches/audit_numpy_f32.sh [MODEL_DIR] [TENSOR]
#
# numpy is installed into target/bench-venv on first use (needs PyPI). The
# claimed values are saved as 1-D .npy files in target/audit-numpy/ and
# audited with the default f64 certification; exit codes 1/3 of the audits
# are expected and reported, not errors of this script.
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL="${1:-data/all-MiniLM-L6-v2}"
TENSOR="${2:-encoder.layer.0.intermediate.dense.weight}"
VENV=target/bench-venv
OUT=target/audit-numpy
if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q numpy threadpoolctl
fi
"$VENV/bin/python" -c "import scipy" 2>/dev/null || "$VENV/bin/pip" install -q scipy
cargo build --release -q
mkdir -p "$OUT"
"$VENV/bin/python" - "$MODEL/model.safetensors" "$TENSOR" "$OUT" <<'PY'
import json, struct, sys
import numpy as np
path, name, out = sys.argv[1:4]
with open(path, "rb") as f:
    blob = f.read()
(n,) = struct.unpack("<Q", blob[:8])
h = json.loads(blob[8:8 + n])[name]
a, b = h["data_offsets"]
w = np.frombuffer(blob[8 + n + a:8 + n + b], dtype="<f4").reshape(h["shape"])
s32 = np.linalg.svd(w, compute_uv=False)                     # float32 LAPACK (sgesdd)
s64 = np.linalg.svd(w.astype(np.float64), compute_uv=False)  # float64 LAPACK (dgesdd)
import scipy, scipy.linalg
ss = scipy.linalg.svd(w, compute_uv=False, lapack_driver="gesdd")  # sgesdd, float32 arithmetic
np.save(f"{out}/sv_f32.npy", s32)
np.save(f"{out}/sv_f64.npy", s64)
np.save(f"{out}/sv_scipy_f32.npy", ss)
print(f"numpy {np.__version__}, scipy {scipy.__version__}: {name} {w.shape} {w.dtype}; sigma_1: "
      f"numpy f32 {s32[0]!r} ({s32.dtype}), numpy f64 {s64[0]!r}, scipy f32 {ss[0]!r} ({ss.dtype})")
PY
for f in sv_f32 sv_scipy_f32 sv_f64; do
  for rtol in 1e-6 1e-12; do
    echo "== specbound audit $MODEL $OUT/$f.npy --tensor $TENSOR --rtol $rtol"
    set +e
    target/release/specbound audit "$MODEL" "$OUT/$f.npy" --tensor "$TENSOR" --rtol "$rtol" --quiet > "$OUT/$f-$rtol.txt"
    code=$?
    set -e
    head -3 "$OUT/$f-$rtol.txt"
    sed -n '4,9p' "$OUT/$f-$rtol.txt"
    echo "   (exit $code; full table in $OUT/$f-$rtol.txt)"
  done
done
