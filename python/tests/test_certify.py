"""specbound.certify and the Certificate: the same certificate and tables as
the CLI, the DataFrames' shapes and exactness, inconclusive models, every
error path, progress, Ctrl-C and the released interpreter lock."""

import json
import os
import signal
import threading
from pathlib import Path

import numpy as np
import pytest

import specbound
from conftest import BUNDLE, REPO, cli_error, cli_usage_error, need_pandas, read_safetensors, run_cli, write_safetensors


@pytest.fixture(scope="module")
def cli_outputs(cli, tmp_path_factory):
    """`specbound certify --out --csv` in the repository root (default model)."""
    d = tmp_path_factory.mktemp("cli")
    proc = run_cli(cli, "certify", "--out", d / "cert.json", "--csv", d / "csv")
    assert proc.returncode == 0, proc.stderr
    return d


def test_the_certificate_is_the_clis_byte_for_byte(bundled_cert, cli_outputs, tmp_path):
    assert bundled_cert.certified and bundled_cert.reason is None
    expected = (cli_outputs / "cert.json").read_bytes()
    assert bundled_cert.to_json().encode() == expected
    bundled_cert.save(tmp_path / "py.json")
    assert (tmp_path / "py.json").read_bytes() == expected
    assert bundled_cert.to_dict() == json.loads(expected)
    b = bundled_cert.bounds
    d = json.loads(expected)["bounds"]
    assert (b.ours.lo, b.ours.hi) == (d["ours"]["lo"], d["ours"]["hi"])
    assert (b.edelman.lo, b.edelman.hi) == (d["edelman"]["lo"], d["edelman"]["hi"])
    assert repr(b).startswith("Bounds(ours=Interval(")
    assert b == specbound.load(tmp_path / "py.json").bounds
    assert "156 matrices" in repr(bundled_cert)


def test_the_tables_are_the_clis_csv_files(bundled_cert, cli_outputs):
    pd = need_pandas()
    tables = bundled_cert.tables()
    assert list(tables) == [
        "matrix_summary.csv",
        "schatten_opt.csv",
        "observed_bounds.csv",
        "p_contribution_raw.csv",
    ]
    for name, df in tables.items():
        # The python engine parses numbers with float(): exactly.
        cli_df = pd.read_csv(cli_outputs / "csv" / name, engine="python")
        pd.testing.assert_frame_equal(df, cli_df, check_exact=True)
    pd.testing.assert_frame_equal(bundled_cert.matrices(), tables["matrix_summary.csv"])
    pd.testing.assert_frame_equal(bundled_cert.contributions(), tables["p_contribution_raw.csv"])
    assert bundled_cert.tables(model_id="minilm")["observed_bounds.csv"].model_id.tolist() == ["minilm"] * 2


def test_dataframes_have_the_authors_columns_and_the_exact_ends(bundled_cert):
    need_pandas()
    c = bundled_cert.to_dict()
    mats = c["matrices"]
    df = bundled_cert.matrices()
    assert df.shape == (156, 26)
    assert list(df.columns[:8]) == ["layer", "head", "matrix_type", "rows", "cols", "rank", "rank_lo", "rank_hi"]
    for q in ["spectral_norm", "frobenius_norm", "nuclear_norm", "norm_21", "norm_11", "stable_rank"]:
        assert [q, f"{q}_lo", f"{q}_hi"] == [c for c in df.columns if c.startswith(q)]
        assert df[f"{q}_lo"].tolist() == [m[q]["lo"] for m in mats]
        assert df[f"{q}_hi"].tolist() == [m[q]["hi"] for m in mats]
        assert ((df[f"{q}_lo"] <= df[q]) & (df[q] <= df[f"{q}_hi"])).all()
    assert df["head"].tolist() == [m["head"] for m in mats]
    assert set(df.matrix_type) == {"QK", "V_tilde", "M_in", "M_out"}

    m = c["parameters"]["grid_m"]
    con = bundled_cert.contributions()
    assert con.shape == (156 * (2 * m + 1), 7)
    assert list(con.columns) == ["layer", "head", "matrix_type", "p", "contribution", "contribution_lo", "contribution_hi"]
    assert con.contribution_lo.tolist() == [x["value"]["lo"] for w in mats for x in w["contributions"]]
    assert con.contribution_hi.tolist() == [x["value"]["hi"] for w in mats for x in w["contributions"]]

    sv = bundled_cert.singular_values()
    sizes = [min(w["rows"], w["cols"]) for w in mats]
    assert sv.shape == (sum(sizes), 7)
    assert list(sv.columns) == [
        "layer", "head", "matrix_type", "i", "singular_value", "singular_value_lo", "singular_value_hi"
    ]
    expected_lo = [
        w["singular_values"][i]["lo"] if i < len(w["singular_values"]) else 0.0
        for w, k in zip(mats, sizes)
        for i in range(k)
    ]
    assert sv.singular_value_lo.tolist() == expected_lo
    assert ((sv.singular_value_lo <= sv.singular_value) & (sv.singular_value <= sv.singular_value_hi)).all()
    # Largest first within each matrix, i from 0.
    first = sv.groupby(["layer", "head", "matrix_type"], sort=False).i.min()
    assert (first == 0).all()


