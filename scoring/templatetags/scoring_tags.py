from __future__ import annotations

from django import template

register = template.Library()

DASH = "–"


@register.filter
def num(value, digits: int = 2) -> str:
    """A number with ``digits`` decimals, or a dash for null."""
    if value is None or value == "":
        return DASH
    try:
        return f"{float(value):.{int(digits)}f}"
    except (TypeError, ValueError):
        return str(value)


@register.filter
def pct(value) -> str:
    if value is None:
        return DASH
    return f"{100 * float(value):.1f}%"


@register.filter
def ci(value, digits: int = 2) -> str:
    """A [low, high] interval, or a dash."""
    if not value:
        return DASH
    low, high = value
    return f"[{float(low):.{int(digits)}f}, {float(high):.{int(digits)}f}]"


@register.filter
def tojson(value) -> str:
    import json

    return json.dumps(value, sort_keys=True)


@register.filter
def get(mapping, key):
    return mapping.get(key) if hasattr(mapping, "get") else None
