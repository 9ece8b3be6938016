"""Helpers shared by the benchmark scripts: timing whole processes and the machine."""

from __future__ import annotations

import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable


def machine() -> str:
    cpu = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return f"{platform.system()} {platform.machine()}, {os.cpu_count()} cores ({cpu}), {mem:.0f} GiB, Python {platform.python_version()}"


def run_timed(cmd: list[str], env: dict[str, str] | None = None) -> tuple[float, int, str]:
    """Wall time (s), peak RSS (MiB) and stdout of one process."""
    wall, _, peak, stdout = run_usage(cmd, env)
    return wall, peak, stdout


def run_usage(cmd: list[str], env: dict[str, str] | None = None) -> tuple[float, float, int, str]:
    """Wall time (s), CPU time (user + system, s), peak RSS (MiB) and stdout of one process.

    Usage is that process's own (``wait4``), not the largest of every child
    this script has run so far, which ``RUSAGE_CHILDREN`` would give. CPU time
    moves much less than wall time when other work shares the cores."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=ROOT, env={**os.environ, **(env or {})}, stdout=out, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        elapsed = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(), err.read().decode()
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{stdout[-2000:]}\n{stderr[-2000:]}")
    return elapsed, usage.ru_utime + usage.ru_stime, usage.ru_maxrss // 1024, stdout


def median(xs: list[float]) -> float:
    return statistics.median(xs)


def scratch_postgres(url: str, prefix: str) -> tuple[str, str]:
    """(URL, name) of a new empty database ``<prefix>_<pid>`` on the server of ``url``."""
    from urllib.parse import urlsplit, urlunsplit

    import psycopg

    parts = urlsplit(url)
    name = f"{prefix}_{os.getpid()}"
    admin = urlunsplit(parts._replace(path="/postgres"))
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return urlunsplit(parts._replace(path=f"/{name}")), name
