"""Every default of the Python signatures (their text, which help() and
inspect show, and the stubs) is the library's, declared once in
specbound::cmd::defaults and exported as specbound._specbound.DEFAULTS;
the signatures' own defaults (pyo3's) read the same constants."""

import ast
import inspect

from conftest import STUB
from specbound import _specbound

D = _specbound.DEFAULTS

# function -> parameter -> key of DEFAULTS
EXPECTED = {
    "svd": {"precision": "svd_precision", "schatten_p": "schatten_p", "rtol": "rtol", "device": "device"},
    "spectra": {"schatten_p": "schatten_p", "precision": "precision", "rtol": "rtol", "device": "device"},
    "certify": {"l_phi": "l_phi", "precision": "precision", "device": "device"},
    "inspect": {"l_phi": "l_phi"},
    "study": {"spectrum_layers": "spectrum_layers", "l_phi": "l_phi", "precision": "precision", "device": "device"},
    "report": {"spectrum_layers": "spectrum_layers"},
    "audit": {"rtol": "claim_rtol", "atol": "claim_atol", "precision": "precision", "rounding_units": "rounding_units"},
    "diff": {"rtol": "claim_rtol"},
}


def test_the_defaults_are_the_command_lines():
    assert D["rtol"] == 1e-11 and D["l_phi"] == "1.13" and D["schatten_p"] == (1, 2)
    assert D["spectrum_layers"] == "0-3" and D["precision"] == "f64" and D["svd_precision"] == "auto"


def test_every_signature_states_the_library_default():
    wrong = []
    for fn, params in EXPECTED.items():
        sig = inspect.signature(getattr(_specbound, fn))
        for name, key in params.items():
            got = sig.parameters[name].default
            if got != D[key]:
                wrong.append(f"{fn}({name}={got!r}), the library's is {D[key]!r}")
    assert not wrong, wrong


def test_every_stub_states_the_library_default():
    tree = ast.parse(STUB.read_text(encoding="utf-8"))
    found = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name in EXPECTED:
            args = node.args.args + node.args.kwonlyargs
            defaults = [None] * (len(node.args.args) - len(node.args.defaults)) + list(node.args.defaults)
            defaults += list(node.args.kw_defaults)
            found[node.name] = {a.arg: d for a, d in zip(args, defaults)}
    wrong = []
    for fn, params in EXPECTED.items():
        for name, key in params.items():
            got = ast.literal_eval(found[fn][name])
            if got != D[key]:
                wrong.append(f"{fn}({name}={got!r}) in the stub, the library's is {D[key]!r}")
    assert not wrong, wrong
