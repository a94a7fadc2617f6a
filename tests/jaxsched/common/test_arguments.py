"""The shared argument checks: integers that are integers, real numbers that are finite, and bounds that
name the argument and the range in the error."""

import numpy as np
import pytest

from jaxsched.common.arguments import integer, number


def test_integer_accepts_integer_scalars_within_bounds():
    assert integer("n", 3) == 3
    assert integer("n", np.int64(3), 1, 3) == 3 and type(integer("n", np.int32(2), 0)) is int
    assert integer("n", 0, 0, 0) == 0


@pytest.mark.parametrize(
    "value, bounds, message",
    [
        (1.0, (), "n must be an integer, got 1.0"),
        (True, (0,), "n must be an integer >= 0, got True"),
        ("3", (), "n must be an integer, got '3'"),
        (0, (1,), "n must be an integer >= 1, got 0"),
        (4, (0, 3), r"n must be an integer in \[0, 3\], got 4"),
        (-1, (0, 3), r"n must be an integer in \[0, 3\], got -1"),
        (10, (None, 9), "n must be an integer <= 9, got 10"),
    ],
)
def test_integer_rejects_with_the_name_and_range(value, bounds, message):
    with pytest.raises(ValueError, match=f"^{message}$"):
        integer("n", value, *bounds)


def test_number_accepts_reals_within_bounds():
    assert number("x", 1) == 1.0 and number("x", np.float32(0.5), 0, 1, above=True) == 0.5
    assert number("x", 1.0, 0, 1, above=True) == 1.0  # the upper bound is inclusive
    assert number("x", float("inf"), 0, above=True, finite=False) == float("inf")


@pytest.mark.parametrize(
    "value, bounds, kwargs, message",
    [
        (float("nan"), (), {}, "x must be finite, got nan"),
        (float("nan"), (), {"finite": False}, "x must be a number, got nan"),
        (float("inf"), (0,), {}, "x must be finite, got inf"),
        (True, (), {}, "x must be a real number, got True"),
        (-0.5, (0,), {}, "x must be >= 0, got -0.5"),
        (0.0, (0,), {"above": True}, "x must be > 0, got 0.0"),
        (0.0, (0, 1), {"above": True}, r"x must be in \(0, 1\], got 0.0"),
        (1.5, (0, 1), {"above": True}, r"x must be in \(0, 1\], got 1.5"),
        (1.5, (0, 1), {}, r"x must be in \[0, 1\], got 1.5"),
        (2.0, (None, 1), {}, "x must be <= 1, got 2.0"),
    ],
)
def test_number_rejects_with_the_name_and_range(value, bounds, kwargs, message):
    with pytest.raises(ValueError, match=f"^{message}$"):
        number("x", value, *bounds, **kwargs)
