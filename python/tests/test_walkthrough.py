"""docs/python.md stays true: its Python blocks run, in order, in one
namespace, and every output it shows (comment lines right after an
expression) is what the expression gives. The matplotlib block runs when
matplotlib is installed (not required: the suite does not install it)."""

import ast
import re

import pytest

from conftest import REPO, need_pandas

DOC = REPO / "docs" / "python.md"


def blocks():
    return re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.S)


def shown_outputs(source: str, tree: ast.Module):
    """(expression statement, the output shown in the comments after it)."""
    lines = source.splitlines()
    for node in tree.body:
        if not isinstance(node, ast.Expr):
            continue
        shown = []
        k = node.end_lineno  # index of the line after the statement
        while k < len(lines) and lines[k].startswith("# "):
            shown.append(lines[k][2:])
            k += 1
        if shown:
            yield node, " ".join(shown)


def norm(text: str) -> str:
    return " ".join(text.split())


def test_the_walkthrough_runs_and_shows_what_it_says(tmp_path, monkeypatch):
    pd = need_pandas()
    import specbound

    pd.set_option("display.width", 200)
    # The files the checking block names, in a directory where
    # data/all-MiniLM-L6-v2 is the bundle.
    (tmp_path / "data").symlink_to(REPO / "data")
    monkeypatch.chdir(tmp_path)
    cert = specbound.certify()
    for name in ("cert.json", "old.json", "new.json"):
        cert.save(name)
    (tmp_path / "claims.csv").write_text("model_id,bound,value\nm,ours,20573.03\n")
    # The Hugging Face id the walk-through names, in a cache of its own
    # (the bundled files linked into the hub's layout).
    commit = "1" * 40
    repo = tmp_path / "hub" / "models--sentence-transformers--all-MiniLM-L6-v2"
    snap = repo / "snapshots" / commit
    snap.mkdir(parents=True)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)
    for f in ("config.json", "model.safetensors"):
        (snap / f).symlink_to(REPO / "data" / "all-MiniLM-L6-v2" / f)
    for k in ("HUGGINGFACE_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))

    found = blocks()
    assert len(found) >= 5
    namespace = {}
    checked = 0
    for source in found:
        if "matplotlib" in source:
            try:
                import matplotlib
            except ImportError:
                continue
            matplotlib.use("Agg")
        tree = ast.parse(source)
        outputs = {id(n): s for n, s in shown_outputs(source, tree)}
        for node in tree.body:
            code = compile(ast.Module(body=[node], type_ignores=[]), str(DOC), "exec")
            if id(node) in outputs:
                value = eval(compile(ast.Expression(node.value), str(DOC), "eval"), namespace)
                assert norm(repr(value)) == norm(outputs[id(node)]), ast.unparse(node)
                checked += 1
            else:
                exec(code, namespace)
    assert checked >= 6
