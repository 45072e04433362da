"""Models in memory: `certify`, `spectra` and `inspect` of a mapping of
names to arrays give what the same tensors on disk give, apart from the
file section; arrays come as NumPy arrays or through DLPack (float16,
bfloat16 from raw bits, strided), and bad ones are refused in one line
naming the key."""

import ctypes
import hashlib
import json
import struct

import numpy as np
import pytest

import specbound
from conftest import need_pandas, read_safetensors, write_safetensors

# --- the canonical safetensors serialisation, written here independently of
# the library: what `safetensors.numpy.save(d)` writes (tensors by
# descending dtype alignment, then by name; compact header, no metadata,
# padded with spaces to a multiple of 8).

_ALIGN = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2}
_RANK = {"F64": 3, "F32": 2, "BF16": 1, "F16": 0}  # the crate's Dtype order


def canonical(tensors: dict) -> bytes:
    """tensors: name -> (dtype name, shape, raw little-endian bytes)."""
    order = sorted(tensors, key=lambda n: (-_RANK[tensors[n][0]], n))
    header, blobs, offset = {}, [], 0
    for name in order:
        dtype, shape, raw = tensors[name]
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + b"".join(blobs)


def raw_of(arrays: dict) -> dict:
    names = {np.dtype("float16"): "F16", np.dtype("float32"): "F32", np.dtype("float64"): "F64"}
    return {k: (names[v.dtype], v.shape, np.ascontiguousarray(v).astype(v.dtype.newbyteorder("<")).tobytes()) for k, v in arrays.items()}


# --- a DLPack producer over raw memory (any dtype code, any device), built
# with ctypes: how a bfloat16 tensor arrives without torch or ml_dtypes.

class _Device(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _Tensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", _Device),
        ("ndim", ctypes.c_int32),
        ("dtype", _DType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


class _Managed(ctypes.Structure):
    _fields_ = [("dl_tensor", _Tensor), ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p)]


_new_capsule = ctypes.pythonapi.PyCapsule_New
_new_capsule.restype = ctypes.py_object
_new_capsule.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]


class RawDLPack:
    """`words` (a C-contiguous NumPy array) exported as DLPack type
    (`code`, `bits`) on `device`; no deleter: this object owns everything."""

    NAME = ctypes.create_string_buffer(b"dltensor")

    def __init__(self, words: np.ndarray, code: int, bits: int, device: int = 1):
        self.words = np.ascontiguousarray(words)
        self.device = device
        self.shape = (ctypes.c_int64 * max(1, words.ndim))(*words.shape)
        t = _Tensor(
            ctypes.c_void_p(self.words.ctypes.data),
            _Device(device, 0),
            words.ndim,
            _DType(code, bits, 1),
            ctypes.cast(self.shape, ctypes.POINTER(ctypes.c_int64)),
            None,
            0,
        )
        self.managed = _Managed(t, None, None)

    def __dlpack__(self, **_):
        return _new_capsule(ctypes.addressof(self.managed), ctypes.addressof(self.NAME), None)

    def __dlpack_device__(self):
        return (self.device, 0)


class OnlyDLPack:
    """A NumPy array seen only through DLPack (neither ndarray nor __array__)."""

    def __init__(self, a: np.ndarray):
        self._a = a

    def __dlpack__(self, **kw):
        return self._a.__dlpack__(**kw)

    def __dlpack_device__(self):
        return self._a.__dlpack_device__()


def without_files(cert) -> dict:
    d = json.loads(cert.to_json())
    d["model"].pop("path")
    d["model"].pop("files")
    return d


def config_of(d) -> dict:
    return json.loads((d / "config.json").read_text())


@pytest.fixture(scope="module")
def arrays(one_layer) -> dict:
    return read_safetensors(one_layer / "model.safetensors")


@pytest.fixture(scope="module")
def disk_cert(one_layer):
    return specbound.certify(one_layer)


def test_a_dict_of_numpy_arrays_certifies_as_its_files(one_layer, arrays, disk_cert):
    c = specbound.certify(arrays, config=config_of(one_layer))
    assert c.certified and disk_cert.certified
    assert without_files(c) == without_files(disk_cert)
    model = json.loads(c.to_json())["model"]
    assert model["path"] == "<memory>"
    (f,) = model["files"]
    assert f["file"] == "<memory>"
    # The hash is that of the safetensors serialisation of the same dict.
    assert f["sha256"] == hashlib.sha256(canonical(raw_of(arrays))).hexdigest()
    try:
        import safetensors.numpy as stn
    except ImportError:
        return  # the serialisation above is checked without the package
    assert f["sha256"] == hashlib.sha256(stn.save(arrays)).hexdigest()


