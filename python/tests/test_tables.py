"""Tables people take elsewhere: a family without a bound (DeBERTa-v2 and
Qwen2-MoE of the bundled MiniLM's layer 0) has its spectra rows in
``Certificate.matrices()`` and ``singular_values()``, the CLI's
``certify --csv`` table, audited back; ``spectra(..., singular_values=True)``
keeps every certified singular value, the CLI's ``singular_values.csv``."""

import json

import numpy as np

import specbound
from conftest import BUNDLE, need_pandas, read_safetensors, run_cli, write_safetensors


def layer0():
    t = read_safetensors(BUNDLE / "model.safetensors")
    p = "encoder.layer.0."
    names = [
        "attention.self.query", "attention.self.key", "attention.self.value",
        "attention.output.dense", "intermediate.dense", "output.dense",
    ]
    return [np.array(t[f"{p}{n}.weight"]) for n in names]


def deberta(d):
    w = layer0()
    p = "deberta.encoder.layer.0."
    names = [
        "attention.self.query_proj", "attention.self.key_proj", "attention.self.value_proj",
        "attention.output.dense", "intermediate.dense", "output.dense",
    ]
    write_safetensors(d / "model.safetensors", {f"{p}{n}.weight": m for n, m in zip(names, w)})
    (d / "config.json").write_text(json.dumps({
        "model_type": "deberta-v2", "num_hidden_layers": 1, "hidden_size": 384,
        "num_attention_heads": 12, "intermediate_size": 1536, "hidden_act": "gelu",
        "relative_attention": True, "pos_att_type": ["p2c", "c2p"]}))
    return d


def qwen2_moe(d):
    q, k, v, o, ff1, ff2 = layer0()
    p = "model.layers.0."
    t = {f"{p}self_attn.{n}.weight": m for n, m in zip(["q_proj", "k_proj", "v_proj", "o_proj"], [q, k, v, o])}
    for b, e in enumerate(["experts.0", "experts.1", "shared_expert"]):
        t[f"{p}mlp.{e}.gate_proj.weight"] = ff1[b * 384:(b + 1) * 384]
        t[f"{p}mlp.{e}.up_proj.weight"] = ff1[(b + 1) * 384:(b + 2) * 384]
        t[f"{p}mlp.{e}.down_proj.weight"] = np.ascontiguousarray(ff2[:, b * 384:(b + 1) * 384])
    t[f"{p}mlp.gate.weight"] = np.full((2, 384), 0.25, np.float32)
    t[f"{p}mlp.shared_expert_gate.weight"] = np.full((1, 384), 0.25, np.float32)
    write_safetensors(d / "model.safetensors", t)
    (d / "config.json").write_text(json.dumps({
        "model_type": "qwen2_moe", "num_hidden_layers": 1, "hidden_size": 384,
        "num_attention_heads": 12, "num_key_value_heads": 12, "head_dim": 32,
        "intermediate_size": 384, "num_experts_per_tok": 1, "num_experts": 2,
        "moe_intermediate_size": 384, "shared_expert_intermediate_size": 384,
        "decoder_sparse_step": 1}))
    return d


def bart(d):
    w = layer0()
    t = {}
    for stack, parts in [("encoder", ["self_attn"]), ("decoder", ["self_attn", "encoder_attn"])]:
        p = f"model.{stack}.layers.0."
        for part in parts:
            for n, m in zip(["q_proj", "k_proj", "v_proj", "out_proj"], w[:4]):
                t[f"{p}{part}.{n}.weight"] = m
        t[f"{p}fc1.weight"], t[f"{p}fc2.weight"] = w[4], w[5]
    write_safetensors(d / "model.safetensors", t)
    (d / "config.json").write_text(json.dumps({
        "model_type": "bart", "d_model": 384, "encoder_layers": 1, "decoder_layers": 1,
        "encoder_attention_heads": 12, "decoder_attention_heads": 12, "encoder_ffn_dim": 1536,
        "decoder_ffn_dim": 1536, "activation_function": "gelu"}))
    return d


def test_a_decoder_stacks_table_is_audited_with_its_stack(tmp_path):
    need_pandas()
    d = bart(tmp_path)
    cert = specbound.certify(str(d), stack="decoder")
    df = cert.matrices()
    assert cert.bounds is None and "QK_cross" in set(df.matrix_type)
    r = specbound.audit(str(d), df, stack="decoder")
    assert (r.exit_code, r.inconsistent, r.undecided, r.consistent) == (0, 0, 0, 9 * len(df))
    # Without the stack, the encoder is certified: its matrices are not these.
    try:
        specbound.audit(str(d), df)
        raise AssertionError("the encoder has no QK_cross")
    except ValueError as e:
        assert not isinstance(e, FileNotFoundError) and "no matrix layer 0 head 0 QK_cross" in str(e), str(e)


