#!/usr/bin/env bash
# The Python package against the CLI, in one run: the time of
# `import specbound`, of `specbound.svd` on a 768x3072 float32 array against
# `specbound svd` on the same matrix saved as .npy (best of N, and the
# ratio), and the size of the wheel. The import is timed inside a fresh
# interpreter (best of N).
#
#   benches/compare_python.sh [REPEATS]
#
# Builds the wheel (maturin, through pip) and installs it into
# target/bench-python-venv (needs PyPI on first use).
set -euo pipefail
cd "$(dirname "$0")/.."
REPEATS="${1:-5}"
VENV=target/bench-python-venv
[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
cargo build --release -q
rm -rf target/bench-wheel
"$VENV/bin/pip" wheel -q --no-deps -w target/bench-wheel ./python
"$VENV/bin/pip" install -q --force-reinstall target/bench-wheel/specbound-*.whl
DIR=target/bench-data
mkdir -p "$DIR"
"$VENV/bin/python" - "$DIR" "$REPEATS" target/bench-wheel/specbound-*.whl <<'PY'
import json, os, subprocess, sys, time
d, reps, wheel = sys.argv[1], int(sys.argv[2]), sys.argv[3]
py = sys.executable

def best(cmd):
    ts = []
    for _ in range(reps):
        t = time.perf_counter(); subprocess.run(cmd, check=True, capture_output=True); ts.append(time.perf_counter() - t)
    return min(ts)

def import_time():
    code = "import time; t = time.perf_counter(); import specbound; print(time.perf_counter() - t)"
    return min(float(subprocess.run([py, "-c", code], check=True, capture_output=True, text=True).stdout) for _ in range(reps))

print(f"import specbound: {import_time() * 1e3:.1f} ms (NumPy and pandas are imported when first needed, not here)")

import numpy as np
import specbound
rng = np.random.default_rng(20261130)
a = rng.normal(0.0, 0.02, size=(768, 3072)).astype(np.float32)
path = f"{d}/gauss_768x3072_f32.npy"
np.save(path, a)
t_py = []
for _ in range(reps):
    t = time.perf_counter(); r = specbound.svd(a); t_py.append(time.perf_counter() - t)
t_cli = best(["target/release/specbound", "svd", path, "--json"])
out = json.loads(subprocess.run(["target/release/specbound", "svd", path, "--json"], check=True, capture_output=True).stdout)
same = np.array_equal(r.lo, [v["lo"] for v in out["singular_values"]]) and np.array_equal(r.hi, [v["hi"] for v in out["singular_values"]])
print(f"768x3072 float32: specbound.svd {min(t_py):.3f}s, CLI {t_cli:.3f}s, ratio {min(t_py) / t_cli:.2f}; identical enclosures: {same}")
print("(best of", reps, "; the CLI time includes process start and reading the .npy)")
print(f"wheel {os.path.basename(wheel)}: {os.path.getsize(wheel) / 1e6:.2f} MB")
PY
