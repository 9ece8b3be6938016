from django import template

register = template.Library()


@register.filter
def num(value, places: int = 4) -> str:
    """A metric for display: fixed decimals, "–" when undefined."""
    if value is None or value == "":
        return "–"
    try:
        return f"{float(value):.{int(places)}f}"
    except (TypeError, ValueError):
        return str(value)


@register.filter
def ci(summary) -> str:
    """"[lo, hi]" of a {mean, ci} summary, empty without an interval."""
    if not summary or not summary.get("ci"):
        return ""
    lo, hi = summary["ci"]
    return f"[{lo:.3f}, {hi:.3f}]"


@register.filter
def label(name: str) -> str:
    return str(name).replace("_", " ")
