"""device= without a GPU (CI never has one): "cuda" raises RuntimeError with
the command line's one line, an unknown name ValueError, "auto" warns and
computes on the CPU exactly what "cpu" does; the device is restored after."""

import warnings

import numpy as np
import pytest

import specbound
from conftest import QUERY_NPY, cli_error, run_cli


def test_device_cuda_without_a_gpu_raises_the_cli_line(cli):
    with pytest.raises(RuntimeError) as e:
        specbound.svd(np.eye(3), device="cuda")
    line = cli_error(run_cli(cli, "svd", QUERY_NPY, "--device", "cuda"))
    assert str(e.value) == line, (str(e.value), line)
    for call in (
        lambda: specbound.spectra("data/all-MiniLM-L6-v2", device="cuda"),
        lambda: specbound.certify(device="cuda"),
    ):
        with pytest.raises(RuntimeError):
            call()


def test_an_unknown_device_is_a_value_error():
    with pytest.raises(ValueError, match="cpu, cuda, auto"):
        specbound.svd(np.eye(3), device="tpu")


def test_device_auto_warns_and_computes_as_the_cpu():
    a = np.arange(12, dtype=np.float64).reshape(3, 4)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        auto = specbound.svd(a, device="auto")
    assert any("using the CPU" in str(x.message) for x in w), [str(x.message) for x in w]
    cpu = specbound.svd(a, device="cpu")
    assert list(auto.lo) == list(cpu.lo) and list(auto.hi) == list(cpu.hi)
    # The CPU is back after the call: a plain call needs no device.
    assert list(specbound.svd(a).lo) == list(cpu.lo)
