"""Type stubs of the compiled module ``specbound._specbound`` (re-exported
by ``specbound``). The docstrings at run time are the Rust doc comments,
each with an example."""

import os
from decimal import Decimal
from fractions import Fraction
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Tuple, Union, final

import numpy as np
import numpy.typing as npt

from specbound._answer import Answer

_Path = Union[str, "os.PathLike[str]"]
_Exponent = Union[int, float, str, Decimal]
_Real = Union[float, int, Fraction, Decimal]
# A model in memory: tensor names to arrays (NumPy, or anything with
# __dlpack__ on the CPU or __array__), and its config.
_Tensors = Mapping[str, Any]
_Config = Union[Mapping[str, Any], Any]
# A table in memory: a pandas DataFrame (anything with to_csv()).
_Table = Any

__version__: str
# The commands' defaults, declared once in the library
# (specbound::cmd::defaults): every signature below states them.
DEFAULTS: Dict[str, Any]
__all__ = [
    "AuditResult",
    "Bounds",
    "Certificate",
    "DEFAULTS",
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

@final
class Interval:
    """A closed interval ``[lo, hi]`` containing an exact value.

    >>> import numpy as np, specbound
    >>> from fractions import Fraction
    >>> Fraction(0.1) in specbound.svd(np.diag([3.0, 0.1])).singular_values[1]
    True
    """

    @property
    def lo(self) -> float: ...
    @property
    def hi(self) -> float: ...
    @property
    def mid(self) -> float:
        """The midpoint (an approximation lying in the interval)."""
    @property
    def rad(self) -> float:
        """An upper bound of the radius ``(hi - lo) / 2``."""
    @property
    def lo_exact(self) -> Optional[str]:
        """A decimal lower bound tighter than ``lo`` (MPFR results only)."""
    @property
    def hi_exact(self) -> Optional[str]:
        """A decimal upper bound tighter than ``hi`` (MPFR results only)."""
    def __contains__(self, x: _Real, /) -> bool:
        """Exactly whether ``x`` lies in the enclosure (decimal bounds included)."""

@final
class RankInterval:
    """The exact rank bounded by two integers, ``lo <= rank <= hi``.

    >>> import numpy as np, specbound
    >>> r = specbound.svd(np.eye(3)).rank
    >>> r.lo, r.hi, 3 in r
    (3, 3, True)
    """

    @property
    def lo(self) -> int: ...
    @property
    def hi(self) -> int: ...
    @property
    def decided(self) -> bool:
        """Whether the rank is decided (``lo == hi``)."""
    def __contains__(self, x: _Real, /) -> bool:
        """Exactly whether ``x`` is an integer in ``[lo, hi]``."""

@final
class SvdResult:
    """Certified singular values and norms of one matrix (see :func:`svd`).

    >>> import numpy as np, specbound
    >>> specbound.svd(np.eye(2)).certified
    True
    """

    @property
    def certified(self) -> bool: ...
    @property
    def reason(self) -> Optional[str]: ...
    @property
    def rows(self) -> int: ...
    @property
    def cols(self) -> int: ...
    @property
    def dtype(self) -> str: ...
    @property
    def precision(self) -> str: ...
    @property
    def lo(self) -> Optional[npt.NDArray[np.float64]]:
        """Lower ends, largest value first (read-only)."""
    @property
    def hi(self) -> Optional[npt.NDArray[np.float64]]:
        """Upper ends, index-matched with ``lo`` (read-only)."""
    @property
    def singular_values(self) -> Optional[List[Interval]]: ...
    @property
    def methods(self) -> Optional[List[str]]: ...
    @property
    def cluster_sizes(self) -> Optional[List[int]]: ...
    @property
    def structural_zeros(self) -> Optional[int]: ...
    @property
    def spectral_norm(self) -> Optional[Interval]: ...
    @property
    def frobenius_norm(self) -> Optional[Interval]: ...
    @property
    def nuclear_norm(self) -> Optional[Interval]: ...
    @property
    def norm_21(self) -> Optional[Interval]: ...
    @property
    def norm_11(self) -> Optional[Interval]: ...
    @property
    def stable_rank(self) -> Optional[Interval]: ...
    @property
    def rank(self) -> Optional[RankInterval]: ...
    @property
    def schatten(self) -> Optional[Dict[Any, Tuple[Optional[Interval], Optional[Interval]]]]:
        """p (as given) -> (sum sigma^p, Schatten norm); None where it overflowed."""
    @property
    def max_relative_radius(self) -> Optional[float]: ...
    def to_json(self) -> str:
        """The result as ``specbound svd --json`` writes it."""

def svd(
    a: Union[npt.ArrayLike, Any, _Path],
    *,
    precision: str = "auto",
    schatten_p: Iterable[_Exponent] = (1, 2),
    rtol: float = 1e-11,
    tensor: Optional[str] = None,
    revision: Optional[str] = None,
    device: str = "cpu",
) -> SvdResult:
    """Certified enclosures of all singular values of a 2-D float or integer array (integers converted exactly or refused), or
    of a matrix file, or of a tensor of a model or Hugging Face id.

    >>> import numpy as np, specbound
    >>> specbound.svd(np.ones((2, 3), dtype=np.float16)).rank.lo
    1
    """

@final
class Bounds:
    """The certified bounds B_ours and B_Edel.

    >>> import specbound
    >>> b = specbound.certify().bounds
    >>> b.ours.lo <= b.ours.hi
    True
    """

    @property
    def ours(self) -> Interval: ...
    @property
    def edelman(self) -> Interval: ...

@final
class Certificate:
    """A certificate of a model, or the reason it could not be certified.

    >>> import specbound
    >>> specbound.certify().certified
    True
    """

    @property
    def certified(self) -> bool: ...
    @property
    def reason(self) -> Optional[str]: ...
    @property
    def bounds(self) -> Optional[Bounds]: ...
    @property
    def measures(self) -> Optional[Dict[str, Interval]]: ...
    def to_json(self) -> str: ...
    def to_dict(self) -> Dict[str, Any]: ...
    def save(self, path: _Path) -> None: ...
    def matrices(self) -> Any:
        """``pandas.DataFrame``: the authors' matrix_summary table."""
    def contributions(self) -> Any:
        """``pandas.DataFrame``: the authors' p_contribution_raw table."""
    def singular_values(self) -> Any:
        """``pandas.DataFrame``: every singular value of every proxy matrix."""
    def tables(self, model_id: Optional[str] = None) -> Dict[str, Any]:
        """The four ``--csv`` tables as ``pandas.DataFrame`` objects, by file name."""

def certify(
    model: Union[_Path, _Tensors, None] = None,
    config: Optional[_Config] = None,
    *,
    l_phi: Union[str, float, int, Decimal] = "1.13",
    grid_m: Optional[int] = None,
    precision: str = "f64",
    progress: Union[bool, Callable[[int, int], Any]] = False,
    heads: Optional[int] = None,
    layers: Optional[int] = None,
    revision: Optional[str] = None,
    model_id: Optional[str] = None,
    measures: bool = False,
    init: Union[_Path, _Tensors, None] = None,
    stack: Optional[str] = None,
    device: str = "cpu",
) -> Certificate:
    """Certifies a whole checkpoint: a path or a Hugging Face id (None: the
    bundled all-MiniLM-L6-v2), or a mapping of tensor names to arrays with
    its ``config`` (a dict as in config.json, or an object with to_dict()).

    >>> import specbound
    >>> b = specbound.certify().bounds
    >>> b.ours.hi < b.edelman.lo
    True
    """

@final
class SpectraResult:
    r"""Certified spectra of a checkpoint's matrices (see :func:`spectra`).

    >>> import specbound
    >>> len(specbound.spectra("data/all-MiniLM-L6-v2", include=r"layer\.0\..*query\.weight"))
    1
    """

    @property
    def certified(self) -> bool: ...
    @property
    def reason(self) -> Optional[str]: ...
    @property
    def tensors(self) -> List[str]: ...
    @property
    def skipped(self) -> List[Tuple[str, str]]: ...
    def to_frame(self) -> Any:
        """The table of ``spectra --csv`` as a pandas DataFrame indexed by tensor name."""
    def singular_values(self) -> Any:
        """Every certified singular value (``singular_values=True``) as a pandas DataFrame."""
    def to_json(self) -> str:
        """The report as ``spectra --json`` prints it."""
    def __len__(self) -> int: ...

def spectra(
    model: Union[_Path, _Tensors],
    config: Optional[_Config] = None,
    *,
    schatten_p: Iterable[_Exponent] = (1, 2),
    include: Optional[str] = None,
    exclude: Optional[str] = None,
    max_elements: Optional[int] = None,
    precision: str = "f64",
    rtol: float = 1e-11,
    revision: Optional[str] = None,
    csv: Optional[_Path] = None,
    device: str = "cpu",
    singular_values: bool = False,
) -> SpectraResult:
    r"""Certified spectra of every 2-D weight tensor (``specbound spectra``).

    >>> import specbound
    >>> specbound.spectra("data/all-MiniLM-L6-v2", include=r"layer\.0\..*query\.weight").certified
    True
    """

def load(path: _Path) -> Certificate:
    """Reads a certificate file strictly (its intervals are claims until verified)."""

@final
class VerifyResult:
    """Outcome of :func:`verify` ("holds" 0, "failed" 1, "unconfirmed" 3)."""

    @property
    def verdict(self) -> str: ...
    @property
    def answer(self) -> Answer: ...
    @property
    def exit_code(self) -> int: ...
    @property
    def holds(self) -> bool: ...
    @property
    def checks(self) -> int: ...
    @property
    def failure(self) -> Optional[str]: ...
    @property
    def unconfirmed(self) -> List[str]: ...
    @property
    def with_model(self) -> bool: ...

def verify(
    path: Union[_Path, Certificate],
    model: Union[_Path, _Tensors, None] = None,
    config: Optional[_Config] = None,
    *,
    revision: Optional[str] = None,
    max_precision_bits: Optional[int] = None,
) -> VerifyResult:
    """Checks a certificate; with ``model``, against the weights.

    >>> import specbound
    >>> specbound.verify(specbound.certify()).holds
    True
    """

@final
class AuditResult:
    """Outcome of :func:`audit` ("consistent" 0, "inconsistent" 1, "undecided" 3)."""

    @property
    def verdict(self) -> str: ...
    @property
    def answer(self) -> Answer: ...
    @property
    def exit_code(self) -> int: ...
    @property
    def layout(self) -> str: ...
    @property
    def consistent(self) -> int: ...
    @property
    def inconsistent(self) -> int: ...
    @property
    def undecided(self) -> int: ...
    @property
    def results(self) -> List[Dict[str, Any]]: ...
    def to_frame(self) -> Any:
        """``pandas.DataFrame`` of ``results``."""
    def to_json(self) -> str: ...

@final
class SpectrumAuditResult:
    """Outcome of :func:`audit` for claimed singular values (a 1-D ``.npy``):
    "pass" 0, "fail" 1, "undecided" 3, "inconclusive" 1."""

    @property
    def verdict(self) -> str: ...
    @property
    def answer(self) -> Optional[Answer]: ...
    @property
    def exit_code(self) -> int: ...
    @property
    def reason(self) -> Optional[str]: ...
    def to_json(self) -> str: ...
    def to_dict(self) -> Dict[str, Any]: ...

def audit(
    model: Union[_Path, _Tensors],
    claims: Union[_Path, _Table],
    *,
    rtol: float = 0.0,
    atol: float = 0.0,
    precision: str = "f64",
    rounding_units: float = 1.0,
    tensor: Optional[str] = None,
    revision: Optional[str] = None,
    model_id: Optional[str] = None,
    init: Union[_Path, _Tensors, None] = None,
    config: Optional[_Config] = None,
    stack: Optional[str] = None,
) -> Union[AuditResult, SpectrumAuditResult]:
    """Checks published numbers (a CSV about ``model``, or a 1-D ``.npy`` of
    claimed singular values of one matrix) against certified values."""

@final
class DiffResult:
    """Outcome of :func:`diff` (exit code 1 when certainly changed)."""

    @property
    def certainly_changed(self) -> bool: ...
    @property
    def answer(self) -> Answer: ...
    @property
    def exit_code(self) -> int: ...
    @property
    def rtol(self) -> float: ...
    @property
    def compared(self) -> int: ...
    @property
    def larger(self) -> int: ...
    @property
    def smaller(self) -> int: ...
    @property
    def indistinguishable(self) -> int: ...
    @property
    def beyond_rtol(self) -> int: ...
    @property
    def only_in_a(self) -> int: ...
    @property
    def only_in_b(self) -> int: ...
    @property
    def header(self) -> List[Dict[str, str]]: ...
    def to_frame(self) -> Any:
        """``pandas.DataFrame``: one row per compared quantity."""
    def to_text(self, max_rows: int = 25) -> str: ...
    def to_json(self) -> str: ...

def diff(
    a: Union[_Path, Certificate], b: Union[_Path, Certificate], rtol: float = 0.0
) -> DiffResult:
    """Compares two certificates quantity by quantity.

    >>> import specbound
    >>> c = specbound.certify()
    >>> specbound.diff(c, c).exit_code
    0
    """

def inspect(
    model: Union[_Path, _Tensors],
    config: Optional[_Config] = None,
    *,
    heads: Optional[int] = None,
    l_phi: Union[str, float, int, Decimal] = "1.13",
    revision: Optional[str] = None,
    stack: Optional[str] = None,
) -> Dict[str, Any]:
    """The recognised architecture and its proxy matrices (``inspect --json``).

    >>> import specbound
    >>> specbound.inspect("data/all-MiniLM-L6-v2")["architecture"]
    'bert'
    """

def study(
    models: Iterable[_Path],
    *,
    out: _Path,
    model_ids: Optional[Iterable[str]] = None,
    models_file: Optional[_Path] = None,
    primary: Optional[str] = None,
    spectrum_layers: str = "0-3",
    l_phi: Union[str, float, int, Decimal] = "1.13",
    grid_m: Optional[int] = None,
    precision: str = "f64",
    heads: Optional[int] = None,
    layers: Optional[int] = None,
    device: str = "cpu",
    steps: Optional[Iterable[Optional[int]]] = None,
    runs: Optional[Iterable[Optional[str]]] = None,
    revisions: Optional[Iterable[Optional[str]]] = None,
    init: Optional[_Path] = None,
    stack: Optional[str] = None,
) -> Dict[str, Any]:
    """Certifies many checkpoints; writes the tables, figures and HTML report into ``out``."""

def merge(
    parts: Iterable[_Path],
    *,
    out: Optional[_Path] = None,
    csv: Optional[_Path] = None,
    model_id: Optional[str] = None,
) -> Certificate:
    """Merges the parts of a sharded run (``certify --shard K/N``) into one certificate."""

def report(
    certs: Iterable[_Path],
    *,
    out: _Path,
    model_ids: Optional[Iterable[str]] = None,
    primary: Optional[str] = None,
    spectrum_layers: str = "0-3",
) -> str:
    """Writes the study's HTML report from existing certificates; returns its path."""
