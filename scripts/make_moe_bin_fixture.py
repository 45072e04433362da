#!/usr/bin/env python3
"""Writes tests/data/torch/mixtral_fused_{bin,st}/: a tiny Mixtral (2 layers, hidden 64,
4 heads of 16 with 2 key/value heads, 4 experts of width 32, top-2, vocabulary
32), random weights seeded 0, saved twice from the same state dict as
transformers 5 holds it (fused 3-D experts `mlp.experts.gate_up_proj`
[E, 2I, N] and `mlp.experts.down_proj` [E, N, I]):

  mixtral_fused_bin/pytorch_model.bin   torch.save(model.state_dict()) (zip container)
  mixtral_fused_st/model.safetensors    safetensors.torch.save_file of the same dict
  (each beside the same config.json).

Run once (PyPI needed only here, never at test time):

  python3 -m venv target/venv
  target/venv/bin/pip install torch==2.15.0 transformers
  target/venv/bin/python scripts/make_moe_bin_fixture.py
"""

import os
import shutil

import torch
import transformers
from safetensors.torch import save_file

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main():
    torch.manual_seed(0)
    config = transformers.MixtralConfig(
        vocab_size=32, hidden_size=64, intermediate_size=32, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, num_local_experts=4,
        num_experts_per_tok=2, max_position_embeddings=64)
    model = transformers.MixtralForCausalLM(config).eval()
    sd = model.state_dict()
    assert sd["model.layers.0.mlp.experts.gate_up_proj"].dim() == 3
    for kind in ("bin", "st"):
        out = os.path.join(ROOT, "tests", "data", "torch", f"mixtral_fused_{kind}")
        shutil.rmtree(out, ignore_errors=True)
        os.makedirs(out)
        config.to_json_file(os.path.join(out, "config.json"))
        if kind == "bin":
            torch.save(sd, os.path.join(out, "pytorch_model.bin"))
        else:
            # lm_head is tied to nothing here; contiguous copies for save_file.
            save_file({k: v.contiguous() for k, v in sd.items()},
                      os.path.join(out, "model.safetensors"))
    print("torch", torch.__version__, "transformers", transformers.__version__,
          sorted(k for k in sd if "experts" in k))


if __name__ == "__main__":
    main()
