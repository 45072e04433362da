"""specbound.svd: containment of exact spectra (exact oracles, decided with
fractions.Fraction, no tolerance anywhere), input layouts and dtypes,
agreement with the CLI, and every error path."""

import json
import math
from decimal import Decimal
from fractions import Fraction

import numpy as np
import pytest

import specbound
from conftest import QUERY_NPY, cli_error, cli_usage_error, run_cli


def hadamard(k: int) -> np.ndarray:
    h = np.array([[1.0]])
    for _ in range(k):
        h = np.block([[h, h], [h, -h]])
    return h


def signed_permutation(n: int, rng) -> np.ndarray:
    p = np.zeros((n, n))
    p[np.arange(n), rng.permutation(n)] = rng.choice([-1.0, 1.0], size=n)
    return p


def dyadic_orthogonal(n: int, rng, mix: bool = False) -> np.ndarray:
    """An exactly orthogonal n x n matrix: blocks H_{4^j} / 2^j (entries
    +-2^-j) between random signed permutations; `mix` multiplies two such
    (entries short sums of powers of two, still exact)."""

    def one():
        q = np.zeros((n, n))
        start = 0
        while start < n:
            left = n - start
            j = max(j for j in range(4) if 4**j <= left and (j == 0 or rng.integers(3) != 0))
            b = 4**j
            q[start : start + b, start : start + b] = hadamard(2 * j) / 2**j
            start += b
        return signed_permutation(n, rng) @ q @ signed_permutation(n, rng)

    q = one() @ one() if mix else one()
    # The oracle's premise, checked exactly: every product and sum here is a
    # short dyadic number, so the float result is the exact Q^T Q.
    assert np.array_equal(q.T @ q, np.eye(n))
    return q


def scaled(d, rows: int, cols: int, rng, mix: bool = False) -> np.ndarray:
    """A rows x cols matrix with singular values exactly |d_i|
    (len(d) = min(rows, cols)): D Q (rows scaled) or Q D (columns scaled);
    every entry d_i q_ij is computed exactly."""
    k = min(rows, cols)
    assert len(d) == k
    d = np.asarray(d, dtype=np.float64)
    if rows <= cols:
        q = dyadic_orthogonal(cols, rng, mix)[:rows, :]
        return d[:, None] * q
    q = dyadic_orthogonal(rows, rng, mix)[:, :cols]
    return q * d[None, :]


def exact_sigma(d):
    return sorted((abs(Fraction(float(x))) for x in d), reverse=True)


def assert_spectrum_contained(r, d):
    assert r.certified, r.reason
    sigma = exact_sigma(d)
    assert len(r.singular_values) == len(sigma)
    for i, (iv, s) in enumerate(zip(r.singular_values, sigma)):
        assert s in iv, (i, s, iv)
        assert Fraction(r.lo[i]) <= s <= Fraction(r.hi[i]), (i, s)


