"""Argument checks shared by every package's public entry points and configs: a bad number gets a `ValueError`
naming the argument, never a silent conversion (1.7 read as 1, NaN passing every comparison, 0 read as
"default")."""

from __future__ import annotations

import math
from typing import Any

import numpy as np


def _bounds(minimum, maximum, above: bool = False) -> str:
    """How a range reads in a message: `>= 1`, `> 0`, `<= 9`, `in [0, 3]`, `in (0, 1]`."""
    if minimum is not None and maximum is not None:
        return f"in {'(' if above else '['}{minimum}, {maximum}]"
    if minimum is not None:
        return f"{'>' if above else '>='} {minimum}"
    return f"<= {maximum}"


def integer(name: str, value: Any, minimum: int | None = None, maximum: int | None = None) -> int:
    """`value` as an int. ValueError naming `name` if it is not an integer scalar (a bool, 1.7 or 2.0 is
    not; a NumPy or JAX integer scalar is) or lies outside [`minimum`, `maximum`] (either bound optional)."""
    array = np.asarray(value) if not isinstance(value, (str, bytes)) else np.asarray(None)
    unbounded = minimum is None and maximum is None
    wanted = "an integer" if unbounded else f"an integer {_bounds(minimum, maximum)}"
    if array.ndim != 0 or array.dtype == bool or not np.issubdtype(array.dtype, np.integer):
        raise ValueError(f"{name} must be {wanted}, got {value!r}")
    result = int(array)
    if (minimum is not None and result < minimum) or (maximum is not None and result > maximum):
        raise ValueError(f"{name} must be {wanted}, got {result}")
    return result


def number(name: str, value: Any, minimum: float | None = None, maximum: float | None = None, *,
           above: bool = False, finite: bool = True) -> float:
    """`value` as a float. ValueError naming `name` if it is not a real number, is NaN, is infinite
    (unless `finite=False`), is below `minimum` (at or below it when `above`) or above `maximum`."""
    array = np.asarray(value) if not isinstance(value, (str, bytes)) else np.asarray(None)
    if (array.ndim != 0 or array.dtype == bool
            or not (np.issubdtype(array.dtype, np.integer) or np.issubdtype(array.dtype, np.floating))):
        raise ValueError(f"{name} must be a real number, got {value!r}")
    result = float(array)
    if math.isnan(result) or (finite and math.isinf(result)):
        raise ValueError(f"{name} must be {'finite' if finite else 'a number'}, got {result}")
    low = minimum is not None and (result <= minimum if above else result < minimum)
    if low or (maximum is not None and result > maximum):
        raise ValueError(f"{name} must be {_bounds(minimum, maximum, above)}, got {result}")
    return result


def integer_fields(config: Any, minimum: int | None, *names: str, maximum: int | None = None,
                   optional: bool = False) -> None:
    """Each named field of the dataclass `config` checked by `integer`, the error naming it `Config.field`: what
    every config's `__post_init__` calls, so the same bad value fails alike everywhere. With `optional`, a
    field that is None passes."""
    for name in names:
        value = getattr(config, name)
        if not (optional and value is None):
            integer(f"{type(config).__name__}.{name}", value, minimum, maximum)


def number_fields(config: Any, minimum: float | None, *names: str, maximum: float | None = None,
                  above: bool = False, optional: bool = False) -> None:
    """Each named field of the dataclass `config` checked by `number` (finite, within the bounds; `above`: strictly
    above `minimum`), the error naming it `Config.field`. With `optional`, a field that is None passes."""
    for name in names:
        value = getattr(config, name)
        if not (optional and value is None):
            number(f"{type(config).__name__}.{name}", value, minimum, maximum, above=above)
