"""Built-ins of the prompt-template engine (runs.templating.ENGINE) that replace Django's own of the
same names: filters with a size argument capped, and tags a prompt has no use for refused.

Loaded after Django's default built-ins, so these names win."""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation
from typing import Any

from django import template
from django.template import TemplateSyntaxError
from django.template import defaultfilters as df

register = template.Library()

# Kept here (not imported from runs.templating, which loads this module by name) so the two stay one way.
MAX_FILTER_ARGUMENT = 10_000
MAX_FLOAT_DIGITS = 100
MAX_ADDED_CHARS = 1_000_000


def _size(name: str, arg: Any, limit: int = MAX_FILTER_ARGUMENT) -> None:
    try:
        value = int(arg)
    except (TypeError, ValueError):
        return  # Django's own filter handles (ignores) what is not a number
    if abs(value) > limit:
        raise ValueError(f"the {name} filter's argument is {value}; at most {limit:,} is allowed")


def _capped_width(name: str, original):
    def capped(value: Any, arg: Any) -> Any:
        _size(name, arg)
        return original(value, arg)

    capped.__name__ = name
    return capped


for _name, _original in (("ljust", df.ljust), ("rjust", df.rjust), ("center", df.center),
                         ("wordwrap", df.wordwrap), ("truncatechars", df.truncatechars),
                         ("truncatewords", df.truncatewords), ("truncatechars_html", df.truncatechars_html),
                         ("truncatewords_html", df.truncatewords_html)):
    register.filter(_name, _capped_width(_name, _original), is_safe=True)


@register.filter(is_safe=True)
def stringformat(value: Any, arg: Any) -> str:
    # "%0300000000d": every number inside the format is a width or a precision.
    for number in re.findall(r"\d+", str(arg)):
        _size("stringformat", number)
    return df.stringformat(value, arg)


@register.filter(is_safe=True)
def floatformat(text: Any, arg: Any = -1) -> str:
    digits = re.match(r"-?\d+", str(arg))
    if digits:
        _size("floatformat", digits.group(0), MAX_FLOAT_DIGITS)
    try:
        exponent = Decimal(str(text)).adjusted()
    except (InvalidOperation, ValueError, TypeError):
        exponent = 0
    if abs(exponent) > MAX_FILTER_ARGUMENT:
        raise ValueError(f"the floatformat filter got a number with {abs(exponent):,} digits")
    return df.floatformat(text, arg)


@register.filter(is_safe=False)
def add(value: Any, arg: Any) -> Any:
    if hasattr(value, "__len__") and hasattr(arg, "__len__") and len(value) + len(arg) > MAX_ADDED_CHARS:
        raise ValueError(f"the add filter would build more than {MAX_ADDED_CHARS:,} items")
    return df.add(value, arg)


def _refused(parser, token) -> None:
    name = token.split_contents()[0]
    raise TemplateSyntaxError(f"the {{% {name} %}} tag is not allowed in a prompt template")


for _tag in ("lorem", "debug", "include", "extends"):
    register.tag(_tag, _refused)
