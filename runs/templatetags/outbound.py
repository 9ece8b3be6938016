"""``{{ url|redact_url }}``: a model server's URL as pages show it, without user info or secret query
parameters (runs.outbound.redact_url; saving refuses such URLs, this covers rows saved before)."""

from __future__ import annotations

from django import template

from runs.outbound import redact_url as _redact_url

register = template.Library()


@register.filter
def redact_url(value: str) -> str:
    return _redact_url(value) if value else ""