def test_dlpack_strided_and_config_objects_give_the_same_certificate(one_layer, arrays, disk_cert):
    # Every array through DLPack only, the 2-D ones Fortran-ordered
    # (strided), the config as a transformers-like object.
    class Config:
        def to_dict(self):
            return config_of(one_layer)

    wrapped = {k: OnlyDLPack(np.asfortranarray(v)) for k, v in arrays.items()}
    c = specbound.certify(wrapped, Config())
    assert without_files(c) == without_files(disk_cert)


def test_float16_and_bfloat16_are_read_exactly(one_layer, arrays, tmp_path):
    cfg = config_of(one_layer)
    # float16: NumPy arrays in memory, the same values in a file.
    half = {k: v.astype(np.float16) for k, v in arrays.items()}
    d16 = tmp_path / "f16"
    d16.mkdir()
    write_safetensors(d16 / "model.safetensors", half)
    (d16 / "config.json").write_text(json.dumps(cfg))
    assert without_files(specbound.certify(half, cfg)) == without_files(specbound.certify(d16))
    # bfloat16: the top 16 bits of each float32, given through DLPack
    # (kDLBfloat) and saved canonically; the hash then matches and verify
    # checks every matrix against the file.
    words = {k: (np.ascontiguousarray(v, dtype="<f4").view("<u4") >> 16).astype("<u2") for k, v in arrays.items()}
    mem = specbound.certify({k: RawDLPack(w, code=4, bits=16) for k, w in words.items()}, cfg)
    dbf = tmp_path / "bf16"
    dbf.mkdir()
    (dbf / "model.safetensors").write_bytes(canonical({k: ("BF16", w.shape, w.tobytes()) for k, w in words.items()}))
    (dbf / "config.json").write_text(json.dumps(cfg))
    disk = specbound.certify(dbf)
    assert mem.certified
    assert without_files(mem) == without_files(disk)
    assert json.loads(mem.to_json())["model"]["files"][0]["sha256"] == json.loads(disk.to_json())["model"]["files"][0]["sha256"]
    assert specbound.verify(mem, model=dbf).holds


def test_verify_against_other_files_says_what_the_hash_cannot_show(one_layer, arrays):
    c = specbound.certify(arrays, config_of(one_layer))
    r = specbound.verify(c, model=one_layer)
    assert not r.holds
    assert "weights in memory" in r.failure and "save_file" in r.failure and "\n" not in r.failure


def test_spectra_of_a_dict_and_of_its_files_are_the_same_frame(one_layer, arrays):
    pd = need_pandas()
    pattern = r"attention\.(self\.query|output\.dense)\.(weight|bias)"
    a = specbound.spectra(one_layer, include=pattern, schatten_p=(1, "0.5"))
    b = specbound.spectra(arrays, include=pattern, schatten_p=(1, "0.5"))
    fa, fb = a.to_frame(), b.to_frame()
    pd.testing.assert_frame_equal(fa, fb)
    assert list(fa.index) == [
        "encoder.layer.0.attention.output.dense.weight",
        "encoder.layer.0.attention.self.query.weight",
    ]
    assert a.certified and len(a) == 2
    # Tensors above max_elements are skipped, with the reason, the same way.
    wide = r"(query|intermediate\.dense)\.weight"
    small = [specbound.spectra(m, include=wide, max_elements=384 * 384) for m in (one_layer, arrays)]
    assert small[0].skipped == small[1].skipped
    assert [t for t, _ in small[1].skipped] == ["encoder.layer.0.intermediate.dense.weight"]
    assert small[1].tensors == ["encoder.layer.0.attention.self.query.weight"]
    # The columns are the CLI's --csv columns, in order.
    assert list(fa.columns[:3]) == ["slice", "rows", "cols"]
    assert "schatten_norm_0.5_hi" in fa.columns
    # Exact binary64 ends: lo <= hi, and sigma_1 <= ||W||_F.
    assert (fa["spectral_norm_lo"] <= fa["spectral_norm_hi"]).all()
    assert (fa["spectral_norm_lo"] <= fa["frobenius_norm_hi"]).all()
    assert json.loads(b.to_json())["model"] == "<memory>"
    assert "2 matrices" in repr(b)


