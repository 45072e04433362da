#!/usr/bin/env python3
"""Re-emit the weight matrices that the specbound proxies need from
all-MiniLM-L6-v2 as a smaller safetensors file, with the original bytes.

    scripts/bundle_minilm.py ../shared/models/all-MiniLM-L6-v2 data/all-MiniLM-L6-v2

Standard library only. Copies config.json unchanged and writes PROVENANCE.md
with the SHA-256 of the source file and of the result.
"""
import hashlib, json, os, shutil, struct, sys

src, dst = sys.argv[1], sys.argv[2]
os.makedirs(dst, exist_ok=True)
path = os.path.join(src, "model.safetensors")
with open(path, "rb") as f:
    blob = f.read()
src_sha = hashlib.sha256(blob).hexdigest()
(n,) = struct.unpack("<Q", blob[:8])
header = json.loads(blob[8 : 8 + n])
base = 8 + n
wanted = []
for layer in range(6):
    for t in ["attention.self.query", "attention.self.key", "attention.self.value",
              "attention.output.dense", "intermediate.dense", "output.dense"]:
        wanted.append(f"encoder.layer.{layer}.{t}.weight")
out_header, chunks, offset = {}, [], 0
for name in wanted:
    info = header[name]
    a, b = info["data_offsets"]
    data = blob[base + a : base + b]
    out_header[name] = {"dtype": info["dtype"], "shape": info["shape"], "data_offsets": [offset, offset + len(data)]}
    chunks.append(data)
    offset += len(data)
out_header["__metadata__"] = {"format": "pt", "source": "all-MiniLM-L6-v2 model.safetensors", "source_sha256": src_sha}
hj = json.dumps(out_header, separators=(",", ":")).encode()
hj += b" " * ((8 - len(hj) % 8) % 8)
out = os.path.join(dst, "model.safetensors")
with open(out + ".tmp", "wb") as f:
    f.write(struct.pack("<Q", len(hj)) + hj)
    for c in chunks:
        f.write(c)
os.replace(out + ".tmp", out)
shutil.copyfile(os.path.join(src, "config.json"), os.path.join(dst, "config.json"))
with open(out, "rb") as f:
    out_sha = hashlib.sha256(f.read()).hexdigest()
print(f"source {src_sha}\nbundle {out_sha}\n{len(wanted)} tensors, {offset} data bytes")