def test_a_model_that_cannot_be_certified_is_inconclusive_not_an_error(cli, tmp_path):
    # Huge weights: the query-key product overflows binary64.
    rng = np.random.default_rng(0)
    h, i = 4, 8
    shapes = {
        "attention.self.query.weight": (h, h),
        "attention.self.key.weight": (h, h),
        "attention.self.value.weight": (h, h),
        "attention.output.dense.weight": (h, h),
        "intermediate.dense.weight": (i, h),
        "output.dense.weight": (h, i),
    }
    write_safetensors(
        tmp_path / "model.safetensors",
        {f"encoder.layer.0.{n}": rng.standard_normal(s) * 1e200 for n, s in shapes.items()},
    )
    (tmp_path / "config.json").write_text(
        json.dumps(
            {"model_type": "bert", "num_hidden_layers": 1, "hidden_size": h, "num_attention_heads": 1, "intermediate_size": i}
        )
    )
    c = specbound.certify(tmp_path)
    assert not c.certified and c.bounds is None
    assert "overflow" in c.reason
    proc = run_cli(cli, "certify", tmp_path)
    assert proc.returncode == 1
    assert proc.stderr.strip() == f"specbound: {tmp_path}: inconclusive: {c.reason}"
    assert "inconclusive" in repr(c)
    for call in (c.to_json, c.to_dict, lambda: c.save(tmp_path / "x.json"), c.matrices, c.singular_values):
        with pytest.raises(ValueError, match="inconclusive"):
            call()
    assert not (tmp_path / "x.json").exists()
    with pytest.raises(ValueError, match="inconclusive"):
        specbound.verify(c)


def test_bad_models_and_parameters_give_the_clis_messages(cli, one_layer, tmp_path):
    def same(cli_args, **kwargs):
        expected = cli_error(run_cli(cli, "certify", *cli_args))
        kind = FileNotFoundError if "No such file" in expected or "not found" in expected else ValueError
        with pytest.raises(kind) as e:
            specbound.certify(**kwargs)
        assert str(e.value) == expected
        return e.value

    missing = tmp_path / "no-such-model"
    assert isinstance(same([missing], model=missing), FileNotFoundError)
    # A tensor missing.
    broken = tmp_path / "broken"
    broken.mkdir()
    tensors = read_safetensors(one_layer / "model.safetensors")
    del tensors["encoder.layer.0.attention.self.value.weight"]
    write_safetensors(broken / "model.safetensors", tensors)
    (broken / "config.json").write_text((one_layer / "config.json").read_text())
    assert "attention.self.value.weight" in str(same([broken], model=broken))
    # A bare file (no config.json beside it) needs the number of heads.
    (tmp_path / "bare").mkdir()
    bare = tmp_path / "bare" / "model.safetensors"
    bare.write_bytes((one_layer / "model.safetensors").read_bytes())
    assert "--heads" in str(same([bare], model=bare))
    assert specbound.certify(bare, heads=12).certified
    same([one_layer, "--l-phi", "abc"], model=one_layer, l_phi="abc")
    same([one_layer, "--l-phi=-1"], model=one_layer, l_phi="-1")
    same([one_layer, "--grid-m", "0"], model=one_layer, grid_m=0)
    same([one_layer, "--grid-m", "1000000000"], model=one_layer, grid_m=10**9)
    # The CLI's parser refuses the value, quoting the library's message.
    usage = cli_usage_error(run_cli(cli, "certify", one_layer, "--precision", "f32"))
    with pytest.raises(ValueError) as e:
        specbound.certify(one_layer, precision="f32")
    assert usage.endswith(f": {e.value}")
    with pytest.raises(ValueError, match="grid m must be between 1 and .*, got -1"):
        specbound.certify(one_layer, grid_m=-1)
    for key in ("heads", "layers"):
        with pytest.raises(ValueError, match=f"{key} must be a positive integer, got 0"):
            specbound.certify(one_layer, **{key: 0})
    with pytest.raises(TypeError):
        specbound.certify(one_layer, progress="yes")
    with pytest.raises(TypeError):
        specbound.certify(42)
    with pytest.raises(TypeError):
        specbound.certify(one_layer, l_phi=True)


