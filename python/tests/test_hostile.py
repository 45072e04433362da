"""Hostile input, round three (issue 18): ``x in Interval`` answers exactly
and in bounded time for numbers far outside any float's range. Each test is
named after the failure it pins."""

import time
from decimal import Decimal
from fractions import Fraction

import numpy as np

import specbound


def three():
    """A certified enclosure of 3, a narrow interval around it (three
    columns: a 2 x 2 would be certified exactly, as the point 3)."""
    return specbound.svd(np.diag([3.0, 0.1, 0.2])).singular_values[0]


def near_zero():
    """The certified enclosure of the zero singular value of a rank-1 matrix."""
    return specbound.svd(np.ones((2, 2))).singular_values[1]


def test_int_beyond_the_int_to_string_limit_raised_instead_of_answering():
    iv = three()
    big = 10**5000  # more digits than Python turns into a string by default
    assert (big in iv) is False
    assert (-big in iv) is False
    assert 3 in iv
    # Exactly, with huge numerators and denominators.
    assert Fraction(3 * big, big) in iv
    assert Fraction(3 * big + 1, big) in iv
    assert Fraction(4 * big, big) not in iv
    assert Fraction(1, big) not in iv
    iv0 = near_zero()
    assert (Fraction(1, big) in iv0) == (iv0.lo <= 0 < iv0.hi)
    assert (Fraction(-1, big) in iv0) == (iv0.lo < 0)


def test_decimal_with_a_huge_exponent_took_minutes():
    iv, iv0 = three(), near_zero()
    t = time.monotonic()
    for s in ["1e-999999999", "-1e-999999999", "1e999999999", "-1e999999999", "7e-999999999"]:
        x = Decimal(s)
        assert (x in iv) is False, s
        positive = not s.startswith("-")
        tiny = "e-" in s
        if tiny:
            expected = (iv0.lo <= 0 < iv0.hi) if positive else (iv0.lo < 0 <= iv0.hi)
        else:
            expected = False
        assert (x in iv0) == expected, s
    assert Decimal("3") in iv
    assert Decimal("3.0000000000000000000000000000001") in iv
    assert Decimal("0E-999999999") in iv0 or iv0.lo > 0
    assert Decimal("NaN") not in iv and Decimal("Infinity") not in iv
    assert time.monotonic() - t < 5.0


def test_an_endless_schatten_p_iterator_exhausted_memory():
    import itertools

    import pytest

    with pytest.raises(ValueError, match="more than 1024 exponents"):
        specbound.svd(np.diag([3.0, 0.1]), schatten_p=itertools.repeat(1))
