#!/usr/bin/env bash
# Side-by-side wall time of `specbound svd` (certified, default precision)
# and numpy's uncertified float64 thin SVD, numpy.linalg.svd(full_matrices=False),
# on the same matrices, in one run. Prints best-of-N times and the ratio.
#
#   benches/compare_numpy.sh [REPEATS]
#
# numpy is installed into target/bench-venv on first use (needs PyPI).
# OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE are unset for the numpy side only (they
# force slower kernels on this machine), and numpy uses all cores, as does specbound.
set -euo pipefail
cd "$(dirname "$0")/.."
REPEATS="${1:-3}"
VENV=target/bench-venv
if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q numpy threadpoolctl
fi
cargo build --release -q
DIR=target/bench-data
mkdir -p "$DIR"
env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE "$VENV/bin/python" - "$DIR" "$REPEATS" <<'PY'
import subprocess, sys, time, json
import numpy as np
from threadpoolctl import threadpool_info
d, reps = sys.argv[1], int(sys.argv[2])
rng = np.random.default_rng(20261130)
print("numpy", np.__version__, [(i["internal_api"], i.get("architecture"), i["num_threads"]) for i in threadpool_info()])
print(f"{'shape':>10} {'numpy thin svd':>15} {'specbound svd':>14} {'ratio':>6}  max rel radius")
for (m, n) in [(768, 768), (768, 3072), (3072, 768)]:
    a = rng.normal(0.0, 0.02, size=(m, n))
    path = f"{d}/gauss_{m}x{n}.npy"
    np.save(path, a)
    t_np = []
    for _ in range(reps):
        t = time.perf_counter(); np.linalg.svd(a, full_matrices=False); t_np.append(time.perf_counter() - t)
    t_sb = []
    for _ in range(reps):
        t = time.perf_counter()
        out = subprocess.run(["target/release/specbound", "svd", path, "--json"], check=True, capture_output=True)
        t_sb.append(time.perf_counter() - t)
    rep = json.loads(out.stdout)
    print(f"{m}x{n:>5} {min(t_np):>14.3f}s {min(t_sb):>13.3f}s {min(t_sb)/min(t_np):>6.2f}  {rep['max_relative_radius']:.2e}")
print("(specbound time includes process start, reading the .npy, certification and all derived norms)")
PY
