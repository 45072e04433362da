"""Every public function and class has an example in its docstring, and
every example in a public docstring runs and prints what it says."""

import doctest

import pytest

import specbound
from conftest import REPO, need_pandas

PUBLIC = [n for n in specbound.__all__ if n != "__version__"]


def docstrings():
    yield "specbound", specbound.__doc__
    for name in PUBLIC:
        obj = getattr(specbound, name)
        yield name, obj.__doc__
        if isinstance(obj, type):
            for attr, member in sorted(vars(obj).items()):
                if not attr.startswith("_"):
                    yield f"{name}.{attr}", getattr(member, "__doc__", None)


EXAMPLES = [(name, doc) for name, doc in docstrings() if doc and ">>>" in doc]


def test_every_public_function_and_class_has_an_example():
    for name in PUBLIC:
        doc = getattr(specbound, name).__doc__ or ""
        assert ">>>" in doc, f"{name} has no example"
    assert len(EXAMPLES) > len(PUBLIC)


@pytest.fixture(scope="module")
def cached_certify():
    """`certify` with its results kept: the examples certify the bundled
    model again and again, and a certificate depends only on the
    arguments (the files do not change during the run)."""
    real = specbound.certify
    cache = {}

    def certify(*args, **kwargs):
        key = repr((args, sorted(kwargs.items())))
        if key not in cache:
            cache[key] = real(*args, **kwargs)
        return cache[key]

    return certify


@pytest.mark.parametrize("name,doc", EXAMPLES, ids=[n for n, _ in EXAMPLES])
def test_docstring_examples_run(name, doc, monkeypatch, cached_certify):
    need_pandas()
    monkeypatch.chdir(REPO)  # the examples name data/all-MiniLM-L6-v2
    monkeypatch.setattr(specbound, "certify", cached_certify)
    test = doctest.DocTestParser().get_doctest(doc, {}, name, None, 0)
    report = []
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    runner.run(test, out=report.append)
    assert runner.failures == 0, "".join(report)
