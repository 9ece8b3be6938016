"""Writes the local development settings file, ``<data>/local.env``, once.

``./run`` calls it (``python -m reasonaudit.local_env``) so that every command
the README shows works afterwards in any shell: the settings read the file
when it exists (see reasonaudit/env.py: the real environment wins). An
existing file is never rewritten, so a key, and the sessions signed with it,
survive; a key the debug server generated before (``<data>/secret_key``) is
carried over for the same reason.

No Django here: it must run before the settings can load.
"""

from __future__ import annotations

import os
import secrets
import sys
from pathlib import Path

from reasonaudit.env import LOCAL_ENV, data_dir

BASE_DIR = Path(__file__).resolve().parent.parent


def write_local_env(folder: Path) -> tuple[Path, bool]:
    """(path of the file, whether it was written now)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / LOCAL_ENV
    if path.exists():
        return path, False
    old_key = folder / "secret_key"
    key = old_key.read_text().strip() if old_key.exists() else ""
    text = (
        "# Local development settings, written once by ./run (reasonaudit/local_env.py).\n"
        "# Environment variables win over these. Never copy this file to production.\n"
        "DJANGO_DEBUG=true\n"
        f"SECRET_KEY={key or secrets.token_urlsafe(50)}\n"
    )
    # Created private from the start: the file holds a secret.
    with open(path, "x", encoding="utf-8", opener=lambda p, flags: os.open(p, flags, 0o600)) as fh:
        fh.write(text)
    return path, True


def main() -> None:
    path, written = write_local_env(data_dir(BASE_DIR))
    if written:
        print(f"==> wrote the local development settings to {path}", file=sys.stderr)


if __name__ == "__main__":
    main()
