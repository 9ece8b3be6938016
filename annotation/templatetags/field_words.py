"""``{{ name|field_words }}``: an error's field as a person reads it on a page ("assertion 2's check" for the
skeleton's ``steps[2].check``); the API keeps the paths, which a program reads (issue 31: "steps[1].text")."""

from __future__ import annotations

import re

from django import template

register = template.Library()

_STEP = re.compile(r"^steps\[(\d+)\]\.(\w+)$")
_PARTS = {"text": "text", "check": "check"}
_WHOLE = {"steps": "assertions"}


@register.filter
def field_words(name: str) -> str:
    m = _STEP.match(str(name))
    if m:
        return f"assertion {m.group(1)}'s {_PARTS.get(m.group(2), m.group(2))}"
    return _WHOLE.get(str(name), str(name))