def test_inspect_and_svd_take_arrays_in_memory(one_layer, arrays):
    i = specbound.inspect(arrays, config_of(one_layer))
    assert i["architecture"] == "bert" and i["layers"] == 1
    w = arrays["encoder.layer.0.attention.self.query.weight"]
    a = specbound.svd(w, precision="f64")
    b = specbound.svd(OnlyDLPack(np.asfortranarray(w)), precision="f64")
    assert a.to_json() == b.to_json()
    words = (np.ascontiguousarray(w, dtype="<f4").view("<u4") >> 16).astype("<u2")
    bf = specbound.svd(RawDLPack(words, code=4, bits=16), precision="f64")
    as_f32 = specbound.svd((words.astype("<u4") << 16).view("<f4"), precision="f64")
    assert bf.dtype == "bfloat16" and bf.lo.tolist() == as_f32.lo.tolist() and bf.hi.tolist() == as_f32.hi.tolist()


def one_line(excinfo) -> str:
    msg = str(excinfo.value)
    assert "\n" not in msg
    return msg


def test_bad_arrays_and_configs_are_one_line_naming_the_key(one_layer, arrays):
    cfg = config_of(one_layer)
    gpu = {"w": RawDLPack(np.zeros((2, 2), dtype="<f4"), code=2, bits=32, device=2)}
    with pytest.raises(ValueError) as e:
        specbound.certify(gpu, cfg)
    msg = one_line(e)
    assert "tensor 'w'" in msg and "CUDA" in msg and "call .cpu() first" in msg
    # Unused integer and bool buffers are ignored, as in a file (issue 30:
    # the int64 `embeddings.position_ids` of a transformers 4.x BERT state
    # dict); a used one is refused, naming it.
    extra = dict(arrays)
    extra["embeddings.position_ids"] = np.arange(16).reshape(1, 16)
    extra["mask"] = RawDLPack(np.zeros(4, dtype="<u1"), code=6, bits=8)
    bounds = specbound.certify(arrays, cfg).to_dict()["bounds"]
    assert specbound.certify(extra, cfg).to_dict()["bounds"] == bounds
    q = next(k for k in arrays if k.endswith("attention.self.query.weight"))
    used = dict(arrays)
    used[q] = np.zeros(np.asarray(arrays[q]).shape, dtype=np.int64)
    with pytest.raises(ValueError) as e:
        specbound.certify(used, cfg)
    assert f"tensor '{q}'" in one_line(e) and "I64" in str(e.value)
    with pytest.raises(ValueError) as e:
        specbound.certify({"c": np.zeros((2, 2), dtype=np.complex64)}, cfg)
    assert "tensor 'c'" in one_line(e)
    with pytest.raises(TypeError):
        specbound.certify({"x": "not an array"}, cfg)
    broken = dict(cfg)
    del broken["num_attention_heads"]
    with pytest.raises(ValueError) as e:
        specbound.certify(arrays, broken)
    # The message is the architecture reader's: it names the fact that is
    # missing and, the model being in memory, the config key that gives it.
    assert one_line(e) == (
        "<memory>: the number of attention heads cannot be inferred from tensor shapes: "
        "give 'num_attention_heads' in config= or pass heads="
    )
    with pytest.raises(ValueError) as e:
        specbound.certify(one_layer, cfg)
    assert "config applies to a model in memory" in one_line(e)


def changed(arrays: dict) -> dict:
    """The same tensors, one element of one changed (by its lowest bit)."""
    other = dict(arrays)
    name = "encoder.layer.0.attention.self.query.weight"
    w = np.array(arrays[name])
    w.view(np.uint32).flat[0] ^= 1
    other[name] = w
    return other


def test_verify_against_a_state_dict_compares_its_serialisation(one_layer, arrays):
    cfg = config_of(one_layer)
    c = specbound.certify(arrays, cfg)
    v = specbound.verify(c, arrays, cfg)
    assert v.holds and v.with_model and v.checks > len(c.matrices())
    r = specbound.verify(c, model=changed(arrays), config=cfg)
    assert r.verdict == "failed" and r.exit_code == 1
    assert r.failure.startswith("$.model.files[0].sha256: the weights in memory have SHA-256")
    assert "the certificate is for other tensors" in r.failure and "\n" not in r.failure
    with pytest.raises(ValueError) as e:
        specbound.verify(c, one_layer, cfg)
    assert "config applies to a model in memory" in one_line(e)
    with pytest.raises(ValueError) as e:
        specbound.verify(c, config=cfg)
    assert "config applies to a model in memory" in one_line(e)


