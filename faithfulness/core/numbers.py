"""Numbers as they appear in trace text, read exactly (fractions.Fraction)."""

from __future__ import annotations

import re
from fractions import Fraction
from functools import lru_cache

# A plain decimal number with optional thousands separators; a leading minus only when it is not a
# subtraction ("16-3" is two numbers). Percent and currency signs are left to the surrounding text.
NUMBER_RE = re.compile(r"(?<![\w.])(?:(?<=[\s(=$£€:])-|^-)?\d{1,3}(?:,\d{3})+(?:\.\d+)?(?![\d,]\d)|(?<![\w.])(?:(?<=[\s(=$£€:])-|^-)?\d+(?:\.\d+)?")


@lru_cache(maxsize=65536)  # the same few numbers recur in every trace
def to_fraction(text: str) -> Fraction | None:
    plain = text.replace(",", "")
    try:
        # int() is several times faster than Fraction's string parser, and most numbers are whole.
        return Fraction(int(plain)) if "." not in plain else Fraction(plain)
    except (ValueError, ZeroDivisionError):
        return None


def numbers(text: str) -> list[tuple[Fraction, int, int]]:
    """(value, start, end) of every number in ``text``, in order."""
    out = []
    for m in NUMBER_RE.finditer(text or ""):
        value = to_fraction(m.group(0))
        if value is not None:
            out.append((value, m.start(), m.end()))
    return out


def values(text: str) -> set[Fraction]:
    return {v for v, _s, _e in numbers(text)}


def format_value(value: Fraction) -> str:
    """An exact value as a trace would write it: an integer plainly, else up to 6 decimals."""
    if value.denominator == 1:
        return str(value.numerator)
    text = f"{float(value):.6f}".rstrip("0").rstrip(".")
    return text
