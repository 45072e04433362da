#!/usr/bin/env python3
"""Writes tests/data/weightwatcher/: per-layer `details` tables written by
WeightWatcher itself (`WeightWatcher.analyze()` -> pandas DataFrame ->
`DataFrame.to_csv`), for `specbound audit` tests on the real layout (short
module names in `name`, the module path in `longname`).

  minilm_encoder.csv   weightwatcher 0.7.7 on transformers' BertModel built
                       from data/all-MiniLM-L6-v2/config.json with the bundled
                       encoder weights loaded (the bundle has no embeddings or
                       pooler, so `layers=` keeps the 36 encoder Linear layers);
                       CPU path (scipy SVD, float64).
  minilm_full.csv      the same on the full model
                       /work/shared/models/all-MiniLM-L6-v2 (all layers
                       weightwatcher analyses: 39 rows), when it is present.

Run once (PyPI needed only here, never at test time):

  python3 -m venv target/venv
  target/venv/bin/pip install torch==2.15.0 weightwatcher==0.7.7 transformers pandas safetensors
  target/venv/bin/python scripts/make_ww_tables.py
"""

import os

import torch
import transformers
import weightwatcher as ww
from safetensors.torch import load_file

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
OUT = os.path.join(ROOT, "tests", "data", "weightwatcher")


def bert(model_dir):
    config = transformers.BertConfig.from_json_file(os.path.join(model_dir, "config.json"))
    model = transformers.BertModel(config).eval()
    sd = load_file(os.path.join(model_dir, "model.safetensors"))
    missing, unexpected = model.load_state_dict(sd, strict=False)
    # transformers 4.x saved the int64 `embeddings.position_ids` buffer.
    assert set(unexpected) <= {"embeddings.position_ids"}, unexpected
    return model, set(sd)


def main():
    os.makedirs(OUT, exist_ok=True)
    torch.manual_seed(0)
    model, keys = bert(os.path.join(ROOT, "data", "all-MiniLM-L6-v2"))
    # ww's layer ids of the modules whose weights the bundle holds.
    watcher = ww.WeightWatcher(model=model)
    ids = [
        int(r.layer_id)
        for r in watcher.describe().itertuples()
        if f"{r.longname}.weight" in keys
    ]
    details = watcher.analyze(layers=ids)
    assert len(details) == 36, len(details)
    details.to_csv(os.path.join(OUT, "minilm_encoder.csv"))
    full = "/work/shared/models/all-MiniLM-L6-v2"
    if os.path.isdir(full):
        model, _ = bert(full)
        ww.WeightWatcher(model=model).analyze().to_csv(os.path.join(OUT, "minilm_full.csv"))
    print("weightwatcher", ww.__version__, "torch", torch.__version__,
          "transformers", transformers.__version__)


if __name__ == "__main__":
    main()
