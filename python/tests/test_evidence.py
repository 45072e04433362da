"""specbound.verify, audit and diff: the CLI's verdicts and exit codes on the
same inputs, the result objects, and every error path."""

import json

import pytest

import specbound
from conftest import cli_error, need_pandas, run_cli


@pytest.fixture(scope="module")
def one_layer_cert(one_layer):
    return specbound.certify(one_layer)


def cert_file(tmp_path, name, doc):
    p = tmp_path / name
    p.write_text(json.dumps(doc) if not isinstance(doc, str) else doc)
    return p


def test_verify_holds_fails_and_is_unconfirmed_like_the_cli(cli, one_layer, one_layer_cert, tmp_path):
    good = cert_file(tmp_path, "good.json", one_layer_cert.to_json())
    # A bound that no longer follows from the stated matrices.
    doc = one_layer_cert.to_dict()
    doc["bounds"]["ours"] = {k: v * 1.01 for k, v in doc["bounds"]["ours"].items()}
    tampered = cert_file(tmp_path, "tampered.json", doc)
    # A singular value stated narrower than any method can confirm or refute
    # (as in the Rust suite): M_in follows the 12 QK and 12 V_tilde heads.
    ext = specbound.certify(one_layer, precision="extended").to_dict()
    e = ext["matrices"][24]["singular_values"][100]
    assert ext["matrices"][24]["type"] == "M_in" and e["lo"] < e["hi"]
    mid = e["lo"] + 0.5 * (e["hi"] - e["lo"])
    doc = one_layer_cert.to_dict()
    doc["matrices"][24]["singular_values"][100] = {"lo": mid, "hi": mid}
    narrow = cert_file(tmp_path, "narrow.json", doc)

    cases = [
        (good, None, "holds", 0),
        (good, one_layer, "holds", 0),
        (tampered, None, "failed", 1),
        (narrow, None, "holds", 0),
        (narrow, one_layer, "unconfirmed", 3),
    ]
    for cert, model, verdict, code in cases:
        v = specbound.verify(cert, model=model)
        args = ["verify", cert] + (["--model", model] if model else [])
        proc = run_cli(cli, *args)
        assert (v.verdict, v.exit_code, proc.returncode) == (verdict, code, code), (cert.name, model, proc.stderr)
        assert v.holds == (code == 0) and v.with_model == (model is not None)
        assert v.checks > 0
        if code == 1:
            assert proc.stderr.strip() == f"specbound: {cert}: FAILED: {v.failure}"
        if code == 3:
            assert v.unconfirmed and "$.matrices[24].singular_values[100]" in v.unconfirmed[0]
            assert v.unconfirmed[0] in proc.stdout
        assert v.verdict in repr(v)
    # A Certificate object is verified like its file.
    assert specbound.verify(one_layer_cert, model=one_layer).exit_code == 0


def publishable(lo: float, hi: float) -> str:
    """The shortest rounding whose half-unit window holds [lo, hi]."""
    from decimal import Decimal

    mid = (lo + hi) / 2
    for sig in range(6, 13):
        s = f"{mid:.{sig - 1}e}"
        half = Decimal(1).scaleb(Decimal(s).adjusted() - sig + 1) / 2
        if Decimal(s) - half <= Decimal(lo) and Decimal(hi) <= Decimal(s) + half:
            return s
    raise AssertionError("too wide to publish")


def test_audit_judges_claims_like_the_cli(cli, one_layer, one_layer_cert, tmp_path):
    b = one_layer_cert.to_dict()["bounds"]
    right = "model_id,bound,value\n" + "".join(
        f"m,{k},{publishable(v['lo'], v['hi'])}\n" for k, v in b.items()
    )
    wrong = "model_id,bound,value\n" + "".join(f"m,{k},{(v['lo'] + v['hi']) / 2 * 1.01:.6e}\n" for k, v in b.items())
    precise = "model_id,bound,value\n" + "".join(f"m,{k},{(v['lo'] + v['hi']) / 2:.17e}\n" for k, v in b.items())
    for name, text, verdict, code in [
        ("right", right, "consistent", 0),
        ("wrong", wrong, "inconsistent", 1),
        ("precise", precise, "undecided", 3),
    ]:
        f = tmp_path / f"{name}.csv"
        f.write_text(text)
        a = specbound.audit(one_layer, f)
        proc = run_cli(cli, "audit", one_layer, f, "--json")
        assert (a.verdict, a.exit_code, proc.returncode) == (verdict, code, code), proc.stderr
        assert json.loads(a.to_json()) == json.loads(proc.stdout)
        assert a.layout == "observed_bounds" and (a.consistent, a.inconsistent, a.undecided).count(2) == 1
        assert [r["verdict"] for r in a.results] == [verdict, verdict]
        r = a.results[0]
        assert r["certified_lo"] == b["ours"]["lo"] and r["certified_hi"] == b["ours"]["hi"]
        assert (r["distance"] is None) == (code != 1) and (r["width"] is None) == (code != 3)
        assert verdict in repr(a)
    pd = need_pandas()
    df = a.to_frame()
    assert isinstance(df, pd.DataFrame) and df.shape == (2, 11)
    assert list(df.columns[:7]) == ["line", "subject", "quantity", "claim", "tolerance", "certified_lo", "certified_hi"]


