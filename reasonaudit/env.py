"""Strict parsers for configuration read from the environment.

A typo in production configuration should stop start-up with a message that
names the variable, never fall back silently to a default.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
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


# The local development settings file that ./run writes into the data folder.
LOCAL_ENV = "local.env"
_ENV_LINE = re.compile(r"(?P<name>[A-Za-z_][A-Za-z0-9_]*)\s*=\s*(?P<value>.*)")


def data_dir(base_dir: Path) -> Path:
    """Where the SQLite file, broker folders, uploads and caches live."""
    return Path(os.environ.get("REASONAUDIT_DATA_DIR", base_dir / "data")).resolve()


def load_env_file(path: Path) -> None:
    """Read ``NAME=value`` lines (``#`` comments, blank lines) into the
    environment, for every variable the environment does not set already:
    the real environment always wins. No file, nothing to read."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return
    for number, line in enumerate(text.splitlines(), start=1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        m = _ENV_LINE.fullmatch(line)
        if m is None:
            raise ImproperlyConfigured(f"{path}, line {number}: expected NAME=value, got {line[:40]!r}")
        value = m.group("value").strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        os.environ.setdefault(m.group("name"), value)
