"""The module as a front over the command layer: models named by Hugging Face
id (a cache laid out in a temporary directory, as tests/hub.rs builds it),
paths given to svd, claimed singular values to audit, and the commands
inspect, study, merge and report against the command line."""

import json
import os

import numpy as np
import pytest

import specbound
from conftest import BUNDLE, QUERY_NPY, REPO, run_cli

HUB_ID = "org/name"
COMMIT = "1111111111111111111111111111111111111111"
QUERY = "encoder.layer.0.attention.self.query.weight"


@pytest.fixture
def hub(tmp_path, monkeypatch):
    """`HF_HUB_CACHE/models--org--name` holding the bundled model's files as
    blobs, a snapshot of symbolic links into them, and `refs/main`."""
    cache = tmp_path / "hub"
    repo = cache / "models--org--name"
    (repo / "blobs").mkdir(parents=True)
    (repo / "refs").mkdir()
    snap = repo / "snapshots" / COMMIT
    snap.mkdir(parents=True)
    for i, f in enumerate(["config.json", "model.safetensors"]):
        (repo / "blobs" / f"blob{i}").symlink_to(BUNDLE / f)
        (snap / f).symlink_to(f"../../blobs/blob{i}")
    (repo / "refs" / "main").write_text(COMMIT)
    for k in ("HUGGINGFACE_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    # Not the repository root: nothing named org/name here.
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    return cache


def without_path(doc: dict) -> dict:
    doc = dict(doc, model=dict(doc["model"]))
    doc["model"].pop("path")
    return doc


def test_certify_resolves_a_hugging_face_id(hub, bundled_cert):
    c = specbound.certify(HUB_ID)
    assert c.certified
    assert without_path(c.to_dict()) == without_path(bundled_cert.to_dict())
    assert c.tables()["observed_bounds.csv"].model_id.tolist() == ["name"] * 2
    again = specbound.certify(HUB_ID, revision=COMMIT, model_id="mini")
    assert without_path(again.to_dict()) == without_path(bundled_cert.to_dict())
    assert again.tables()["observed_bounds.csv"].model_id.tolist() == ["mini"] * 2


def test_an_id_not_in_the_cache_and_a_missing_file_are_file_not_found(hub, cli):
    with pytest.raises(FileNotFoundError) as e:
        specbound.certify("org/other")
    assert "org/other" in str(e.value)
    with pytest.raises(FileNotFoundError) as e:
        specbound.certify("missing.npy")
    proc = run_cli(cli, "certify", "missing.npy", cwd=hub.parent / "work")
    assert proc.returncode == 2
    assert proc.stderr.strip() == f"specbound: error: {e.value}"
    with pytest.raises(ValueError, match="revision"):
        specbound.certify(BUNDLE, revision="main")


def test_svd_of_a_tensor_of_a_hugging_face_id_is_that_of_the_path(hub):
    by_id = specbound.svd(HUB_ID, tensor=QUERY, precision="f64")
    by_path = specbound.svd(BUNDLE, tensor=QUERY, precision="f64")
    assert by_id.certified and by_id.dtype == "float32" and (by_id.rows, by_id.cols) == (384, 384)
    a, b = json.loads(by_id.to_json()), json.loads(by_path.to_json())
    assert a.pop("input") == HUB_ID and b.pop("input") == str(BUNDLE)
    assert a == b
    assert list(by_id.lo) == list(by_path.lo) and list(by_id.hi) == list(by_path.hi)
    with pytest.raises(ValueError, match="--tensor"):
        specbound.svd(HUB_ID)
    with pytest.raises(ValueError, match="array"):
        specbound.svd(np.eye(2), tensor=QUERY)


def test_svd_of_a_file_is_the_clis_and_that_of_its_array(cli):
    r = specbound.svd(QUERY_NPY)
    proc = run_cli(cli, "svd", QUERY_NPY, "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(r.to_json()) == json.loads(proc.stdout)
    arr = specbound.svd(np.load(QUERY_NPY))
    a, b = json.loads(r.to_json()), json.loads(arr.to_json())
    assert a.pop("input") == str(QUERY_NPY) and b.pop("input") == "array"
    assert a == b and r.dtype == arr.dtype
    with pytest.raises(FileNotFoundError):
        specbound.svd(QUERY_NPY.parent / "no-such.npy")


def test_audit_of_a_hugging_face_id_is_that_of_the_path(hub, tmp_path):
    claims = tmp_path / "claims.csv"
    claims.write_text("model_id,bound,value\nm,ours,20573.03\n")
    by_id = specbound.audit(HUB_ID, claims)
    by_path = specbound.audit(BUNDLE, claims, rtol=0.0, atol=0.0, precision="f64", rounding_units=1.0)
    assert by_id.verdict == "consistent" and by_id.exit_code == 0
    assert by_id.to_json() == by_path.to_json()
    with pytest.raises(ValueError, match="tensor"):
        specbound.audit(HUB_ID, claims, tensor=QUERY)
    with pytest.raises(ValueError, match="rtol"):
        specbound.audit(HUB_ID, claims, rtol=-1.0)


def test_audit_of_claimed_singular_values_is_the_clis(cli, tmp_path):
    claimed = tmp_path / "claimed.npy"
    np.save(claimed, np.linalg.svd(np.load(QUERY_NPY).astype(np.float64), compute_uv=False))
    r = specbound.audit(QUERY_NPY, claimed, rtol=1e-9)
    proc = run_cli(cli, "audit", QUERY_NPY, claimed, "--rtol", "1e-9", "--json")
    assert isinstance(r, specbound.SpectrumAuditResult)
    assert (r.verdict, r.exit_code, proc.returncode) == ("pass", 0, 0), proc.stderr
    assert r.to_dict() == json.loads(proc.stdout) and r.reason is None
    off = tmp_path / "off.npy"
    np.save(off, np.load(claimed) * 1.001)
    bad = specbound.audit(QUERY_NPY, off, rtol=1e-9)
    proc = run_cli(cli, "audit", QUERY_NPY, off, "--rtol", "1e-9")
    assert (bad.verdict, bad.exit_code, proc.returncode) == ("fail", 1, 1)
    assert proc.stderr.strip().endswith(f"specbound: {bad.reason}")
    assert bad.to_dict()["fail"] > 0


def test_inspect_is_the_clis_json_and_resolves_an_id(cli, hub):
    i = specbound.inspect(HUB_ID)
    proc = run_cli(cli, "inspect", BUNDLE, "--json")
    assert proc.returncode == 0, proc.stderr
    expected = json.loads(proc.stdout)
    assert i.pop("model") == HUB_ID and expected.pop("model") == str(BUNDLE)
    assert i == expected
    assert i["architecture"] == "bert" and len(i["matrices"]) == 156
    other = specbound.inspect(BUNDLE, l_phi="1.2", heads=12)
    proc = run_cli(cli, "inspect", BUNDLE, "--l-phi", "1.2", "--heads", "12", "--json")
    assert proc.returncode == 0, proc.stderr
    assert other == json.loads(proc.stdout)
    with pytest.raises(FileNotFoundError):
        specbound.inspect("missing-model")


def test_study_of_the_bundled_model(tmp_path):
    out = tmp_path / "study"
    s = specbound.study([BUNDLE], out=out, model_ids=["minilm"])
    assert (s["certified"], s["reused"], s["inconclusive"], s["exit_code"]) == (1, 0, {}, 0)
    assert s["report"] == str(out / "report.html") and os.path.getsize(s["report"]) > 0
    assert s["reason"] is None
    assert (out / "certificates" / "minilm.json").is_file()
    for n, p in s["figures"].items():
        assert isinstance(n, int) and os.path.isfile(p)
    assert len(s["figures"]) + len(s["skipped_figures"]) == 5
    again = specbound.study([BUNDLE], out=out, model_ids=["minilm"])
    assert (again["certified"], again["reused"]) == (0, 1)
    with pytest.raises(TypeError):
        specbound.study(str(BUNDLE), out=out)


def test_merge_of_the_clis_shards_is_the_clis_merge(cli, one_layer, tmp_path):
    parts = []
    for k in (1, 2):
        p = tmp_path / f"part{k}.json"
        proc = run_cli(cli, "certify", one_layer, "--shard", f"{k}/2", "--out", p)
        assert proc.returncode == 0, proc.stderr
        parts.append(p)
    proc = run_cli(cli, "merge", *parts, "--out", tmp_path / "cli.json")
    assert proc.returncode == 0, proc.stderr
    c = specbound.merge(list(reversed(parts)), out=tmp_path / "py.json", csv=tmp_path / "csv", model_id="one")
    assert c.certified
    assert (tmp_path / "py.json").read_bytes() == (tmp_path / "cli.json").read_bytes()
    assert c.to_json().encode() == (tmp_path / "cli.json").read_bytes()
    assert sorted(p.name for p in (tmp_path / "csv").iterdir()) == sorted(c.tables())
    assert c.tables()["observed_bounds.csv"].model_id.tolist() == ["one"] * 2
    assert without_path(c.to_dict()) == without_path(specbound.certify(one_layer).to_dict())
    with pytest.raises(FileNotFoundError):
        specbound.merge([tmp_path / "none.json"])
    with pytest.raises(ValueError):
        specbound.merge([parts[0]])


def test_report_writes_the_clis_page(cli, bundled_cert, tmp_path):
    cert = tmp_path / "minilm.json"
    bundled_cert.save(cert)
    page = specbound.report([cert], out=tmp_path / "py.html")
    assert page == str(tmp_path / "py.html")
    proc = run_cli(cli, "report", cert, "--out", tmp_path / "cli.html")
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "py.html").read_bytes() == (tmp_path / "cli.html").read_bytes()
    with pytest.raises(FileNotFoundError):
        specbound.report([tmp_path / "none.json"], out=tmp_path / "x.html")
    with pytest.raises(ValueError):
        specbound.report([cert], out=tmp_path / "x.html", spectrum_layers="x")
