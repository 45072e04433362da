"""The type stubs match the compiled module (mypy's stubtest), and code
using the package type-checks under mypy --strict; the stub parses
without warnings."""

import ast
import subprocess
import sys
import warnings

from conftest import STUB, missing

USE = '''
import numpy as np
import specbound
from fractions import Fraction

r = specbound.svd(np.eye(2, dtype=np.float32), precision="f64", schatten_p=(1, "0.5"))
lo: float = r.spectral_norm.lo if r.spectral_norm is not None else 0.0
inside: bool = r.spectral_norm is not None and Fraction(1) in r.spectral_norm
c = specbound.certify(None, l_phi="1.13", progress=lambda done, total: None)
if c.bounds is not None:
    hi: float = c.bounds.ours.hi
code: int = specbound.verify(c).exit_code + specbound.diff(c, c, rtol=0.0).exit_code
text: str = c.to_json()
'''


def mypy():
    try:
        import mypy  # noqa: F401
    except ImportError:
        missing("mypy is not installed (pip install mypy)")


def test_stubs_match_the_compiled_module():
    mypy()
    # Every class is final at run time, which @final in the stubs says;
    # PEP 800's @disjoint_base would say it again.
    proc = subprocess.run(
        [sys.executable, "-m", "mypy.stubtest", "specbound._specbound", "--ignore-disjoint-bases"],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_code_using_the_package_type_checks(tmp_path):
    mypy()
    f = tmp_path / "use.py"
    f.write_text(USE)
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", str(f)], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_stub_has_no_invalid_escape_sequences():
    # Regression: two docstrings of the stub quoted a regex (r"layer\.0\...")
    # inside a plain triple-quoted string, so every parse of the stub warned
    # "invalid escape sequence" (an error in a future Python).
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ast.parse(STUB.read_text(encoding="utf-8"))