def test_audit_of_a_state_dict_is_the_audit_of_its_files(one_layer, arrays, tmp_path):
    claims = tmp_path / "claims.csv"
    claims.write_text("model_id,bound,value\nm,ours,1.0\nm,edelman,1e30\n")
    disk = specbound.audit(one_layer, claims, model_id="m")
    mem = specbound.audit(arrays, claims, model_id="m", config=config_of(one_layer))
    assert mem.verdict == disk.verdict == "inconsistent"
    assert mem.results == disk.results


def test_an_init_in_memory_gives_the_measures_of_certify_init_on_disk(one_layer, arrays, tmp_path):
    cfg = config_of(one_layer)
    # Every weight halved (exactly): every distance W - W0 = W / 2 is nonzero.
    init = {k: (v * 0.5).astype(v.dtype) for k, v in arrays.items()}
    d0 = tmp_path / "init"
    d0.mkdir()
    write_safetensors(d0 / "model.safetensors", init)
    (d0 / "config.json").write_text(json.dumps(cfg))
    disk = json.loads(specbound.certify(one_layer, init=d0).to_json())
    mem = json.loads(specbound.certify(arrays, config=cfg, init=init).to_json())
    assert disk["measures"]["frobenius_distance"] is not None and disk["measures"]["log_spec_init"] is not None
    assert mem["measures"] == disk["measures"]
    assert mem["raw_weights"] == disk["raw_weights"]
    assert mem["init_model"] == {
        "path": "<memory>",
        "files": [{"file": "<memory>", "sha256": hashlib.sha256(canonical(raw_of(init))).hexdigest()}],
    }
    # The init is read with the model's config, so the model is in memory too.
    with pytest.raises(ValueError) as e:
        specbound.certify(one_layer, init=init)
    assert "an init in memory is read with the model's config=" in one_line(e)


def test_views_that_alias_in_memory_are_refused_before_any_allocation():
    # Issue 32: 8 bytes viewed as (40000, 40000) float64 (12.8 GB) through
    # DLPack aborted the interpreter; NumPy's own copy raised MemoryError.
    # One rule for both: more bytes than the memory the strides reach.
    one = np.ones(1, dtype="<f8")
    views = [
        np.lib.stride_tricks.as_strided(one, (40000, 40000), (0, 0)),
        np.broadcast_to(np.ones((1, 30000), dtype="<f4"), (30000, 30000)),
        np.lib.stride_tricks.as_strided(np.ones(1999, dtype="<f4"), (1000, 1000), (4, 4)),
    ]
    for v in views:
        for given in (v, OnlyDLPack(v)):
            try:
                with pytest.raises(ValueError) as e:
                    specbound.spectra({"w": given})
            except BufferError:
                continue  # a NumPy that does not export read-only views
            msg = one_line(e)
            assert "tensor 'w'" in msg and "would materialise" in msg and "stride 0" in msg, msg
    # Honest strided views are read: a transpose, a slice, a reversal.
    a = np.arange(12, dtype="<f4").reshape(3, 4) / 8
    for v in (a.T, a[:, ::2], a[::-1]):
        assert specbound.spectra({"w": v}).tensors == ["w"]
        assert specbound.spectra({"w": OnlyDLPack(np.ascontiguousarray(v))}).tensors == ["w"]


def test_nan_in_a_config_dict_names_the_key_and_value(one_layer, arrays):
    # Issue 32: the message pointed at a column of a JSON text never seen.
    for bad, key, value in [
        ({"layer_norm_eps": float("nan")}, "layer_norm_eps", "NaN"),
        ({"text_config": {"rope_theta": float("inf")}}, "text_config.rope_theta", "inf"),
        ({"ratios": [1.0, float("-inf")]}, "ratios.1", "-inf"),
    ]:
        cfg = dict(config_of(one_layer), **bad)
        with pytest.raises(ValueError) as e:
            specbound.certify(arrays, cfg)
        msg = one_line(e)
        assert f"config: key '{key}' is {value}, not a JSON number" in msg, msg
