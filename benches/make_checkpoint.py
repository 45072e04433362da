#!/usr/bin/env python3
"""Writes a random-weight checkpoint in a real format (a Hugging Face model
directory: config.json plus model.safetensors) with the shapes of a known
model, for benches/scale.sh.

    benches/make_checkpoint.py SHAPE LAYERS OUT_DIR [SEED]

SHAPE: `llama7b` (LLaMA-7B: hidden 4096, 32 heads of 128, gated FFN 11008,
float16) or `bert-large` (BERT-large: hidden 1024, 16 heads of 64, FFN 4096,
float32). Entries are N(0, 0.02^2) from numpy's PCG64 with the given seed
(default 0), rounded to the stored dtype; only the weights the proxies use
are written (no embeddings, norms or biases). Needs numpy.
"""
import json
import os
import struct
import sys

import numpy as np

SHAPES = {
    "llama7b": dict(
        config=dict(model_type="llama", architectures=["LlamaForCausalLM"], hidden_size=4096,
                    num_attention_heads=32, num_key_value_heads=32, intermediate_size=11008,
                    hidden_act="silu", torch_dtype="float16"),
        dtype=("F16", np.float16),
        tensors=lambda n, i: [
            ("model.layers.{l}.self_attn.q_proj.weight", (n, n)),
            ("model.layers.{l}.self_attn.k_proj.weight", (n, n)),
            ("model.layers.{l}.self_attn.v_proj.weight", (n, n)),
            ("model.layers.{l}.self_attn.o_proj.weight", (n, n)),
            ("model.layers.{l}.mlp.gate_proj.weight", (i, n)),
            ("model.layers.{l}.mlp.up_proj.weight", (i, n)),
            ("model.layers.{l}.mlp.down_proj.weight", (n, i)),
        ],
    ),
    "bert-large": dict(
        config=dict(model_type="bert", architectures=["BertModel"], hidden_size=1024,
                    num_attention_heads=16, intermediate_size=4096, hidden_act="gelu",
                    torch_dtype="float32"),
        dtype=("F32", np.float32),
        tensors=lambda n, i: [
            ("encoder.layer.{l}.attention.self.query.weight", (n, n)),
            ("encoder.layer.{l}.attention.self.key.weight", (n, n)),
            ("encoder.layer.{l}.attention.self.value.weight", (n, n)),
            ("encoder.layer.{l}.attention.output.dense.weight", (n, n)),
            ("encoder.layer.{l}.intermediate.dense.weight", (i, n)),
            ("encoder.layer.{l}.output.dense.weight", (n, i)),
        ],
    ),
}


def main():
    if len(sys.argv) not in (4, 5):
        sys.exit(__doc__)
    shape, layers, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    seed = int(sys.argv[4]) if len(sys.argv) == 5 else 0
    spec = SHAPES[shape]
    cfg = dict(spec["config"], num_hidden_layers=layers)
    n, i = cfg["hidden_size"], cfg["intermediate_size"]
    st_dtype, np_dtype = spec["dtype"]
    item = np.dtype(np_dtype).itemsize
    names = [(t.format(l=l), s) for l in range(layers) for t, s in spec["tensors"](n, i)]
    header, off = {}, 0
    for name, (r, c) in names:
        header[name] = dict(dtype=st_dtype, shape=[r, c], data_offsets=[off, off + r * c * item])
        off += r * c * item
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=1)
    rng = np.random.Generator(np.random.PCG64(seed))
    with open(os.path.join(out, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        for _name, (r, c) in names:
            w = (rng.standard_normal((r, c), dtype=np.float32) * np.float32(0.02)).astype(np_dtype)
            f.write(w.astype(w.dtype.newbyteorder("<")).tobytes())


if __name__ == "__main__":
    main()
