#!/usr/bin/env python3
"""Writes tests/data/formats/onnx_dynamo/ and tests/data/formats/onnx_int8/
from the one-layer MiniLM cut of tests/data/formats/safetensors:

  onnx_dynamo/onnx/model.onnx + model.onnx.data + config.json
      transformers' BertModel with those weights (the word embeddings,
      which the cut lacks, seeded random with a vocabulary of 16), exported
      by torch.onnx.export's default exporter (dynamo=True, torch 2.15):
      Linear weights are constants `val_N` stored [in, out], fed to MatMul
      nodes `node_MatMul_N`, the module path only in each node's
      metadata_props (`namespace`, `pkg.torch.onnx.name_scopes`); laid out
      as sentence-transformers and Optimum ship ONNX (`onnx/model.onnx`
      beside config.json).
  onnx_int8/model.onnx + config.json
      the same model quantized by onnxruntime's quantize_dynamic
      (QInt8 weights, per-channel): int8 `..._quantized` initializers with
      scales and zero points, DynamicQuantizeLinear + MatMulInteger.

Run once (PyPI needed only here, never at test time):

  python3 -m venv target/venv
  target/venv/bin/pip install torch==2.15.0 transformers onnx onnxscript onnxruntime safetensors
  target/venv/bin/python scripts/make_onnx_dynamo_fixtures.py
"""

import os
import shutil

import onnx
import onnxruntime
import torch
import transformers
from onnxruntime.quantization import QuantType, quantize_dynamic
from safetensors.torch import load_file

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SRC = os.path.join(ROOT, "tests", "data", "formats", "safetensors")


def main():
    torch.manual_seed(0)
    config = transformers.BertConfig.from_json_file(os.path.join(SRC, "config.json"))
    config.vocab_size = 16
    model = transformers.BertModel(config).eval()
    sd = load_file(os.path.join(SRC, "model.safetensors"))
    _, unexpected = model.load_state_dict(sd, strict=False)
    assert not unexpected, unexpected
    out = os.path.join(ROOT, "tests", "data", "formats", "onnx_dynamo")
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(os.path.join(out, "onnx"))
    config.to_json_file(os.path.join(out, "config.json"))
    ids = torch.ones(1, 8, dtype=torch.long)
    onnx_path = os.path.join(out, "onnx", "model.onnx")
    torch.onnx.export(model, (ids,), onnx_path, dynamo=True, input_names=["input_ids"],
                      external_data=True)
    q = os.path.join(ROOT, "tests", "data", "formats", "onnx_int8")
    shutil.rmtree(q, ignore_errors=True)
    os.makedirs(q)
    config.to_json_file(os.path.join(q, "config.json"))
    plain = os.path.join(q, "plain.onnx")
    onnx.save(onnx.load(onnx_path), plain)  # external data inlined
    quantize_dynamic(plain, os.path.join(q, "model.onnx"), weight_type=QuantType.QInt8,
                     per_channel=True)
    os.remove(plain)
    print("torch", torch.__version__, "onnx", onnx.__version__, "onnxruntime",
          onnxruntime.__version__, "transformers", transformers.__version__)


if __name__ == "__main__":
    main()
