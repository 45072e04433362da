#!/usr/bin/env python3
"""Writes tests/data/formats/: the bundled all-MiniLM-L6-v2 weights, cut to
one layer of hidden size 64 (2 heads of 32, as in MiniLM; FFN 256), as

  onnx/model.onnx + config.json      ONNX, written by onnx's own helper and
                                     numpy_helper, with torch.onnx export
                                     naming: Linear weights folded into
                                     `onnx::MatMul_N` stored [in, out] and fed
                                     to MatMul nodes named after the module
                                     (`/encoder/layer.0/attention/self/query/MatMul`),
                                     biases as `...bias`, the pooler a Gemm
                                     with transB=1 on `pooler.dense.weight`
                                     [out, in];
  onnx_external/model.onnx + model.onnx_data + config.json
                                     the same model saved by onnx with its
                                     tensors as external data;
  flax/flax_model.msgpack + config.json
                                     written by flax.serialization.to_bytes
                                     (transformers' FlaxBertModel layout:
                                     `kernel` [in, out], LayerNorm `scale`,
                                     `embedding`), with flax's chunk size
                                     lowered to 4 KiB so that every matrix is
                                     stored as a chunked array;
  safetensors/model.safetensors + config.json
                                     the same weights in PyTorch naming and
                                     layout (safetensors.numpy.save_file).

Run once (PyPI needed only here, never at test time):

  python3 -m venv target/fmtvenv
  target/fmtvenv/bin/pip install onnx msgpack numpy safetensors flax
  target/fmtvenv/bin/python scripts/make_format_fixtures.py
"""

import json
import os
import shutil

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from safetensors.numpy import load_file, save_file

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SRC = os.path.join(ROOT, "..", "shared", "models", "all-MiniLM-L6-v2")
OUT = os.path.join(ROOT, "tests", "data", "formats")
H, I, HEADS, POS = 64, 256, 2, 16


def cut():
    full = load_file(os.path.join(SRC, "model.safetensors"))
    w = {}
    for k, v in full.items():
        if not (k.startswith("encoder.layer.0.") or k.startswith("embeddings.") or k.startswith("pooler.")):
            continue
        if k in ("embeddings.position_ids", "embeddings.word_embeddings.weight",
                 "embeddings.token_type_embeddings.weight"):
            continue
        if k == "embeddings.position_embeddings.weight":
            w[k] = v[:POS, :H]
        elif v.ndim == 2:
            rows = I if "intermediate" in k else H
            cols = I if k.endswith("output.dense.weight") and "attention" not in k else H
            w[k] = v[:rows, :cols]
        else:
            n = I if "intermediate" in k else H
            w[k] = v[:n]
    return {k: np.ascontiguousarray(v, dtype=np.float32) for k, v in w.items()}


def config():
    with open(os.path.join(SRC, "config.json")) as f:
        c = json.load(f)
    c.update(hidden_size=H, intermediate_size=I, num_attention_heads=HEADS,
             num_hidden_layers=1, max_position_embeddings=POS)
    return c


LINEARS = [
    "attention/self/query", "attention/self/key", "attention/self/value",
    "attention/output/dense", "intermediate/dense", "output/dense",
]


