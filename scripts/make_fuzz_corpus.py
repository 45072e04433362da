#!/usr/bin/env python3
"""Writes the seed corpus of the fuzz targets, fuzz/corpus/<target>/, from
small valid inputs built here byte by byte (standard library only) and the
committed test files (tests/data/hostile, tests/data/torch). The corpus is
committed; tests/fuzz_replay.rs replays it and mutations of it in CI, and
`cargo fuzz run <target> fuzz/corpus/<target>` starts from it. Rerun after
changing this script: python3 scripts/make_fuzz_corpus.py"""

import json
import os
import shutil
import struct
import subprocess
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "fuzz", "corpus")
H, I = 4, 8
BERT = [
    ("attention.self.query", H, H),
    ("attention.self.key", H, H),
    ("attention.self.value", H, H),
    ("attention.output.dense", H, H),
    ("intermediate.dense", I, H),
    ("output.dense", H, I),
]
CONFIG = {"model_type": "bert", "num_hidden_layers": 1, "hidden_size": H,
          "num_attention_heads": 2, "intermediate_size": I, "hidden_act": "gelu"}


def values(r, c, seed):
    return [((k * 7 + seed * 3) % 11) / 8.0 - 0.625 for k in range(r * c)]


def f32(vs):
    return struct.pack("<%df" % len(vs), *vs)