def test_audit_takes_weightwatchers_dataframe_like_its_csv(cli, tmp_path):
    """WeightWatcher's analyze() returns a DataFrame; its table (short names
    in `name`, module paths in `longname`) audits as its CSV does."""
    pd = need_pandas()
    from conftest import BUNDLE, REPO

    table = REPO / "tests" / "data" / "weightwatcher" / "minilm_encoder.csv"
    df = pd.read_csv(table, index_col=0).head(4)
    a = specbound.audit(BUNDLE, df, rtol=1e-12)
    assert a.layout == "weightwatcher" and a.inconsistent == 0
    assert a.results[0]["subject"] == df["longname"].iloc[0] + ".weight"
    cut = tmp_path / "ww_head4.csv"
    df.to_csv(cut)
    proc = run_cli(cli, "audit", BUNDLE, cut, "--rtol", "1e-12", "--json")
    j = json.loads(proc.stdout)
    assert (a.exit_code, a.consistent, a.undecided) == (proc.returncode, j["consistent"], j["undecided"])
    with pytest.raises(TypeError):
        specbound.audit(BUNDLE, 42)


def test_diff_like_the_cli(cli, one_layer, one_layer_cert, tmp_path):
    a = cert_file(tmp_path, "a.json", one_layer_cert.to_json())
    other = specbound.certify(one_layer, l_phi="1.2")
    b = cert_file(tmp_path, "b.json", other.to_json())
    for x, y, changed in [(a, a, False), (a, b, True)]:
        d = specbound.diff(x, y)
        proc = run_cli(cli, "diff", x, y)
        assert (d.certainly_changed, d.exit_code, proc.returncode) == (changed, int(changed), int(changed))
        assert d.to_text() == proc.stdout
        proc = run_cli(cli, "diff", x, y, "--json", "--rtol", "0.5")
        assert json.loads(specbound.diff(x, y, rtol=0.5).to_json()) == json.loads(proc.stdout)
    # Certificate objects compare like their files.
    d = specbound.diff(one_layer_cert, other)
    assert d.header == [{"kind": "parameter", "key": "parameters.l_phi", "a": "1.13", "b": "1.2"}]
    assert d.compared > 0 and d.larger + d.smaller + d.indistinguishable == d.compared
    assert "certainly_changed=True" in repr(d)
    need_pandas()
    df = d.to_frame()
    assert len(df) == d.compared
    assert {"label", "a_lo", "a_hi", "b_lo", "b_hi", "change_lo", "change_hi", "verdict", "exceeds_rtol"} <= set(df.columns)


def test_evidence_errors_are_the_clis(cli, one_layer, one_layer_cert, tmp_path):
    good = cert_file(tmp_path, "good.json", one_layer_cert.to_json())
    missing = tmp_path / "missing.json"
    malformed = cert_file(tmp_path, "malformed.json", '{"format": 1}')
    duplicate = cert_file(tmp_path, "dup.json", one_layer_cert.to_json().replace('"format":', '"format": "x", "format":', 1))

    def same(kind, cli_args, call):
        expected = cli_error(run_cli(cli, *cli_args))
        with pytest.raises(kind) as e:
            call()
        assert str(e.value) == expected

    same(FileNotFoundError, ["verify", missing], lambda: specbound.verify(missing))
    same(ValueError, ["verify", malformed], lambda: specbound.verify(malformed))
    same(ValueError, ["verify", duplicate], lambda: specbound.verify(duplicate))
    same(FileNotFoundError, ["verify", good, "--model", tmp_path / "nomodel"], lambda: specbound.verify(good, model=tmp_path / "nomodel"))
    same(FileNotFoundError, ["diff", good, missing], lambda: specbound.diff(good, missing))
    same(ValueError, ["diff", malformed, good], lambda: specbound.diff(malformed, good))
    claims = tmp_path / "claims.csv"
    same(FileNotFoundError, ["audit", one_layer, claims], lambda: specbound.audit(one_layer, claims))
    claims.write_text("foo,bar\n1,2\n")
    same(ValueError, ["audit", one_layer, claims], lambda: specbound.audit(one_layer, claims))
    claims.write_text("tensor,quantity,value\nno.such.weight,rank,3\n")
    same(ValueError, ["audit", one_layer, claims], lambda: specbound.audit(one_layer, claims))
    same(FileNotFoundError, ["audit", tmp_path / "nomodel", claims], lambda: specbound.audit(tmp_path / "nomodel", claims))
    for bad in (-1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="rtol must be a nonnegative number"):
            specbound.diff(good, good, rtol=bad)
    with pytest.raises(TypeError):
        specbound.verify(123)
    with pytest.raises(TypeError):
        specbound.diff(good, None)


def test_measures_in_certify_diff_and_audit_agree_with_the_cli(cli, one_layer, tmp_path):
    py = specbound.certify(one_layer, measures=True)
    out = tmp_path / "cli.json"
    proc = run_cli(cli, "certify", "-q", "--measures", "--out", out, one_layer)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(out.read_text())
    # The same intervals, by name, as the certificate's measures section.
    stated = {k: v for k, v in doc["measures"].items() if k != "d"}
    assert set(py.measures) == set(stated)
    for k, v in stated.items():
        assert (py.measures[k].lo, py.measures[k].hi) == (v["lo"], v["hi"]), k
    assert specbound.certify(one_layer).measures is None
    # diff surfaces them as the CLI does.
    a = cert_file(tmp_path, "a.json", py.to_json())
    proc = run_cli(cli, "diff", "--json", a, out)
    d = specbound.diff(a, out)
    assert json.loads(d.to_json()) == json.loads(proc.stdout)
    assert {r["quantity"] for r in json.loads(d.to_json())["measures"]} == set(stated)
    # audit reads a measures table (a row per measure) as the CLI does.
    claims = tmp_path / "measures.csv"
    claims.write_text(
        "measure,value\n"
        + "".join(f"{k},{v['lo'] + (v['hi'] - v['lo']) / 2!r}\n" for k, v in stated.items())
    )
    proc = run_cli(cli, "audit", "--json", "--rtol", "1e-9", one_layer, claims)
    r = specbound.audit(one_layer, claims, rtol=1e-9)
    assert r.exit_code == proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["consistent"] == len(stated)
