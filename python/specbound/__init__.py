"""Certified singular values, norms and generalization-bound proxies of
Transformer weights, from Python.

Every interval this package returns contains the exact value for the
weights as stored; where that cannot be proven, the result says
``certified = False`` and why. The computations are those of the
``specbound`` command line (the same Rust library, compiled into
``specbound._specbound``); nothing is recomputed in Python.

>>> import numpy as np, specbound
>>> r = specbound.svd(np.diag([2.0, 1.0]))
>>> 2.0 in r.spectral_norm
True
"""

from ._answer import Answer
from ._specbound import (
    AuditResult,
    Bounds,
    Certificate,
    DiffResult,
    Interval,
    RankInterval,
    SpectraResult,
    SpectrumAuditResult,
    SvdResult,
    VerifyResult,
    __version__,
    audit,
    certify,
    diff,
    inspect,
    load,
    merge,
    report,
    spectra,
    study,
    svd,
    verify,
)

__all__ = [
    "Answer",
    "AuditResult",
    "Bounds",
    "Certificate",
    "DiffResult",
    "Interval",
    "RankInterval",
    "SpectraResult",
    "SpectrumAuditResult",
    "SvdResult",
    "VerifyResult",
    "__version__",
    "audit",
    "certify",
    "diff",
    "inspect",
    "load",
    "merge",
    "report",
    "spectra",
    "study",
    "svd",
    "verify",
]
