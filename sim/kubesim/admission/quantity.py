"""resource.Quantity: parsing, comparison and the canonical form the apiserver stores.

A real apiserver re-serialises every quantity it decodes (`"1000m"` -> `"1"`, `0.5` -> `"500m"`,
`"1.5Gi"` -> `"1536Mi"`, `"1000"` -> `"1k"`), so an operator that compares the resources it sent
with the ones it reads back must be ready for that; kubesim does the same to surface such bugs.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

QUANTITY_REGEX_TEXT = "^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$"
_FORMAT = re.compile(r"^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$")
_NUMBER = re.compile(r"^[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)$")

_BINARY = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_DECIMAL_BY_EXP = {v: k for k, v in _DECIMAL.items()}
_BINARY_BY_EXP = {v: k for k, v in _BINARY.items()}


class QuantityError(ValueError):
    pass


@dataclass(frozen=True)
class Quantity:
    value: Fraction
    format: str  # "BinarySI", "DecimalSI" or "DecimalExponent"

    def canonical(self) -> str:
        return _canonical(self)

    @property
    def milli(self) -> Fraction:
        return self.value * 1000


@lru_cache(maxsize=4096, typed=True)
def parse_quantity(text: str | int | float) -> Quantity:
    """resource.ParseQuantity; raises QuantityError with upstream's messages."""
    if isinstance(text, bool):
        raise QuantityError(
            "quantities must match the regular expression '" + QUANTITY_REGEX_TEXT + "'"
        )
    raw = repr(text) if isinstance(text, float) else str(text)
    if not raw:
        raise QuantityError(
            "quantities must match the regular expression '" + QUANTITY_REGEX_TEXT + "'"
        )
    m = _FORMAT.match(raw)
    if not m or not _NUMBER.match(m.group(1)):
        raise QuantityError(
            "quantities must match the regular expression '" + QUANTITY_REGEX_TEXT + "'"
        )
    number, suffix = m.group(1), m.group(2)
    value = Fraction(number)
    if suffix in _BINARY:
        value *= 2 ** _BINARY[suffix]
        fmt = "BinarySI"
    elif suffix in _DECIMAL:
        value *= Fraction(10) ** _DECIMAL[suffix]
        fmt = "DecimalSI"
    elif re.fullmatch(r"[eE][-+]?[0-9]+", suffix):
        value *= Fraction(10) ** int(suffix[1:])
        fmt = "DecimalExponent"
    else:
        raise QuantityError("unable to parse quantity's suffix")
    # upstream keeps nano precision, rounding away from zero
    nanos = value * 10**9
    if nanos.denominator != 1:
        nanos = Fraction(math.ceil(nanos) if nanos > 0 else math.floor(nanos))
        value = nanos / 10**9
    return Quantity(value, fmt)


def _canonical(q: Quantity) -> str:
    value, fmt = q.value, q.format
    if value == 0:
        return "0"
    if fmt == "BinarySI" and (-1024 < value < 1024 or value.denominator != 1):
        fmt = "DecimalSI"
    if fmt == "BinarySI":
        mantissa, exp = int(value), 0
        while exp < 60 and mantissa % 1024 == 0:
            mantissa //= 1024
            exp += 10
        return f"{mantissa}{_BINARY_BY_EXP.get(exp, '')}"
    # smallest multiple-of-3 exponent >= -9 keeping an integer mantissa, then strip trailing zero
    # groups
    exp = -9
    mantissa_int = int(value * Fraction(10) ** 9)
    while mantissa_int % 1000 == 0 and mantissa_int != 0:
        mantissa_int //= 1000
        exp += 3
    if fmt == "DecimalExponent":
        return f"{mantissa_int}e{exp}" if exp else str(mantissa_int)
    if exp > 18:
        mantissa_int *= 10 ** (exp - 18)
        exp = 18
    return f"{mantissa_int}{_DECIMAL_BY_EXP[exp]}"


@lru_cache(maxsize=4096, typed=True)
def canonical_quantity(text: str | int | float) -> str:
    return parse_quantity(text).canonical()
