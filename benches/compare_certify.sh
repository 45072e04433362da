#!/usr/bin/env bash
# Side-by-side wall time: the whole certified MiniLM certificate
# (`specbound certify`, default precision, 6 layers, 144 per-head matrices,
# 12 feed-forward matrices, both bounds) versus an uncertified float64 numpy
# computation of the same proxies done the way the authors' scripts do it:
# every QK and V_tilde formed as an N x N matrix, singular values by
# numpy.linalg.svd, loading included. One run, both figures and the ratio.
#
#   benches/compare_certify.sh [MODEL_DIR] [REPEATS]
#
# numpy is installed into target/bench-venv on first use (needs PyPI).
# OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE are unset for the numpy side only;
# numpy uses 2 BLAS threads, specbound both cores.
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL="${1:-data/all-MiniLM-L6-v2}"
REPEATS="${2:-3}"
VENV=target/bench-venv
if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q numpy threadpoolctl
fi
cargo build --release -q
env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE "$VENV/bin/python" - "$MODEL" "$REPEATS" <<'PY'
import json, math, struct, subprocess, sys, time
import numpy as np

model, reps = sys.argv[1], int(sys.argv[2])

def load(path):
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    hdr = json.loads(blob[8:8 + n])
    out = {}
    for k, v in hdr.items():
        if k == "__metadata__" or v["dtype"] != "F32":
            continue
        a, b = v["data_offsets"]
        out[k] = np.frombuffer(blob[8 + n + a:8 + n + b], dtype="<f4").reshape(v["shape"]).astype(np.float64)
    return out

def numpy_proxies():
    cfg = json.load(open(f"{model}/config.json"))
    L, N, H = cfg["num_hidden_layers"], cfg["hidden_size"], cfg["num_attention_heads"]
    dh = N // H
    w = load(f"{model}/model.safetensors")
    pre = "bert." if any(k.startswith("bert.") for k in w) else ""
    g = lambda l, t: w[f"{pre}encoder.layer.{l}.{t}.weight"]
    stats = {}
    for l in range(L):
        q, k, v, o = g(l, "attention.self.query"), g(l, "attention.self.key"), g(l, "attention.self.value"), g(l, "attention.output.dense")
        mats = {}
        for h in range(H):
            s = slice(h * dh, (h + 1) * dh)
            mats[("QK", h)] = q[s].T @ k[s]
            mats[("V_tilde", h)] = v[s].T @ o.T[s]
        mats[("M_in", -1)] = g(l, "intermediate.dense").T
        mats[("M_out", -1)] = g(l, "output.dense").T
        for key, m in mats.items():
            sv = np.linalg.svd(m, compute_uv=False)
            rank = int((sv > 1e-10 * min(m.shape) * max(sv[0], 1)).sum())
            stats[(l,) + key] = (sv, rank, np.linalg.norm(m, axis=0).sum())
    c2 = lambda l, t, h=-1: stats[(l, t, h)][0][0]
    factor = [1.13 * c2(k, "M_in") * c2(k, "M_out") * sum(c2(k, "V_tilde", h) * (1 + 4 * c2(k, "QK", h)) for h in range(H)) for k in range(L)]
    alpha = [math.prod(factor[l + 1:]) for l in range(L)]
    m = math.ceil(L + math.log(max(N, 2)))
    ours, inner = math.sqrt(L), 1.0
    for l in range(L):
        cin, cout = c2(l, "M_in"), c2(l, "M_out")
        xi = 0.0
        for h in range(H):
            xi += (cout * cin * c2(l, "V_tilde", h) * stats[(l, "QK", h)][2]) ** (2 / 3)
            xi += (cout * cin * stats[(l, "V_tilde", h)][2]) ** (2 / 3)
        xi += (cout * stats[(l, "M_in", -1)][2]) ** (2 / 3) + stats[(l, "M_out", -1)][2] ** (2 / 3)
        inner += alpha[l] ** (2 / 3) * xi
        for (ll, t, h), (sv, rank, _) in stats.items():
            if ll != l:
                continue
            gamma = {"QK": lambda: 2 * c2(l, "V_tilde", h) * cout * cin, "V_tilde": lambda: cout * cin, "M_in": lambda: cout, "M_out": lambda: 1.0}[t]()
            s = gamma * alpha[l] * L
            best = min((rank if k == 0 else (sv ** (k / m)).sum()) ** (1 / (k / m + 2)) * s ** ((k / m) / (k / m + 2)) * N ** ((k / m + 1) / (k / m + 2)) for k in range(2 * m + 1))
            ours += best
    return ours, inner ** 1.5

t_np, t_sb = [], []
for _ in range(reps):
    t = time.perf_counter(); ours, edel = numpy_proxies(); t_np.append(time.perf_counter() - t)
for _ in range(reps):
    t = time.perf_counter()
    out = subprocess.run(["target/release/specbound", "certify", model, "--json"], check=True, capture_output=True)
    t_sb.append(time.perf_counter() - t)
cert = json.loads(out.stdout)
b = cert["bounds"]
print(f"numpy float64 (authors' way, uncertified): {min(t_np):.3f} s  B_ours {ours:.12e}  B_Edel {edel:.12e}")
print(f"specbound certify (certified):            {min(t_sb):.3f} s  B_ours [{b['ours']['lo']:.12e}, {b['ours']['hi']:.12e}]")
print(f"{'':44s}B_Edel [{b['edelman']['lo']:.12e}, {b['edelman']['hi']:.12e}]")
print(f"ratio specbound / numpy: {min(t_sb) / min(t_np):.2f}  (best of {reps}; both include loading)")
PY
