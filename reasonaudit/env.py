"""Strict parsers for configuration read from the environment.

A typo in production configuration should stop start-up with a message that
names the variable, never fall back silently to a default.
"""

from __future__ import annotations

import ipaddress
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


#: Query parameters of an SQLite URI filename (https://www.sqlite.org/uri.html) that dj-database-url moves
#: into OPTIONS, where the sqlite3 module would not read them.
_SQLITE_URI_PARAMS = ("mode", "cache", "vfs", "immutable", "nolock", "psow", "modeof")


def sqlite_database_name(name: str, options: dict, data_dir: Path) -> str:
    """The NAME to give Django for an SQLite ``DATABASE_URL``, so no database file lands in the current folder.

    * ``sqlite:///file:NAME?mode=memory&cache=shared`` (the test database's name, handed to a child process)
      stays an in-memory database: its query is put back on the URI instead of being dropped, which once
      made a 4 KB file ``memorydb_default`` appear at the repository root.
    * A relative path (``sqlite:///ra.db``, ``sqlite:///file:ra.db``) is a file in the data folder, never in
      whatever folder the process was started from (the test settings' data folder is temporary).
    """
    if not name or name == ":memory:":
        return name
    query = "&".join(f"{key}={options[key]}" for key in _SQLITE_URI_PARAMS if key in options)
    if name.startswith("file:"):
        path = name[len("file:"):]
        if options.get("mode") != "memory" and not path.startswith("/"):
            path = str(data_dir / path)
        return f"file:{path}" + (f"?{query}" if query else "")
    if not Path(name).is_absolute():
        return str(data_dir / name)
    return name


# --------------------------------------------------------------------------
# Model servers: which keys may be sent where, and which networks they may be in (runs/outbound.py)

# Environment variables the application reads for itself: never sent to a model server, even if listed.
APP_VARIABLES = frozenset({
    "SECRET_KEY", "DATABASE_URL", "CELERY_BROKER_URL", "CELERY_RESULT_BACKEND", "REDIS_URL", "ALLOWED_HOSTS",
    "PGPASSWORD", "PGPASSFILE", "PGUSER", "PGHOST", "PGDATABASE", "PGSERVICE", "PGSERVICEFILE",
})
APP_PREFIXES = ("DJANGO_", "REASONAUDIT_", "CELERY_", "SECURE_", "DATABASE_")
ANY_HOST = "*"
_VARIABLE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def is_app_variable(name: str) -> bool:
    upper = name.upper()
    return upper in APP_VARIABLES or upper.startswith(APP_PREFIXES)


def env_model_keys(name: str) -> dict[str, tuple[str, ...]]:
    """``NAME=host[,host...]`` entries separated by spaces or semicolons, e.g.
    ``OPENAI_API_KEY=api.openai.com; QWEN_KEY=gpu-box,gpu-box.lab``; ``*`` as a host lets the key go
    to any host the address policy allows (a single-user installation only)."""
    keys: dict[str, tuple[str, ...]] = {}
    for entry in re.split(r"[;\s]+", os.environ.get(name, "").strip()):
        if not entry:
            continue
        key, sep, hosts = entry.partition("=")
        if not sep or not _VARIABLE.match(key):
            raise ImproperlyConfigured(f"{name}: {entry!r} is not NAME=host[,host...]")
        if is_app_variable(key):
            raise ImproperlyConfigured(f"{name}: {key} is one of the application's own settings and is never "
                                       "sent to a model server")
        allowed = tuple(h.strip().lower() for h in hosts.split(",") if h.strip())
        if not allowed:
            raise ImproperlyConfigured(f"{name}: {key} names no host it may be sent to")
        keys[key] = allowed
    return keys


def env_networks(name: str, default: str) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
    """Comma-separated networks in CIDR form (``127.0.0.0/8,10.1.0.0/16,::1/128``); a bare address is one host."""
    raw = os.environ.get(name)
    networks = []
    for item in (default if raw is None else raw).split(","):
        item = item.strip()
        if not item:
            continue
        try:
            networks.append(ipaddress.ip_network(item, strict=False))
        except ValueError:
            raise ImproperlyConfigured(f"{name}: {item!r} is not a network (e.g. 10.0.0.0/8 or ::1/128)") from None
    return tuple(networks)
