"""A bound on the work of text processing over hostile model output, without trusting wall time.

``assert_linear(fn, text)`` runs ``fn(text)`` in a forked child and compares its CPU time with a
baseline measured in the same child on the same text: one step of Python per character (a generator
over the text). The bound is ``FACTOR`` baselines: a linear function (a regex pass plus a Python
object per token) stays within a small multiple whatever the machine's load (both are measured under
it), while a quadratic one on 100,000 characters needs about 10^5 baselines. The child is killed once it has had
ten times its budget of wall time, so a quadratic regex fails the test instead of hanging it.
"""

from __future__ import annotations

import multiprocessing
import time
import warnings
from collections.abc import Callable

FACTOR = 2000  # measured: at most ~150 for the functions tested (tokenize makes a Python object per token)


def _cpu(fn: Callable[[], object]) -> float:
    started = time.process_time()
    fn()
    return time.process_time() - started


def _baseline(text: str) -> float:
    return min(_cpu(lambda: sum(1 for _ in text)) for _ in range(3))


def _child(fn: Callable[[str], object], text: str, conn) -> None:
    base = _baseline(text)
    used = _cpu(lambda: fn(text))
    conn.send((used, base))


def assert_linear(fn: Callable[[str], object], text: str, *, factor: int = FACTOR) -> tuple[float, float]:
    """``fn(text)`` costs at most ``factor`` baseline passes over ``text`` (plus 20 ms of start-up);
    returns (CPU seconds used, one baseline pass)."""
    parent, child = multiprocessing.Pipe(duplex=False)
    base = _baseline(text)
    budget = factor * base + 0.02
    process = multiprocessing.get_context("fork").Process(target=_child, args=(fn, text, child))
    with warnings.catch_warnings():
        # The test process has threads (fake servers of other tests); the child only computes and exits.
        warnings.simplefilter("ignore", DeprecationWarning)
        process.start()
    ready = parent.poll(max(5.0, 10 * budget))
    if not ready:
        process.kill()
        process.join()
        raise AssertionError(f"{getattr(fn, '__name__', fn)} on {len(text):,} characters did not finish within "
                             f"{max(5.0, 10 * budget):.1f} s (budget {budget:.3f} s of CPU): not linear")
    used, base = parent.recv()
    process.join()
    budget = factor * base + 0.02
    assert used <= budget, (f"{getattr(fn, '__name__', fn)} used {used:.3f} s of CPU on {len(text):,} characters, "
                            f"more than {factor} linear passes ({budget:.3f} s)")
    return used, base