def spectra(rng, k: int):
    """Spectrum families like the Rust soundness tests' (exact in D Q)."""
    return {
        "integers": [float(i + 1) for i in range(k)],
        "repeats": [float(1 + i % 3) for i in range(k)],
        "cluster": [1.0 + i * 2.0**-50 for i in range(k)],
        "zeros": [0.0 if i % 2 == 0 else float(i + 1) for i in range(k)],
        "graded": [2.0 ** -(i * 1000 // k) for i in range(k)],
        "signed": [float(s * v) for s, v in zip(rng.choice([-1, 1], k), rng.integers(0, 2**20, k))],
        "huge": [float(v) * 2.0**1000 for v in rng.integers(1, 100, k)],
        "tiny": [float(v) * 2.0**-1044 for v in rng.integers(1, 1000, k)],
    }


@pytest.mark.parametrize("precision", ["f64", "extended", "auto"])
@pytest.mark.parametrize("shape", [(24, 40), (40, 24), (33, 33)])
def test_exact_spectra_are_contained(precision, shape):
    rng = np.random.default_rng(hash((precision, shape)) % 2**32)
    k = min(shape)
    for name, d in spectra(rng, k).items():
        for mix in (False, True):
            a = scaled(d, *shape, rng, mix)
            r = specbound.svd(a, precision=precision)
            if not r.certified:
                continue  # inconclusive is allowed; a wrong interval is not
            assert_spectrum_contained(r, d)


def test_mpfr_spectra_and_their_decimal_bounds_are_contained():
    rng = np.random.default_rng(7)
    d = [3.0, 1.0 + 2.0**-50, 1.0, 2.0**-30, 0.0]
    a = scaled(d, 5, 9, rng, mix=True)
    r = specbound.svd(a, precision="mpfr:128")
    assert_spectrum_contained(r, d)
    assert all(m == "mpfr-128" for m in r.methods)
    for iv, s in zip(r.singular_values, exact_sigma(d)):
        # The decimal bounds are finer than the floats and enclose too.
        lo, hi = Fraction(Decimal(iv.lo_exact)), Fraction(Decimal(iv.hi_exact))
        assert lo <= s <= hi
    # sigma_1's decimals carry over to the spectral norm.
    assert r.spectral_norm.lo_exact == r.singular_values[0].lo_exact
    # Containment uses the decimal bounds: a float inside [lo, hi] but
    # outside the decimal bounds is not in the interval.
    iv = r.singular_values[0]
    if Fraction(Decimal(iv.lo_exact)) > Fraction(iv.lo):
        assert iv.lo not in iv


def test_norms_rank_and_schatten_contain_their_exact_values():
    rng = np.random.default_rng(11)
    # Perfect squares and powers of two, so that the p = 1/2, 3/2 and 1/10
    # quantities are rational too.
    d = [9.0, 4.0, 4.0, 0.25, 0.0, 0.0, 1024.0 * 2.0**-40]
    a = np.zeros((7, 10))
    a[np.arange(7), rng.permutation(10)[:7]] = d  # one entry per row and column
    r = specbound.svd(a, schatten_p=(0, 1, 2, 3, "0.5", 1.5, 0.1))
    assert_spectrum_contained(r, d)
    fd = sorted((abs(Fraction(x)) for x in d), reverse=True)
    s2 = sum(x * x for x in fd)
    nonzero = sum(1 for x in fd if x)
    # ||A||_F^2 = sum d^2 exactly; the norms are nonnegative, so compare squares.
    assert Fraction(r.frobenius_norm.lo) ** 2 <= s2 <= Fraction(r.frobenius_norm.hi) ** 2
    assert sum(fd) in r.nuclear_norm
    assert sum(fd) in r.norm_21  # one nonzero per column: column norms are |d_i|
    assert sum(abs(Fraction(x)) for x in a.flat) in r.norm_11
    assert s2 / fd[0] ** 2 in r.stable_rank
    assert nonzero in r.rank
    # p keys are the objects given; 0 is the rank, whose norm is None.
    assert set(r.schatten) == {0, 1, 2, 3, "0.5", 1.5, 0.1}
    power0, norm0 = r.schatten[0]
    assert nonzero in power0 and norm0 is None
    assert sum(fd) in r.schatten[1][0] and sum(fd) in r.schatten[1][1]
    assert s2 in r.schatten[2][0]
    assert sum(x**3 for x in fd) in r.schatten[3][0]
    roots = {Fraction(9): 3, Fraction(4): 2, Fraction(1, 4): Fraction(1, 2), Fraction(0): 0}
    roots[Fraction(1024.0 * 2.0**-40)] = Fraction(32, 2**20)
    half = sum(roots[x] for x in fd)
    assert half in r.schatten["0.5"][0] and half**2 in r.schatten["0.5"][1]
    assert sum(x * roots[x] for x in fd) in r.schatten[1.5][0]
    # The float 0.1 is read as one tenth: 1024^(1/10) = 2, 9^(1/10) is not
    # rational, so check a matrix made for it.
    tenth = specbound.svd(np.diag([1024.0, 1.0, 2.0**-30]), schatten_p=[0.1])
    assert 2 + 1 + Fraction(1, 8) in tenth.schatten[0.1][0]


@pytest.mark.parametrize("dtype", [np.float16, np.float32])
def test_low_precision_inputs_are_converted_exactly(dtype):
    rng = np.random.default_rng(3)
    # Spectra and entries representable in float16 (and so in float32).
    d = [float(v) * 2.0**e for v, e in zip(rng.integers(1, 2048, 16), rng.integers(-3, 4, 16))]
    d[5] = d[6]  # an exact repeat
    a = scaled(d, 16, 32, rng)
    low = a.astype(dtype)
    assert np.array_equal(low.astype(np.float64), a)  # the premise: exact
    r = specbound.svd(low)
    assert r.dtype == np.dtype(dtype).name
    assert_spectrum_contained(r, d)
    # The same exact matrix in float64 gives the same certificate.
    r64 = specbound.svd(a)
    assert np.array_equal(r.lo, r64.lo) and np.array_equal(r.hi, r64.hi)


def test_order_strides_and_byte_order_do_not_change_the_matrix():
    rng = np.random.default_rng(5)
    a = rng.standard_normal((30, 50)).astype(np.float32)
    base = specbound.svd(a)
    same = [
        np.asfortranarray(a),
        a.astype(">f4"),  # big-endian
        np.ascontiguousarray(a.T).T,  # a Fortran-ordered view
        np.repeat(a, 2, axis=1)[:, ::2],  # a strided view
    ]
    for b in same:
        r = specbound.svd(b)
        assert np.array_equal(r.lo, base.lo) and np.array_equal(r.hi, base.hi)
        assert r.to_json() == base.to_json()
    # Reversed rows and columns, and the transpose, have the same singular
    # values: enclosures of the same numbers must meet.
    for b in (a[::-1, ::-1], a.T):
        r = specbound.svd(b)
        assert r.certified
        assert np.all(np.maximum(r.lo, base.lo) <= np.minimum(r.hi, base.hi))


def test_results_are_read_only_arrays_largest_first():
    r = specbound.svd(np.diag([1.0, 3.0, 2.0]))
    assert r.lo.dtype == np.float64 and r.lo.shape == (3,)
    assert list(r.lo) == sorted(r.lo, reverse=True)
    with pytest.raises(ValueError):
        r.lo[0] = 0.0
    assert r.rows == r.cols == 3 and r.structural_zeros == 0
    assert "certified" in repr(r)


def test_python_and_cli_give_the_same_json(cli):
    py = json.loads(specbound.svd(np.load(QUERY_NPY)).to_json())
    proc = run_cli(cli, "svd", QUERY_NPY, "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert py.pop("input") == "array"
    out.pop("input")
    assert py == out


def test_an_uncertifiable_matrix_is_inconclusive_not_an_error(cli, tmp_path):
    a = np.full((2, 2), 1e308)
    r = specbound.svd(a)
    assert not r.certified
    assert r.lo is None and r.spectral_norm is None and r.rank is None
    assert "inconclusive" in repr(r)
    with pytest.raises(ValueError, match="inconclusive"):
        r.to_json()
    f = tmp_path / "big.npy"
    np.save(f, a)
    proc = run_cli(cli, "svd", f)
    assert proc.returncode == 1
    assert proc.stderr.strip() == f"specbound: {f}: inconclusive: {r.reason}"


def test_bad_arrays_give_the_clis_messages(cli, tmp_path):
    cases = {
        "nan": np.array([[1.0, np.nan]]),
        "inf": np.array([[1.0], [-np.inf]], dtype=np.float16),
        "empty": np.zeros((0, 3)),
        "one_d": np.ones(3),
        "three_d": np.ones((2, 2, 2)),
    }
    for name, a in cases.items():
        f = tmp_path / f"{name}.npy"
        np.save(f, a)
        expected = cli_error(run_cli(cli, "svd", f)).replace(str(f), "array")
        with pytest.raises(ValueError) as e:
            specbound.svd(a)
        assert str(e.value) == expected, name
    for a, dtype in [
        (np.ones((2, 2), dtype=np.complex128), "complex128"),
        (np.ones((2, 2), dtype=bool), "bool"),
        (np.ones((2, 2), dtype=np.longdouble), np.dtype(np.longdouble).name),
        ([["a", "b"]], "<U1"),
    ]:
        with pytest.raises(ValueError, match="unsupported dtype") as e:
            specbound.svd(a)
        assert str(e.value).startswith("array: unsupported dtype ")
        assert "float16, float32, float64" in str(e.value)


def test_bad_options_raise_value_or_type_errors(cli):
    a = np.eye(2)
    # The CLI's parser refuses these values, quoting the library's message.
    expected = cli_usage_error(run_cli(cli, "svd", QUERY_NPY, "--precision", "f32"))
    with pytest.raises(ValueError) as e:
        specbound.svd(a, precision="f32")
    assert expected.endswith(f": {e.value}")
    expected = cli_usage_error(run_cli(cli, "svd", QUERY_NPY, "--schatten-p=-1"))
    with pytest.raises(ValueError) as e:
        specbound.svd(a, schatten_p=[-1])
    assert expected.endswith(f": {e.value}")
    for bad in (0.0, -1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="rtol must be a positive number"):
            specbound.svd(a, rtol=bad)
    with pytest.raises(ValueError, match="invalid Schatten exponent: 'x' is not a decimal number"):
        specbound.svd(a, schatten_p=["x"])
    with pytest.raises(TypeError):
        specbound.svd(a, schatten_p="1,2")
    with pytest.raises(TypeError):
        specbound.svd(a, schatten_p=[Fraction(1, 3)])
    with pytest.raises(TypeError):
        specbound.svd(a, schatten_p=[True])
    with pytest.raises(TypeError):
        specbound.svd(a, schatten_p=3)


def test_interval_membership_is_exact():
    r = specbound.svd(np.diag([3.0, 0.1]))
    iv = r.singular_values[1]  # encloses the double nearest 0.1
    x = Fraction(0.1)
    assert x in iv and 0.1 in iv and Decimal(0.1) in iv
    assert iv.lo <= iv.mid <= iv.hi and iv.rad >= (iv.hi - iv.lo) / 2
    below = Fraction(iv.lo) - Fraction(1, 10**30)
    above = Fraction(iv.hi) + Fraction(1, 10**30)
    assert below not in iv and above not in iv
    assert float("nan") not in iv and float("inf") not in iv
    assert 3 in r.spectral_norm and np.float32(3.0) in r.spectral_norm
    assert 4 not in r.spectral_norm
    with pytest.raises(TypeError):
        "0.1" in iv  # noqa: B015
    assert repr(r.spectral_norm).startswith("Interval(")
    assert r.spectral_norm == r.singular_values[0] and r.spectral_norm != iv


def test_integer_arrays_convert_exactly_or_are_refused_with_the_reason():
    # int8..int32 and their unsigned kinds: always exact, the same matrix as
    # its float64 copy.
    rng = np.random.default_rng(11)
    for dtype in (np.int8, np.int16, np.int32, np.uint8, np.uint16, np.uint32):
        info = np.iinfo(dtype)
        a = rng.integers(info.min, info.max, size=(6, 4), dtype=dtype, endpoint=True)
        a[0, 0], a[1, 1] = info.min, info.max
        r = specbound.svd(a)
        base = specbound.svd(a.astype(np.float64))
        assert r.dtype == np.dtype(dtype).name
        assert np.array_equal(r.lo, base.lo) and np.array_equal(r.hi, base.hi), dtype
    # 64 bits: taken when every value is exactly a float64 ...
    ok = np.array([[2**53, -(2**63)], [2**62 + 2**10, 7]], dtype=np.int64)
    r = specbound.svd(ok)
    exact = specbound.svd(np.array([[float(x) for x in row] for row in ok.tolist()]))
    assert np.array_equal(r.lo, exact.lo) and np.array_equal(r.hi, exact.hi)
    assert np.array_equal(specbound.svd(np.array([[2**64 - 2**11]], dtype=np.uint64)).hi,
                          specbound.svd(np.array([[float(2**64 - 2**11)]])).hi)
    # ... and refused, with the value, its index and why, when one is not.
    for a, text in [
        (np.array([[0, 1], [2**53 + 1, 3]], dtype=np.int64), "I64 value 9007199254740993 at [1, 0]"),
        (np.array([[np.iinfo(np.int64).max]], dtype=np.int64), "I64 value 9223372036854775807 at [0, 0]"),
        (np.array([[2**64 - 1]], dtype=np.uint64), "U64 value 18446744073709551615 at [0, 0]"),
    ]:
        with pytest.raises(ValueError) as e:
            specbound.svd(a)
        msg = str(e.value)
        assert msg.startswith("array: ") and text in msg, msg
        assert "is not exactly a float64" in msg and "refused" in msg, msg


def test_rank_is_an_integer_interval():
    r = specbound.svd(np.ones((2, 3), dtype=np.float16)).rank
    assert isinstance(r, specbound.RankInterval)
    assert type(r.lo) is int and type(r.hi) is int
    assert (r.lo, r.hi) == (1, 1) and r.decided
    assert 1 in r and Fraction(1) in r and 1.0 in r
    assert 2 not in r and 0.5 not in r and math.nan not in r
    assert repr(r) == "RankInterval(1, 1)"
    assert r == specbound.svd(np.ones((3, 2))).rank
    assert json.loads(specbound.svd(np.ones((2, 3))).to_json())["rank"] == {"lo": r.lo, "hi": r.hi}


def test_big_endian_arrays_are_read_as_the_cli_reads_big_endian_npy(cli, tmp_path):
    rng = np.random.default_rng(7)
    for code in (">f2", ">f4", ">f8"):
        a = rng.standard_normal((5, 7)).astype(code)
        f = tmp_path / f"be{code[1:]}.npy"
        np.save(f, a)
        assert np.load(f).dtype.str == code  # the file is big-endian
        proc = run_cli(cli, "svd", f, "--json")
        assert proc.returncode == 0, proc.stderr
        out = json.loads(proc.stdout)
        py = json.loads(specbound.svd(a).to_json())
        from_path = json.loads(specbound.svd(f).to_json())
        little = json.loads(specbound.svd(a.astype(code.replace(">", "<"))).to_json())
        for j in (out, py, from_path, little):
            j.pop("input")
        assert py == out == from_path == little, code
