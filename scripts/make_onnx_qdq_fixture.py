#!/usr/bin/env python3
"""Writes tests/data/formats/onnx_qdq/ (model.onnx + config.json) and
tests/data/formats/onnx_qdq_expected/ (model.safetensors + config.json)
from tests/data/formats/onnx/model.onnx, the legacy torch.onnx export of a
one-layer cut of MiniLM (hidden 64):

  onnx_qdq/model.onnx
      the same graph with every Linear weight quantized to 8 bits and fed
      through DequantizeLinear (weight-only QDQ, as onnxruntime's
      quantize_static writes weights in QDQ format), written with the onnx
      package's helpers and checked by onnx.checker:
        query   int8, per channel (axis 1), symmetric, zero points 0
        key     int8, per tensor, asymmetric zero point
        value   uint8, per tensor, asymmetric zero point
        output  uint8, per channel (axis 1), a zero point per channel
        ff1     int8, per channel (axis 0), no zero point input
        ff2     int8, per tensor (a scalar scale), stored transposed and fed
                through DequantizeLinear -> Transpose(perm 1,0) -> MatMul
        pooler  int8 `pooler.dense.weight_quantized`, per channel (axis 0),
                into the Gemm (transB = 1), onnxruntime's naming
  onnx_qdq_expected/model.safetensors
      the weights as the graph computes them: the DequantizeLinear (and
      Transpose) outputs evaluated by onnx's reference evaluator
      (onnx.reference.ReferenceEvaluator, binary32 arithmetic), stored as
      PyTorch stores Linear weights, [out, in], float32.

Run once (PyPI needed only here, never at test time):

  python3 -m venv target/py-venv
  target/py-venv/bin/pip install onnx numpy   # onnxruntime too, to cross-check
  target/py-venv/bin/python scripts/make_onnx_qdq_fixture.py
"""

import json
import os
import shutil
import struct

import numpy as np
import onnx
from onnx import helper, numpy_helper
from onnx.reference import ReferenceEvaluator

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FORMATS = os.path.join(ROOT, "tests", "data", "formats")

# MatMul/Gemm node name -> (PyTorch name, signed, axis or None, zero point?, via Transpose?)
PLAN = {
    "/encoder/layer.0/attention/self/query/MatMul":
        ("encoder.layer.0.attention.self.query.weight", True, 1, "zero", False),
    "/encoder/layer.0/attention/self/key/MatMul":
        ("encoder.layer.0.attention.self.key.weight", True, None, "asym", False),
    "/encoder/layer.0/attention/self/value/MatMul":
        ("encoder.layer.0.attention.self.value.weight", False, None, "asym", False),
    "/encoder/layer.0/attention/output/dense/MatMul":
        ("encoder.layer.0.attention.output.dense.weight", False, 1, "asym", False),
    "/encoder/layer.0/intermediate/dense/MatMul":
        ("encoder.layer.0.intermediate.dense.weight", True, 0, None, False),
    "/encoder/layer.0/output/dense/MatMul":
        ("encoder.layer.0.output.dense.weight", True, None, "zero", True),
    "/pooler/dense/Gemm": ("pooler.dense.weight", True, 0, "zero", False),
}


def quantize(w, signed, axis, zp):
    """(q, scale, zero point) of w: float32 scales, 8-bit integers."""
    lo, hi = (-128, 127) if signed else (0, 255)
    itype = np.int8 if signed else np.uint8
    red = None if axis is None else 1 - axis
    wmin = np.minimum(w.min(axis=red), 0).astype(np.float64)
    wmax = np.maximum(w.max(axis=red), 0).astype(np.float64)
    if zp == "asym" or not signed:
        scale = ((wmax - wmin) / (hi - lo)).astype(np.float32)
        z = np.clip(np.round(lo - wmin / scale), lo, hi)
    else:
        scale = (np.maximum(-wmin, wmax) / hi).astype(np.float32)
        z = np.zeros_like(scale, dtype=np.float64)
    shape = [1, 1]
    if axis is not None:
        shape[axis] = -1
    q = np.clip(np.round(w / scale.reshape(shape) + z.reshape(shape)), lo, hi).astype(itype)
    return q, np.asarray(scale, np.float32), np.asarray(z, itype)