def test_a_wrong_bundle_variable_is_file_not_found(cli, monkeypatch, tmp_path):
    monkeypatch.setenv("SPECBOUND_BUNDLE", str(tmp_path / "nowhere"))
    expected = cli_error(run_cli(cli, "certify"))
    with pytest.raises(FileNotFoundError) as e:
        specbound.certify()
    assert str(e.value) == expected


def test_l_phi_is_an_exact_decimal_whatever_its_type(one_layer):
    from decimal import Decimal

    base = specbound.certify(one_layer, l_phi="1.2").to_dict()
    for same in (1.2, Decimal("1.2"), "1.20"):
        other = specbound.certify(one_layer, l_phi=same).to_dict()
        assert other["bounds"] == base["bounds"], same
    assert specbound.certify(one_layer, l_phi=2).to_dict()["parameters"]["l_phi"] == "2"


def test_save_is_atomic_and_names_the_path(bundled_cert, tmp_path):
    with pytest.raises(FileNotFoundError) as e:
        bundled_cert.save(tmp_path / "missing" / "c.json")
    assert str(tmp_path / "missing" / "c.json") in str(e.value)
    (tmp_path / "dir").mkdir()
    with pytest.raises(ValueError) as e:
        bundled_cert.save(tmp_path / "dir")
    assert str(tmp_path / "dir") in str(e.value)
    target = tmp_path / "c.json"
    target.write_text("old")
    bundled_cert.save(target)
    assert target.read_text() == bundled_cert.to_json()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.json", "dir"], "no temporary file left"


def test_load_reads_what_save_wrote(bundled_cert, tmp_path):
    p = tmp_path / "c.json"
    bundled_cert.save(p)
    again = specbound.load(p)
    assert again.to_json() == bundled_cert.to_json()
    with pytest.raises(FileNotFoundError):
        specbound.load(tmp_path / "none.json")
    (tmp_path / "bad.json").write_text("{}")
    with pytest.raises(ValueError, match="bad.json"):
        specbound.load(tmp_path / "bad.json")


def test_progress_reports_every_matrix(one_layer, capsys):
    seen = []
    c = specbound.certify(one_layer, progress=lambda done, total: seen.append((done, total)))
    n = len(c.to_dict()["matrices"])
    assert seen[-1] == (n, n)
    assert [d for d, _ in seen] == sorted(d for d, _ in seen)
    specbound.certify(one_layer, progress=True)
    err = capsys.readouterr().err
    assert err.endswith(f"\rspecbound: {n}/{n} matrices\n")


def _worker_threads():
    """Names of this process's threads called `specbound` (the module's worker)."""
    tasks = Path("/proc/self/task")
    if not tasks.is_dir():
        return None
    return [t for t in tasks.iterdir() if (t / "comm").read_text().strip() == "specbound"]


def test_ctrl_c_stops_a_run_between_matrices_and_leaves_nothing_running(one_layer):
    seen = []

    def press_ctrl_c(done, total):
        seen.append((done, total))
        if len(seen) == 1:
            os.kill(os.getpid(), signal.SIGINT)

    # Python installs its KeyboardInterrupt handler only when SIGINT is not
    # ignored at start-up, and a shell ignores SIGINT in the commands it runs
    # in the background (`.ci/run &`): install it here, whatever was inherited.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            specbound.certify(BUNDLE, progress=press_ctrl_c)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert len(seen) == 1 and seen[0][0] < seen[0][1]
    # The worker has stopped (certify waits for the matrices under way).
    workers = _worker_threads()
    assert workers is None or workers == []
    # A later run is unaffected.
    assert specbound.certify(one_layer).certified


def test_an_exception_in_the_progress_callback_stops_the_run(one_layer):
    def fail(done, total):
        raise RuntimeError("stop here")

    with pytest.raises(RuntimeError, match="stop here"):
        specbound.certify(one_layer, progress=fail)


def test_the_interpreter_lock_is_released_while_certifying(bundled_cert):
    """Another Python thread finishes a pure-Python loop (which needs the
    lock for about 0.1 s) while certify runs (seconds): impossible if
    certify held the lock throughout."""
    started = threading.Event()
    other_done = threading.Event()

    def other():
        started.wait()
        n = 0
        for _ in range(2_000_000):
            n += 1
        other_done.set()

    t = threading.Thread(target=other)
    t.start()
    started.set()
    c = specbound.certify(BUNDLE)
    finished_meanwhile = other_done.is_set()
    t.join()
    assert finished_meanwhile
    # The same certificate as by default, but for the path as given.
    a, b = c.to_dict(), bundled_cert.to_dict()
    assert a["model"].pop("path") == str(BUNDLE)
    b["model"].pop("path")
    assert a == b
