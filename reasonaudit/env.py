"""Strict parsers for configuration read from the environment.

A typo in production configuration should stop start-up with a message that
names the variable, never fall back silently to a default.
"""

from __future__ import annotations

import os
from urllib.parse import urlsplit

from django.core.exceptions import ImproperlyConfigured

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name}={raw!r} is not a boolean (use true/false, 1/0, yes/no, on/off)")


def env_list(name: str, default: str) -> list[str]:
    raw = os.environ.get(name, default)
    items = [item.strip() for item in raw.split(",") if item.strip()]
    if not items:
        raise ImproperlyConfigured(f"{name} must list at least one value (comma-separated)")
    return items


def env_int(name: str, default: int, *, minimum: int = 0) -> int:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={raw!r} is not an integer") from None
    if value < minimum:
        raise ImproperlyConfigured(f"{name}={raw!r} must be at least {minimum}")
    return value


def env_float(name: str, default: float, *, minimum: float = 0.0) -> float:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={raw!r} is not a number") from None
    if not value >= minimum:  # also refuses nan
        raise ImproperlyConfigured(f"{name}={raw!r} must be at least {minimum}")
    return value


def env_url(name: str, default: str, *, schemes: set[str]) -> str:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    raw = raw.strip()
    try:
        parts = urlsplit(raw)
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name}={raw!r} is not a valid URL: {exc}") from None
    if parts.scheme not in schemes:
        allowed = ", ".join(sorted(schemes))
        raise ImproperlyConfigured(f"{name}={raw!r} has an unsupported scheme (allowed: {allowed})")
    return raw