def write_safetensors(path, tensors):
    header, blobs, off = {}, [], 0
    for name, a in tensors.items():
        b = np.ascontiguousarray(a, dtype="<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def main():
    model = onnx.load(os.path.join(FORMATS, "onnx", "model.onnx"))
    g = model.graph
    inits = {i.name: i for i in g.initializer}
    dq_nodes, new_inits, expected_outputs, shapes = [], [], {}, {}
    for node in g.node:
        if node.name not in PLAN:
            continue
        torch_name, signed, axis, zp, via_t = PLAN[node.name]
        b = node.input[1]
        w = numpy_helper.to_array(inits[b])
        stored = w.T.copy() if via_t else w
        q, scale, z = quantize(stored, signed, axis, zp)
        base = b
        qn, sn, zn = f"{base}_quantized", f"{base}_scale", f"{base}_zero_point"
        new_inits += [numpy_helper.from_array(q, qn), numpy_helper.from_array(scale, sn)]
        inputs = [qn, sn]
        if zp is not None:
            new_inits.append(numpy_helper.from_array(z, zn))
            inputs.append(zn)
        attrs = {} if axis is None else {"axis": axis}
        out = f"{base}_dequantized"
        dq_nodes.append(helper.make_node("DequantizeLinear", inputs, [out], name=f"{base}_DequantizeLinear", **attrs))
        if via_t:
            t_out = f"{base}_transposed"
            dq_nodes.append(helper.make_node("Transpose", [out], [t_out], name=f"{base}_Transpose", perm=[1, 0]))
            out = t_out
        node.input[1] = out
        # The float weight as PyTorch stores it: MatMul's B is [in, out];
        # the Gemm's (transB = 1) is [out, in].
        expected_outputs[out] = (torch_name, node.op_type == "MatMul")
        shapes[out] = list(w.shape)
        g.initializer.remove(inits[b])
    g.initializer.extend(new_inits)
    nodes = dq_nodes + list(g.node)
    del g.node[:]
    g.node.extend(nodes)
    onnx.checker.check_model(model)
    out_dir = os.path.join(FORMATS, "onnx_qdq")
    shutil.rmtree(out_dir, ignore_errors=True)
    os.makedirs(out_dir)
    onnx.save(model, os.path.join(out_dir, "model.onnx"))
    shutil.copy(os.path.join(FORMATS, "onnx", "config.json"), out_dir)

    # The dequantized weights as onnx's reference evaluator computes them.
    sub = helper.make_graph(
        dq_nodes, "dq", [],
        [helper.make_tensor_value_info(o, onnx.TensorProto.FLOAT, shapes[o]) for o in expected_outputs],
        new_inits)
    # onnx.reference implements DequantizeLinear from opset 19 on: for
    # 8-bit weights and a float32 scale, 19 defines it as 13 does.
    sub_model = helper.make_model(sub, opset_imports=[helper.make_opsetid("", 19)])
    onnx.checker.check_model(sub_model)
    values = ReferenceEvaluator(sub_model).run(None, {})
    try:  # The same bits from onnxruntime, where it is installed.
        import onnxruntime
        sess = onnxruntime.InferenceSession(sub_model.SerializeToString(),
                                            providers=["CPUExecutionProvider"])
        for a, b in zip(sess.run(None, {}), values):
            assert np.array_equal(a.view(np.uint32), b.view(np.uint32))
        print("onnxruntime", onnxruntime.__version__, "gives the same bits")
    except ImportError:
        pass
    expected = {}
    for (out, (torch_name, in_out)), v in zip(expected_outputs.items(), values):
        assert v.dtype == np.float32, v.dtype
        expected[torch_name] = v.T if in_out else v
    exp_dir = os.path.join(FORMATS, "onnx_qdq_expected")
    shutil.rmtree(exp_dir, ignore_errors=True)
    os.makedirs(exp_dir)
    write_safetensors(os.path.join(exp_dir, "model.safetensors"), expected)
    shutil.copy(os.path.join(FORMATS, "onnx", "config.json"), exp_dir)
    print("onnx", onnx.__version__, "numpy", np.__version__)


if __name__ == "__main__":
    main()
