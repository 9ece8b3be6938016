"""A total deadline and a size cap on every outbound model request (docs/configuration.md,
"What leaves the server, and for how long").

httpx's timeouts are per operation: a server that sends one byte every few seconds never trips a
read timeout and holds the caller for as long as it likes. Here every socket operation of a request
-- connect, TLS handshake, writing the body, reading the headers and the body -- waits at most for
what is left of the request's deadline, so connect + headers + body together never take longer than
the deadline, however the server paces its bytes. The network backend below does it for every
connection of a ``GuardedTransport`` (runs.outbound); the deadline of the request being sent is
per thread, because a sync httpx request is sent and read by one thread.

The response body is read through ``CappedStream``: more than ``max_bytes`` and the connection is
closed and ``ResponseTooLarge`` raised (a request fails with that reason; runs.transport does not
retry it).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import httpcore2
import httpx2

_current = threading.local()


class ResponseTooLarge(httpx2.ReadError):
    """A response body larger than the cap (REASONAUDIT_MODEL_RESPONSE_MAX_BYTES): cut, never parsed. An
    httpx read error, so that the openai client hands it on as a connection error (runs.transport finds it)."""

    def __init__(self, max_bytes: int) -> None:
        super().__init__(f"the server's response is larger than {max_bytes:,} bytes "
                         "(REASONAUDIT_MODEL_RESPONSE_MAX_BYTES); it was cut and not used")
        self.max_bytes = max_bytes


def start(seconds: float) -> float:
    """Start the deadline of this thread's next request: ``seconds`` from now. Returns the deadline."""
    _current.deadline = time.monotonic() + seconds
    return _current.deadline


def clear() -> None:
    _current.deadline = None


def current() -> float | None:
    """The deadline of the request this thread is sending, if one is running."""
    return getattr(_current, "deadline", None)


@contextmanager
def total(seconds: float) -> Iterator[float]:
    """One deadline for everything this thread sends inside the block (a call with its redirects): a
    request there never takes longer than what is left of it. An enclosing deadline that ends sooner wins."""
    before = current()
    when = time.monotonic() + seconds
    _current.deadline = when if before is None else min(before, when)
    try:
        yield _current.deadline
    finally:
        _current.deadline = before


def _left(timeout: float | None, expired: type[Exception]) -> float | None:
    """The timeout of one socket operation: the operation's own, never beyond the request's deadline."""
    deadline = getattr(_current, "deadline", None)
    if deadline is None:
        return timeout
    left = deadline - time.monotonic()
    if left <= 0:
        raise expired("the request's total deadline passed")
    return left if timeout is None else min(timeout, left)


class _DeadlineStream(httpcore2.NetworkStream):
    def __init__(self, inner: httpcore2.NetworkStream) -> None:
        self._inner = inner

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._inner.read(max_bytes, _left(timeout, httpcore2.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._inner.write(buffer, _left(timeout, httpcore2.WriteTimeout))

    def close(self) -> None:
        self._inner.close()

    def start_tls(self, ssl_context, server_hostname: str | None = None,
                  timeout: float | None = None) -> httpcore2.NetworkStream:
        return _DeadlineStream(self._inner.start_tls(ssl_context, server_hostname,
                                                     _left(timeout, httpcore2.ConnectTimeout)))

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class DeadlineBackend(httpcore2.NetworkBackend):
    """httpcore's own socket backend, each operation bounded by the current request's deadline."""

    def __init__(self) -> None:
        self._inner = httpcore2.SyncBackend()

    def connect_tcp(self, host: str, port: int, timeout: float | None = None, local_address: str | None = None,
                    socket_options: Iterable | None = None) -> httpcore2.NetworkStream:
        return _DeadlineStream(self._inner.connect_tcp(host, port, _left(timeout, httpcore2.ConnectTimeout),
                                                       local_address, socket_options))

    def connect_unix_socket(self, path: str, timeout: float | None = None,
                            socket_options: Iterable | None = None) -> httpcore2.NetworkStream:
        return _DeadlineStream(self._inner.connect_unix_socket(path, _left(timeout, httpcore2.ConnectTimeout),
                                                               socket_options))

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


class CappedStream(httpx2.SyncByteStream):
    """A response body, read within the request's deadline and at most ``max_bytes`` long."""

    def __init__(self, inner: Any, deadline: float, max_bytes: int, *, clear: bool = True) -> None:
        self._inner = inner
        self._deadline = deadline
        self._max_bytes = max_bytes
        self._clear = clear  # the transport started this deadline (no caller's deadline is running)

    def __iter__(self) -> Iterator[bytes]:
        seen = 0
        # The body is read after the transport returned; the deadline is this request's again
        # (the thread may have sent nothing else in between, but this does not rely on it).
        _current.deadline = self._deadline
        for chunk in self._inner:
            seen += len(chunk)
            if seen > self._max_bytes:
                self.close()
                raise ResponseTooLarge(self._max_bytes)
            yield chunk

    def close(self) -> None:
        if self._clear:
            clear()
        if hasattr(self._inner, "close"):
            self._inner.close()


def cause_of[E: BaseException](exc: BaseException, kind: type[E]) -> E | None:
    """The ``kind`` of error behind one the openai client or httpx wrapped (a body cut at the cap, the address
    policy's refusal), if that is what it was."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, kind):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None
