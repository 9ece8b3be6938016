"""User templates render in a child process with hard limits (docs/runs.md, "Bounded templates";
docs/configuration.md): prompt templates (runs.templating, Django's engine) and chat templates
(runs.chat_template, the Jinja sandbox) are written by any study owner.

Counting steps and output inside the engines stops loops and long outputs with a clear message, but a
filter (``join``, ``center``, ``wordwrap``, ``str.format`` widths, ...) builds its whole value before
anything can count it: a bound that lists filters always misses the next one. So the render itself
runs where the operating system bounds it, whatever the template does:

* **memory**: the child's address space may grow by at most ``TEMPLATE_MEMORY_MB`` (RLIMIT_AS); any
  value larger than that, intermediate or final, fails to allocate (MemoryError) and the render is
  refused. The child is then replaced.
* **time**: the child's CPU time per render is limited (RLIMIT_CPU, SIGXCPU) and the caller waits at
  most the template's time bound plus ``GRACE_SECONDS`` of wall-clock time, then kills the child.
* **size of the answer**: the engines refuse more than their output bound, and the caller reads no
  more than that from the pipe.

The children are forked from the calling process (so they render with the same Django settings and
code, and start in a few milliseconds), kept and reused: a render costs one round trip over a pipe.
A child only renders; it closes every inherited file descriptor but its pipe (so it can never touch
the parent's database or broker connections) and leaves with ``os._exit``.
"""

from __future__ import annotations

import importlib
import os
import pickle
import resource
import signal
import threading
import warnings
from multiprocessing.connection import Connection, Pipe
from typing import Any

from django.conf import settings

GRACE_SECONDS = 1.0  # beyond the template's own time bound, for the child's start and a busy machine
MAX_IDLE = 4  # children kept for the next render, per process


class SandboxRefused(Exception):
    """The render went over a limit the child could not report itself (memory, time), or the child died."""


class _CpuLimit(Exception):
    pass


def memory_bytes() -> int:
    return int(getattr(settings, "TEMPLATE_MEMORY_MB", 256)) * 1024 * 1024


# --------------------------------------------------------------------------
# The child


def _vm_size() -> int | None:
    """The address space the child starts with (the parent's), or None where /proc does not say."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmSize:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def _on_xcpu(signum, frame) -> None:
    raise _CpuLimit()


def _serve(conn: Connection, memory: int) -> None:
    keep = conn.fileno()
    os.closerange(3, keep)  # the parent's sockets, database and broker connections: not ours to touch
    os.closerange(keep + 1, 1 << 16)
    for name in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2):
        signal.signal(name, signal.SIG_DFL)  # the parent's handlers (a worker's warm shutdown) are not ours
    signal.signal(signal.SIGXCPU, _on_xcpu)
    size = _vm_size()
    if size is not None:  # Linux; elsewhere (no /proc) only the time limits hold
        _soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        limit = size + memory
        resource.setrlimit(resource.RLIMIT_AS, (limit if hard == resource.RLIM_INFINITY else min(limit, hard), hard))
    while True:
        try:
            kind, args, seconds = conn.recv()
        except (EOFError, OSError):
            return  # the parent is gone or let go of this child
        used = resource.getrusage(resource.RUSAGE_SELF)
        cpu = used.ru_utime + used.ru_stime
        _soft, cpu_hard = resource.getrlimit(resource.RLIMIT_CPU)
        soft = int(cpu + seconds) + 1
        if cpu_hard != resource.RLIM_INFINITY:
            soft = min(soft, cpu_hard)
        resource.setrlimit(resource.RLIMIT_CPU, (soft, cpu_hard))
        try:
            module, name = kind.split(":")
            answer: tuple[str, Any] = ("ok", getattr(importlib.import_module(module), name)(*args))
        except MemoryError:
            answer = ("memory", None)
        except _CpuLimit:
            answer = ("time", None)
        except RecursionError:
            answer = ("error", "the template failed: RecursionError: nested too deeply")
        except Exception as exc:  # the engines' own errors carry their message
            answer = ("error", str(exc)[:1000])
        try:
            conn.send(answer)
        except MemoryError:
            conn.send(("memory", None))
        if answer[0] in ("memory", "time"):
            return  # a fresh child for the next render: this one's heap may be fragmented


class _Child:
    def __init__(self) -> None:
        parent_end, child_end = Pipe(duplex=True)
        with warnings.catch_warnings():
            # Python warns that fork() in a threaded process may deadlock the child. This child runs no
            # code that takes another thread's lock (the interpreter re-initialises its own locks after
            # fork); and a child that hung anyway is killed at the wall-clock deadline.
            warnings.simplefilter("ignore", DeprecationWarning)
            pid = os.fork()
        if pid == 0:  # pragma: no cover - the child's own coverage is not collected
            try:
                parent_end.close()
                _serve(child_end, memory_bytes())
            finally:
                os._exit(0)
        child_end.close()
        self.pid = pid
        self.conn = parent_end

    def kill(self) -> None:
        try:
            os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.close()

    def close(self) -> None:
        self.conn.close()
        try:
            os.waitpid(self.pid, 0)
        except ChildProcessError:
            pass


_IDLE: dict[int, list[_Child]] = {}
_LOCK = threading.Lock()


def _take() -> _Child:
    with _LOCK:
        idle = _IDLE.setdefault(os.getpid(), [])  # a forked process never uses its parent's children
        if idle:
            return idle.pop()
    return _Child()


def _give_back(child: _Child) -> None:
    with _LOCK:
        idle = _IDLE.setdefault(os.getpid(), [])
        if len(idle) < MAX_IDLE:
            idle.append(child)
            return
    child.close()  # its end of the pipe closes: the child sees EOF and leaves


def run(function: str, args: tuple, *, seconds: float, max_chars: int) -> str:
    """``function(*args)`` (``"module:name"``, plain data in and a string out) in a child with the limits
    above: its result, SandboxRefused (memory, time), or ValueError with the engine's message."""
    child = _take()
    try:
        child.conn.send((function, args, seconds))
        if not child.conn.poll(seconds + GRACE_SECONDS):
            child.kill()
            raise SandboxRefused(f"takes longer than {seconds:g} s to render")
        status, value = pickle.loads(child.conn.recv_bytes(maxlength=8 * max_chars + 65536))
    except SandboxRefused:
        raise
    except (EOFError, OSError, pickle.UnpicklingError) as exc:
        child.kill()
        raise SandboxRefused(f"the render process ended ({type(exc).__name__}): the template needs more "
                             f"memory or time than it may have") from None
    except BaseException:
        child.kill()
        raise
    if status in ("memory", "time"):
        child.close()
        if status == "memory":
            raise SandboxRefused(f"needs more than {memory_bytes() // (1024 * 1024)} MB of memory to render "
                                 "(REASONAUDIT_TEMPLATE_MEMORY_MB)")
        raise SandboxRefused(f"takes more than {seconds:g} s of CPU time to render")
    _give_back(child)
    if status == "error":
        raise ValueError(value)
    return value


def shutdown() -> None:
    """End this process's idle children (tests; a process's children otherwise end with it)."""
    with _LOCK:
        idle = _IDLE.pop(os.getpid(), [])
    for child in idle:
        child.close()
