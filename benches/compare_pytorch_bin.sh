#!/usr/bin/env bash
# The same weights as safetensors and as a PyTorch pytorch_model.bin give the
# same certificate apart from the weight files' names and hashes:
#
#   benches/compare_pytorch_bin.sh [MODEL_DIR]
#
# Python's own pickle and zipfile write the .bin exactly as torch.save
# does (protocol 2, an OrderedDict of _rebuild_tensor_v2 calls on storages
# named by persistent ids, stored zip entries under archive/), through a stub
# `torch` module: no torch needed. Every tensor keeps its bytes. Both
# directories are certified and the certificates compared with model.path
# and model.files removed. Files go to target/pytorch-bin/.
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL="${1:-data/all-MiniLM-L6-v2}"
OUT=target/pytorch-bin
mkdir -p "$OUT"
cp "$MODEL/config.json" "$OUT/config.json"
python3 - "$MODEL/model.safetensors" "$OUT/pytorch_model.bin" <<'PY'
import collections, io, json, pickle, struct, sys, types, zipfile
src, dst = sys.argv[1:3]
torch = types.ModuleType("torch"); utils = types.ModuleType("torch._utils")
def _rebuild_tensor_v2(*a): raise NotImplementedError
_rebuild_tensor_v2.__module__, _rebuild_tensor_v2.__qualname__ = "torch._utils", "_rebuild_tensor_v2"
utils._rebuild_tensor_v2 = _rebuild_tensor_v2
storage = {}
for name, size in [("FloatStorage", 4), ("HalfStorage", 2), ("BFloat16Storage", 2), ("DoubleStorage", 8), ("LongStorage", 8)]:
    cls = type(name, (), {"__module__": "torch", "size": size}); cls.__qualname__ = name
    setattr(torch, name, cls); storage[name] = cls
torch._utils = utils
sys.modules["torch"], sys.modules["torch._utils"] = torch, utils
kind = {"F32": "FloatStorage", "F16": "HalfStorage", "BF16": "BFloat16Storage", "F64": "DoubleStorage", "I64": "LongStorage"}
blob = open(src, "rb").read()
(n,) = struct.unpack("<Q", blob[:8]); header = json.loads(blob[8:8 + n])
class Storage:
    def __init__(self, key, cls, data): self.key, self.cls, self.data = key, cls, data
class Tensor:
    def __init__(self, st, shape): self.st, self.shape = st, shape
    def __reduce__(self):
        stride = [1] * len(self.shape)
        for i in range(len(self.shape) - 2, -1, -1): stride[i] = stride[i + 1] * self.shape[i + 1]
        return (_rebuild_tensor_v2, (self.st, 0, tuple(self.shape), tuple(stride), False, collections.OrderedDict()))
state, storages = collections.OrderedDict(), []
for name, v in header.items():
    if name == "__metadata__": continue
    a, b = v["data_offsets"]; cls = storage[kind[v["dtype"]]]
    st = Storage(str(len(storages)), cls, blob[8 + n + a:8 + n + b]); storages.append(st)
    state[name] = Tensor(st, v["shape"])
class Pickler(pickle.Pickler):
    def persistent_id(self, obj):
        if isinstance(obj, Storage):
            return ("storage", obj.cls, obj.key, "cpu", len(obj.data) // obj.cls.size)
        return None
buf = io.BytesIO(); Pickler(buf, protocol=2).dump(state)
with zipfile.ZipFile(dst, "w", zipfile.ZIP_STORED) as z:
    z.writestr("archive/data.pkl", buf.getvalue())
    z.writestr("archive/byteorder", "little")
    for st in storages: z.writestr(f"archive/data/{st.key}", st.data)
    z.writestr("archive/version", "3\n")
print(f"wrote {dst}: {len(storages)} tensors, pickle {len(buf.getvalue())} bytes")
PY
cargo build --release -q
target/release/specbound certify "$MODEL" --json --quiet > "$OUT/cert-safetensors.json"
target/release/specbound certify "$OUT" --json --quiet > "$OUT/cert-bin.json"
python3 - "$OUT/cert-safetensors.json" "$OUT/cert-bin.json" <<'PY'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
for c in (a, b):
    print(f"{c['model']['path']}: {[f['file'] + ' ' + f['sha256'][:16] for f in c['model']['files']]}, B_ours [{c['bounds']['ours']['lo']!r}, {c['bounds']['ours']['hi']!r}]")
    del c["model"]["path"], c["model"]["files"]
print("identical apart from model.path and model.files:", a == b)
sys.exit(0 if a == b else 1)
PY
