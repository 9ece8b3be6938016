"""Formatting of agreement numbers: rates as percentages or decimals, the
same for their intervals, and a dash for "not defined"."""

from __future__ import annotations

from django import template

from scoring.templatetags.scoring_tags import DASH

register = template.Library()


def _one(value, fmt: str) -> str:
    if value is None or value == "":
        return DASH
    v = float(value)
    if fmt == "pct":
        return f"{100 * v:.1f}%"
    if fmt == "count":
        return f"{int(v):,}"
    return f"{v:.3f}"


@register.filter
def fmtv(value, fmt: str = "num") -> str:
    """A metric value as ``fmt`` (pct, num, count), or a dash for null."""
    return _one(value, fmt)


@register.filter
def fmtci(value, fmt: str = "num") -> str:
    """A [low, high] interval in the metric's format, or nothing."""
    if not value:
        return ""
    return f"[{_one(value[0], fmt)}, {_one(value[1], fmt)}]"


@register.filter
def cell(mapping, key):
    """mapping[key] for dicts and lists of lists (``row|cell:i``)."""
    try:
        return mapping[key]
    except (KeyError, IndexError, TypeError):
        return None