def test_a_family_without_a_bound_has_its_spectra_rows_as_the_cli_writes_them(cli, tmp_path):
    pd = need_pandas()
    for name, build, experts in [("deberta", deberta, False), ("moe", qwen2_moe, True)]:
        d = tmp_path / name
        d.mkdir()
        build(d)
        cert = specbound.certify(str(d))
        assert cert.certified and cert.bounds is None
        spectra = cert.to_dict()["spectra"]
        df = cert.matrices()
        assert len(df) == len(spectra) > 0
        assert df.spectral_norm_lo.tolist() == [e["spectral_norm"]["lo"] for e in spectra]
        assert df.spectral_norm_hi.tolist() == [e["spectral_norm"]["hi"] for e in spectra]
        assert ("expert" in df.columns) == experts
        proc = run_cli(cli, "certify", d, "--csv", d / "csv")
        assert proc.returncode == 0, proc.stderr
        cli_df = pd.read_csv(d / "csv" / "matrix_summary.csv", engine="python")
        pd.testing.assert_frame_equal(df, cli_df, check_exact=True)
        for t in ["schatten_opt.csv", "observed_bounds.csv", "p_contribution_raw.csv"]:
            assert len(cert.tables()[t]) == 0
        sv = cert.singular_values()
        assert len(sv) == sum(min(e["rows"], e["cols"]) for e in spectra)
        assert ("expert" in sv.columns) == experts
        # The table audits back against the model it came from, from a
        # DataFrame as from the file.
        r = specbound.audit(str(d), df)
        assert (r.exit_code, r.layout, r.inconsistent, r.undecided) == (0, "matrix_summary", 0, 0)
        assert r.consistent == 9 * len(df)


def test_spectra_keeps_every_singular_value_as_the_cli_writes_them(cli, tmp_path):
    pd = need_pandas()
    include = r"layer\.0\.attention\.self\.(query|key)\.weight"
    s = specbound.spectra(str(BUNDLE), include=include, singular_values=True, csv=str(tmp_path / "py"))
    sv = s.singular_values()
    assert list(sv.columns) == ["tensor", "slice", "rows", "cols", "rank_index", "sigma", "sigma_lo", "sigma_hi"]
    assert len(sv) == 2 * 384
    rows = json.loads(s.to_json())["matrices"]
    for r in rows:
        mine = sv[sv.tensor == r["tensor"]]
        assert mine.sigma_lo.tolist() == [x["lo"] for x in r["singular_values"]]
        assert mine.sigma_hi.tolist() == [x["hi"] for x in r["singular_values"]]
        assert mine.rank_index.tolist() == list(range(1, 385))
    proc = run_cli(cli, "spectra", BUNDLE, "--include", include, "--singular-values", "--csv", tmp_path / "cli")
    assert proc.returncode == 0, proc.stderr
    for f in ["spectra.csv", "singular_values.csv"]:
        assert (tmp_path / "py" / f).read_bytes() == (tmp_path / "cli" / f).read_bytes()
    r = specbound.audit(str(BUNDLE), str(tmp_path / "cli" / "singular_values.csv"))
    assert (r.exit_code, r.layout, r.consistent) == (0, "singular_values", 2 * 384)
    plain = specbound.spectra(str(BUNDLE), include=include)
    try:
        plain.singular_values()
        raise AssertionError("no singular values were kept")
    except ValueError as e:
        assert "singular_values=True" in str(e)


def test_study_takes_a_trajectory_and_lists_figure_6_as_the_cli_draws_it(cli, one_layer, tmp_path):
    # Step 0 is the one-layer model, step 100 the same weights times 1.25
    # (exact in float32), in one run; the initialisation is step 0.
    t = read_safetensors(one_layer / "model.safetensors")
    scaled = tmp_path / "scaled"
    scaled.mkdir()
    write_safetensors(scaled / "model.safetensors", {k: v * np.float32(1.25) for k, v in t.items()})
    (scaled / "config.json").write_text((one_layer / "config.json").read_text())
    models = [str(one_layer), str(scaled)]
    s = specbound.study(models, out=str(tmp_path / "py"), model_ids=["s0", "s100"], steps=[0, 100],
                        runs=["a", "a"], init=str(one_layer))
    assert s["exit_code"] == 0, s["reason"]
    assert 6 in s["figures"] and s["figures"][6].endswith(".svg"), s
    for n, f in s["figures"].items():
        assert (tmp_path / "py" / "figures" / f.split("/")[-1]).is_file(), (n, f)
    proc = run_cli(cli, "study", one_layer, "--step", "0", "--run", "a", scaled, "--step", "100", "--run", "a",
                   "--model-id", "s0", "--model-id", "s100", "--init", one_layer, "--out", tmp_path / "cli")
    assert proc.returncode == 0, proc.stderr
    drawn = sorted(int(line.split(":")[0].split()[1]) for line in proc.stdout.splitlines()
                   if line.startswith("figure ") and ".svg" in line)
    assert sorted(s["figures"]) == drawn
    for t in ["trajectory.csv", "measures.csv", "singular_values.csv"]:
        assert (tmp_path / "py" / "tables" / t).read_bytes() == (tmp_path / "cli" / "tables" / t).read_bytes(), t
    # Bad trajectories are refused as the command line refuses them.
    for kw, msg in [({"steps": [0]}, "1 entries for 2 models"), ({"steps": [-1, 0]}, "step '-1'"),
                    ({"runs": ["a", ".x"]}, "run name '.x'")]:
        try:
            specbound.study(models, out=str(tmp_path / "bad"), **kw)
            raise AssertionError(kw)
        except ValueError as e:
            assert msg in str(e), (kw, str(e))