def put(target, name, data):
    d = os.path.join(OUT, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def safetensors(tensors):
    header, data = {}, b""
    for name, (r, c), raw in tensors:
        header[name] = {"dtype": "F32", "shape": [r, c],
                        "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + data


def bert_tensors():
    return [("encoder.layer.0.%s.weight" % n, (r, c), f32(values(r, c, k)))
            for k, (n, r, c) in enumerate(BERT)]


def varint(v):
    out = b""
    while True:
        b = v & 0x7F
        v >>= 7
        if v == 0:
            return out + bytes([b])
        out += bytes([b | 0x80])


def pb_len(tag, b):
    return varint(tag << 3 | 2) + varint(len(b)) + b


def pb_int(tag, v):
    return varint(tag << 3) + varint(v)


def onnx_tensor(name, dims, raw):
    return (pb_len(1, b"".join(varint(d) for d in dims)) + pb_int(2, 1)
            + pb_len(8, name.encode()) + pb_len(9, raw))


def onnx_node(op, name, inputs, output):
    return (b"".join(pb_len(1, i.encode()) for i in inputs) + pb_len(2, output.encode())
            + pb_len(3, name.encode()) + pb_len(4, op.encode()))


def onnx_model(nodes, inits, inputs=("x",)):
    g = b"".join(pb_len(1, n) for n in nodes) + pb_len(2, b"g")
    g += b"".join(pb_len(5, t) for t in inits)
    g += b"".join(pb_len(11, pb_len(1, i.encode())) for i in inputs)
    return pb_int(1, 8) + pb_len(7, g)


def mp_str(s):
    b = s.encode()
    return (bytes([0xA0 | len(b)]) if len(b) < 32 else bytes([0xD9, len(b)])) + b


def mp_map(entries):
    return bytes([0x80 | len(entries)]) + b"".join(mp_str(k) + v for k, v in entries)


def mp_array(shape, raw):
    p = bytes([0x93, 0x90 | len(shape)]) + b"".join(b"\xcf" + struct.pack(">Q", d) for d in shape)
    p += mp_str("float32") + b"\xc6" + struct.pack(">I", len(raw)) + raw
    return b"\xc9" + struct.pack(">I", len(p)) + b"\x01" + p


def npy(r, c, raw):
    hdr = "{'descr': '<f4', 'fortran_order': False, 'shape': (%d, %d), }" % (r, c)
    hdr += " " * (-(10 + len(hdr) + 1) % 64) + "\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(hdr)) + hdr.encode() + raw


def main():
    shutil.rmtree(OUT, ignore_errors=True)
    hostile = os.path.join(ROOT, "tests", "data", "hostile")
    for f in sorted(os.listdir(hostile)):
        src = open(os.path.join(hostile, f), "rb").read()
        kind = {"st": "safetensors", "gguf": "gguf", "npy": "npy", "cert": "certificate"}
        k = kind.get(f.split("_")[0])
        if k and len(src) <= 4096:
            put(k, f, src)
    put("safetensors", "bert.safetensors", safetensors(bert_tensors()))
    put("safetensors", "w.safetensors", safetensors([("w", (2, 3), f32(values(2, 3, 1)))]))
    put("npy", "w.npy", npy(3, 2, f32(values(3, 2, 2))))
    # ONNX: a MatMul weight named after its node, one through a Transpose.
    w = onnx_tensor("onnx::MatMul_1", [H, H], f32(values(H, H, 0)))
    v = onnx_tensor("v", [H, H], f32(values(H, H, 3)))
    put("onnx", "matmul.onnx", onnx_model(
        [onnx_node("MatMul", "/encoder/layer.0/attention/self/query/MatMul",
                   ["x", "onnx::MatMul_1"], "y"),
         onnx_node("Transpose", "/t", ["v"], "vt"),
         onnx_node("MatMul", "/encoder/layer.0/attention/self/value/MatMul", ["y", "vt"], "z")],
        [w, v]))
    # ONNX: an int8 weight dequantized per axis (DequantizeLinear, axis 0,
    # scales and zero points), fed to a MatMul.
    q = (pb_len(1, varint(H) + varint(H)) + pb_int(2, 3) + pb_len(8, b"w_quantized")
         + pb_len(9, bytes((k * 37) % 256 for k in range(H * H))))
    sc = onnx_tensor("w_scale", [H], f32([0.5, 0.25, 2.0 ** -149, 3.0]))
    zp = (pb_len(1, varint(H)) + pb_int(2, 3) + pb_len(8, b"w_zero_point")
          + pb_len(9, bytes([0, 1, 128, 127])))
    axis = pb_len(5, pb_len(1, b"axis") + pb_int(3, 0) + pb_int(20, 2))
    put("onnx", "dequantize.onnx", onnx_model(
        [onnx_node("DequantizeLinear", "dq", ["w_quantized", "w_scale", "w_zero_point"], "w")
         + axis,
         onnx_node("MatMul", "/encoder/layer.0/attention/self/query/MatMul", ["x", "w"], "y")],
        [q, sc, zp]))
    ext = (pb_len(1, varint(2) + varint(2)) + pb_int(2, 1) + pb_len(8, b"w")
           + pb_len(13, pb_len(1, b"location") + pb_len(2, b"w.bin")) + pb_int(14, 1))
    put("onnx", "external.onnx", onnx_model([], [ext]))
    # Flax: a kernel ([in, out]) under nested keys, and a chunked array.
    def nest(name, leaf):
        for part in reversed(name.split(".")):
            leaf = mp_map([(part, leaf)])
        return leaf

    put("flax", "query.msgpack", nest("encoder.layer.0.attention.self.query",
                                     mp_map([("kernel", mp_array([H, H], f32(values(H, H, 0))))])))
    chunked = mp_map([("__msgpack_chunked_array__", b"\xc3"),
                      ("shape", mp_map([("0", b"\x02"), ("1", b"\x03")])),
                      ("chunks", mp_map([("0", mp_array([4], f32(values(1, 4, 1)))),
                                         ("1", mp_array([2], f32(values(1, 2, 2))))]))])
    put("flax", "chunked.msgpack", mp_map([("w", chunked)]))
    # PyTorch: the committed small checkpoints; their pickles for the scanner.
    torch = os.path.join(ROOT, "tests", "data", "torch")
    for f in ["tensor_2d.pt", "state_dict.pt", "simple_legacy.pt", "float16.pt", "protocol4.pt"]:
        src = os.path.join(torch, f)
        put("pytorch", f, open(src, "rb").read())
        if zipfile.is_zipfile(src):
            with zipfile.ZipFile(src) as z:
                for n in z.namelist():
                    if n.endswith("data.pkl"):
                        put("pickle", f.replace(".pt", ".pkl"), z.read(n))
    put("index", "index", json.dumps({"metadata": {}, "weight_map": {
        "encoder.layer.0.attention.self.query.weight": "model-00001-of-00001.safetensors"}}).encode()
        + b"\0" + json.dumps(CONFIG).encode())
    # A model in memory (layout: fuzz_memory in fuzz/bodies.rs).
    m = bytes([len(BERT)])
    for k, (n, r, c) in enumerate(BERT):
        m += bytes([k, 0, 2]) + struct.pack(">HH", r, c)
    for k, (n, r, c) in enumerate(BERT):
        m += f32(values(r, c, k))
    put("memory", "bert", m + json.dumps(CONFIG).encode())
    put("memory", "w", bytes([1, 7, 3, 2]) + struct.pack(">HH", 2, 2) + struct.pack("<4d", 1, 2, 3, 4))
    # A certificate of the BERT above, when the binary is built.
    binary = os.path.join(ROOT, "target", "checked", "specbound")
    if os.path.exists(binary):
        import tempfile
        with tempfile.TemporaryDirectory() as d:
            open(os.path.join(d, "model.safetensors"), "wb").write(safetensors(bert_tensors()))
            json.dump(CONFIG, open(os.path.join(d, "config.json"), "w"))
            out = os.path.join(d, "c.json")
            subprocess.run([binary, "certify", d, "--measures", "--out", out, "--quiet"],
                           check=True, stdout=subprocess.DEVNULL)
            put("certificate", "bert.json", open(out, "rb").read())


if __name__ == "__main__":
    main()
