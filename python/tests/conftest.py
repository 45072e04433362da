"""Shared helpers of the Python test suite.

The suite compares the module with the command line on the same inputs.
It needs the CLI binary (``target/release/specbound``, or the path in
``SPECBOUND_CLI``), pandas and mypy. When one is missing the tests that need it
fail under CI (the ``CI`` environment variable is set, as ``.ci/run`` does)
and are skipped, with the reason, on a developer machine.
"""

import json
import os
import struct
import subprocess
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[2]
BUNDLE = REPO / "data" / "all-MiniLM-L6-v2"
QUERY_NPY = REPO / "data" / "minilm-l0-query.npy"
STUB = REPO / "python" / "specbound" / "_specbound.pyi"


def missing(what: str) -> None:
    """Fails under CI, skips elsewhere: a part the test needs is absent."""
    if os.environ.get("CI"):
        pytest.fail(f"{what} (CI is set, so this is a failure, not a skip)")
    pytest.skip(what)


def need_pandas():
    try:
        import pandas
    except ImportError:
        missing("pandas is not installed (pip install pandas)")
    return pandas


@pytest.fixture(scope="session")
def cli() -> Path:
    path = Path(os.environ.get("SPECBOUND_CLI", REPO / "target" / "release" / "specbound"))
    if not path.is_file():
        missing(f"the specbound CLI is not built at {path} (cargo build --release, or set SPECBOUND_CLI)")
    return path


def run_cli(cli: Path, *args, cwd: Path = REPO) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(cli), *map(str, args)], cwd=cwd, capture_output=True, text=True, timeout=900
    )


def cli_error(proc: subprocess.CompletedProcess) -> str:
    """The CLI's one-line error message, without its `specbound: error: ` prefix."""
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    prefix = "specbound: error: "
    assert lines[0].startswith(prefix), lines[0]
    return lines[0][len(prefix):]


def cli_usage_error(proc: subprocess.CompletedProcess) -> str:
    """The CLI's one-line usage error (an option value its parser refused):
    `specbound: invalid value ...: <the library's message> (see --help)`,
    without the prefix and the `(see --help)`."""
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    prefix, suffix = "specbound: ", " (see --help)"
    assert lines[0].startswith(prefix) and lines[0].endswith(suffix), lines[0]
    return lines[0][len(prefix) : -len(suffix)]


_DTYPES = {"F16": np.float16, "F32": np.float32, "F64": np.float64}


def read_safetensors(path: Path) -> dict:
    """The tensors of a safetensors file (float dtypes), as NumPy arrays."""
    raw = path.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + n])
    out = {}
    for name, meta in header.items():
        if name == "__metadata__":
            continue
        start, end = meta["data_offsets"]
        data = raw[8 + n + start : 8 + n + end]
        out[name] = np.frombuffer(data, dtype=np.dtype(_DTYPES[meta["dtype"]]).newbyteorder("<")).reshape(meta["shape"])
    return out


def write_safetensors(path: Path, tensors: dict) -> None:
    """Writes float arrays as a safetensors file (little-endian, C order)."""
    names = {v: k for k, v in _DTYPES.items()}
    header, blobs, offset = {}, [], 0
    for name, arr in tensors.items():
        a = np.ascontiguousarray(arr)
        blob = a.astype(a.dtype.newbyteorder("<")).tobytes()
        header[name] = {
            "dtype": names[a.dtype.type],
            "shape": list(a.shape),
            "data_offsets": [offset, offset + len(blob)],
        }
        blobs.append(blob)
        offset += len(blob)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    path.write_bytes(struct.pack("<Q", len(text)) + text + b"".join(blobs))


@pytest.fixture(scope="session")
def one_layer(tmp_path_factory) -> Path:
    """The bundled model's first layer as a one-layer model of its own."""
    d = tmp_path_factory.mktemp("one-layer")
    tensors = read_safetensors(BUNDLE / "model.safetensors")
    write_safetensors(
        d / "model.safetensors",
        {k: v for k, v in tensors.items() if k.startswith("encoder.layer.0.")},
    )
    cfg = json.loads((BUNDLE / "config.json").read_text())
    cfg["num_hidden_layers"] = 1
    (d / "config.json").write_text(json.dumps(cfg))
    return d


@pytest.fixture(scope="session")
def bundled_cert():
    """The bundled model's certificate, made once, as `specbound.certify()`
    makes it in the repository root (the model found by default)."""
    import specbound

    here = os.getcwd()
    os.chdir(REPO)
    try:
        return specbound.certify()
    finally:
        os.chdir(here)