def onnx_model(w):
    inits, nodes = [], []
    x = "hidden_states"
    counter = [100]

    def linear(path, inp):
        """MatMul on a folded [in, out] constant, then Add of the bias, as torch.onnx writes nn.Linear on 3-D input."""
        p = "encoder.layer.0." + path.replace("/", ".")
        counter[0] += 1
        wname = f"onnx::MatMul_{counter[0]}"
        inits.append(numpy_helper.from_array(np.ascontiguousarray(w[p + ".weight"].T), wname))
        inits.append(numpy_helper.from_array(w[p + ".bias"], p + ".bias"))
        node = f"/encoder/layer.0/{path}"
        mm = f"{node}/MatMul_output_0"
        nodes.append(helper.make_node("MatMul", [inp, wname], [mm], name=f"{node}/MatMul"))
        out = f"{node}/Add_output_0"
        nodes.append(helper.make_node("Add", [p + ".bias", mm], [out], name=f"{node}/Add"))
        return out

    def layernorm(p, inp):
        node = "/" + p.replace(".", "/")
        for s in ("weight", "bias"):
            inits.append(numpy_helper.from_array(w[f"{p}.{s}"], f"{p}.{s}"))
        out = f"{node}/LayerNormalization_output_0"
        nodes.append(helper.make_node("LayerNormalization", [inp, f"{p}.weight", f"{p}.bias"], [out],
                                      name=f"{node}/LayerNormalization", axis=-1, epsilon=1e-12))
        return out

    inits.append(numpy_helper.from_array(w["embeddings.position_embeddings.weight"],
                                         "embeddings.position_embeddings.weight"))
    h = layernorm("embeddings.LayerNorm", x)
    q = linear("attention/self/query", h)
    k = linear("attention/self/key", h)
    v = linear("attention/self/value", h)
    qk = "/encoder/layer.0/attention/self/Add_output_0"
    nodes.append(helper.make_node("Add", [q, k], [qk], name="/encoder/layer.0/attention/self/Add"))
    ctx = "/encoder/layer.0/attention/self/Add_1_output_0"
    nodes.append(helper.make_node("Add", [qk, v], [ctx], name="/encoder/layer.0/attention/self/Add_1"))
    a = linear("attention/output/dense", ctx)
    a = layernorm("encoder.layer.0.attention.output.LayerNorm", a)
    f = linear("intermediate/dense", a)
    o = linear("output/dense", f)
    o = layernorm("encoder.layer.0.output.LayerNorm", o)
    # The pooler on the first token: a 2-D input, so torch writes Gemm with transB=1.
    first = "/pooler/Gather_output_0"
    inits.append(numpy_helper.from_array(np.array(0, dtype=np.int64), "/pooler/Constant_output_0"))
    nodes.append(helper.make_node("Gather", [o, "/pooler/Constant_output_0"], [first], name="/pooler/Gather", axis=1))
    for s in ("weight", "bias"):
        inits.append(numpy_helper.from_array(w[f"pooler.dense.{s}"], f"pooler.dense.{s}"))
    pooled = "/pooler/dense/Gemm_output_0"
    nodes.append(helper.make_node("Gemm", [first, "pooler.dense.weight", "pooler.dense.bias"], [pooled],
                                  name="/pooler/dense/Gemm", alpha=1.0, beta=1.0, transB=1))
    graph = helper.make_graph(
        nodes, "main_graph",
        [helper.make_tensor_value_info(x, TensorProto.FLOAT, ["batch_size", "sequence_length", H])],
        [helper.make_tensor_value_info(o, TensorProto.FLOAT, ["batch_size", "sequence_length", H]),
         helper.make_tensor_value_info(pooled, TensorProto.FLOAT, ["batch_size", H])],
        initializer=inits)
    m = helper.make_model(graph, producer_name="pytorch", producer_version="2.1.0",
                          opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(m)
    return m


def flax_tree(w):
    """transformers' FlaxBertModel parameter tree."""
    tree = {}

    def put(path, value):
        d = tree
        for p in path[:-1]:
            d = d.setdefault(p, {})
        d[path[-1]] = value

    for k, v in w.items():
        parts = k.split(".")
        last = parts[-1]
        if "LayerNorm" in parts:
            leaf = "scale" if last == "weight" else "bias"
        elif parts[-2].endswith("_embeddings"):
            leaf = "embedding"
        elif last == "weight":
            leaf, v = "kernel", np.ascontiguousarray(v.T)
        else:
            leaf = last
        put(parts[:-1] + [leaf], v)
    return tree


def main():
    w = cut()
    cfg = config()
    if os.path.exists(OUT):
        shutil.rmtree(OUT)
    for d in ("onnx", "onnx_external", "flax", "safetensors"):
        os.makedirs(os.path.join(OUT, d))
        with open(os.path.join(OUT, d, "config.json"), "w") as f:
            json.dump(cfg, f, indent=2)
    save_file(w, os.path.join(OUT, "safetensors", "model.safetensors"), metadata={"format": "pt"})
    m = onnx_model(w)
    onnx.save(m, os.path.join(OUT, "onnx", "model.onnx"))
    onnx.save(m, os.path.join(OUT, "onnx_external", "model.onnx"), save_as_external_data=True,
              all_tensors_to_one_file=True, location="model.onnx_data", size_threshold=1024)

    import flax.serialization as fs
    fs.MAX_CHUNK_SIZE = 4096
    with open(os.path.join(OUT, "flax", "flax_model.msgpack"), "wb") as f:
        f.write(fs.to_bytes(flax_tree(w)))
    for root, _, files in os.walk(OUT):
        for n in sorted(files):
            p = os.path.join(root, n)
            print(os.path.relpath(p, ROOT), os.path.getsize(p))


if __name__ == "__main__":
    main()
