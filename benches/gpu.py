"""The GPU route's check on a machine with a CUDA GPU and PyTorch (issue 29),
one run of at most 10 minutes, everything logged to $OUT/gpu.log:

  python3 benches/gpu.py PATH/TO/specbound      (a binary built with --features cuda)

1. the LLaMA-7B-shaped float16 layer of benches/scale.sh (same generator, seed 0):
   `certify --device cuda` and `--device cpu` (all cores), torch float64 Gram +
   eigvalsh on the GPU beside them;
2. every interval of the GPU certificate against the CPU one: they must overlap
   (both contain the exact value) and the GPU's may be at most 2x as wide;
3. `verify --model` of the GPU certificate, on the CPU;
4. a 32-layer 7B-shaped float16 model generated here, certified end to end on the GPU.

The CUDA libraries are those PyTorch ships (site-packages/nvidia/*/lib), put on
LD_LIBRARY_PATH for specbound; libcuda.so.1 comes from the driver.
"""
import glob, json, os, struct, subprocess, sys, time
import numpy as np

OUT = os.environ.get("OUT", "/tmp/out")
os.makedirs(OUT, exist_ok=True)
BIN = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "target/release/specbound")
N, H, F = 4096, 32, 11008


def log(*a):
    print(*a, flush=True)
    with open(os.path.join(OUT, "gpu.log"), "a") as f:
        print(*a, file=f)


def write_model(d, layers, seed=0):
    """A LLaMA-shaped float16 checkpoint (the generator of benches/scale.sh)."""
    os.makedirs(d, exist_ok=True)
    rng = np.random.default_rng(seed)
    shapes = [("self_attn.q_proj", (N, N)), ("self_attn.k_proj", (N, N)), ("self_attn.v_proj", (N, N)),
              ("self_attn.o_proj", (N, N)), ("mlp.gate_proj", (F, N)), ("mlp.up_proj", (F, N)),
              ("mlp.down_proj", (N, F))]
    hdr, off = {}, 0
    for l in range(layers):
        for name, shp in shapes:
            n = shp[0] * shp[1] * 2
            hdr[f"model.layers.{l}.{name}.weight"] = {"dtype": "F16", "shape": list(shp), "data_offsets": [off, off + n]}
            off += n
    h = json.dumps(hdr).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(os.path.join(d, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for l in range(layers):
            for name, shp in shapes:
                f.write((rng.standard_normal(shp) * 0.02).astype(np.float16).tobytes())
    json.dump({"model_type": "llama", "hidden_size": N, "num_attention_heads": H, "num_key_value_heads": H,
               "num_hidden_layers": layers, "intermediate_size": F, "torch_dtype": "float16"},
              open(os.path.join(d, "config.json"), "w"))


def cuda_env():
    import torch
    libs = sorted({os.path.dirname(p) for p in glob.glob(os.path.join(
        os.path.dirname(torch.__file__), "..", "nvidia", "*", "lib", "*.so*"))})
    libs.append(os.path.join(os.path.dirname(torch.__file__), "lib"))
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = ":".join(libs + [env.get("LD_LIBRARY_PATH", "")])
    return env


def run(args, env, timeout):
    t0 = time.time()
    r = subprocess.run([BIN, *args], env=env, capture_output=True, text=True, timeout=timeout)
    return r, time.time() - t0


def intervals(node, path=""):
    """Every {lo, hi} interval of a certificate, by its JSON path."""
    out = {}
    if isinstance(node, dict):
        if "lo" in node and "hi" in node and isinstance(node["lo"], (int, float)):
            out[path] = (float(node["lo"]), float(node["hi"]))
        for k, v in node.items():
            out.update(intervals(v, f"{path}/{k}"))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out.update(intervals(v, f"{path}/{i}"))
    return out


def compare(gpu_path, cpu_path):
    g, c = intervals(json.load(open(gpu_path))), intervals(json.load(open(cpu_path)))
    common = sorted(set(g) & set(c))
    disjoint = [p for p in common if g[p][1] < c[p][0] or c[p][1] < g[p][0]]
    wider = [p for p in common if (g[p][1] - g[p][0]) > 2 * (c[p][1] - c[p][0]) and c[p][1] > c[p][0]]
    log(f"compare: {len(common)} intervals in both; disjoint {len(disjoint)} {disjoint[:3]}; "
        f"GPU > 2x wider {len(wider)} {[(p, g[p], c[p]) for p in wider[:3]]}")
    return not disjoint and not wider


def main():
    env = cuda_env()
    layer, model = "/tmp/llama7b-1", "/tmp/llama7b-32"
    t0 = time.time()
    write_model(layer, 1)
    log(f"layer generated in {time.time() - t0:.1f} s; cpus {os.cpu_count()}")
    r, t = run(["certify", layer, "--device", "cuda", "--out", "/tmp/gpu.json"], env, 300)
    log(f"certify --device cuda (layer): rc {r.returncode} {t:.2f} s | {r.stderr.strip()[-400:]}")
    r2, t2 = run(["certify", layer, "--device", "cpu", "--out", "/tmp/cpu.json"], env, 300)
    log(f"certify --device cpu (layer, {os.cpu_count()} threads): rc {r2.returncode} {t2:.2f} s")
    import torch
    mats = []
    from safetensors.numpy import load_file  # noqa: E402 (torch images ship safetensors)
    w = load_file(os.path.join(layer, "model.safetensors"))
    p = "model.layers.0."
    mats.append(np.hstack([w[p + "mlp.gate_proj.weight"].T, w[p + "mlp.up_proj.weight"].T]).astype(np.float64))
    mats.append(w[p + "mlp.down_proj.weight"].T.astype(np.float64))
    ts = [torch.from_numpy(np.ascontiguousarray(m)).cuda() for m in mats]
    torch.cuda.synchronize()
    best = 1e9
    for _ in range(3):
        s = time.time()
        for m in ts:
            g = m @ m.T if m.shape[0] < m.shape[1] else m.T @ m
            torch.linalg.eigvalsh(g)
        torch.cuda.synchronize()
        best = min(best, time.time() - s)
    log(f"torch float64 Gram + eigvalsh on the GPU (M_in, M_out): {best:.3f} s; specbound/torch {t / best:.1f}x")
    if r.returncode == 0 and r2.returncode == 0:
        ok = compare("/tmp/gpu.json", "/tmp/cpu.json")
        v, tv = run(["verify", "/tmp/gpu.json", "--model", layer], env, 300)
        log(f"verify --model of the GPU certificate on the CPU: rc {v.returncode} {tv:.1f} s {v.stdout.strip()[-200:]}")
        log(f"GPU certificate device: {json.load(open('/tmp/gpu.json'))['tool'].get('device')}; intervals ok: {ok}")
    t0 = time.time()
    write_model(model, 32)
    log(f"32-layer model generated in {time.time() - t0:.1f} s")
    r, t = run(["certify", model, "--device", "cuda", "--out", "/tmp/gpu32.json"], env, 420)
    log(f"certify --device cuda (32 layers): rc {r.returncode} {t:.1f} s | {r.stderr.strip()[-300:]}")


if __name__ == "__main__":
    main()
