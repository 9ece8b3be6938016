"""The one name of the code that made a result: a trace's regime, a run's
configuration and every export manifest cite the same string."""

from __future__ import annotations

import functools
import subprocess
import tomllib
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent


def package_version() -> str:
    try:
        return tomllib.loads((BASE_DIR / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]
    except (OSError, KeyError, tomllib.TOMLDecodeError):
        return "unknown"


def git_commit() -> str:
    """The checkout's commit (``git describe --always --dirty``: a tag when there is one, else the short
    hash; ``-dirty`` when files differ from it), or "" outside a git checkout."""
    try:
        done = subprocess.run(["git", "describe", "--always", "--dirty", "--tags"], cwd=BASE_DIR,
                              capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return ""
    return done.stdout.strip() if done.returncode == 0 else ""


@functools.cache
def code_version() -> str:
    """``reasonaudit <package version> (<git commit>)``, or without the commit outside a checkout.
    Cached per process: a worker started before a deploy keeps naming the code it runs."""
    commit = git_commit()
    version = f"reasonaudit {package_version()}"
    return f"{version} ({commit})" if commit else version
