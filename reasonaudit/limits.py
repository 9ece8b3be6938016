"""A cap on every request body, before Django reads it (docs/configuration.md).

Django limits form fields (``DATA_UPLOAD_MAX_MEMORY_SIZE``) but not an upload: a multipart body is
streamed to a temporary file whatever its size, and only then can a view refuse it. Here a body is
refused first: one with a ``Content-Length`` over ``REQUEST_MAX_BYTES`` gets 413 without being read,
and the upload handler stops a body without one (chunked) as soon as it has read more."""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.core.files.uploadhandler import FileUploadHandler
from django.http import HttpRequest, HttpResponse, JsonResponse


def _limit() -> int:
    return settings.REQUEST_MAX_BYTES


def _refusal(request: HttpRequest, size: int) -> HttpResponse:
    message = f"the request body is {size:,} bytes, over the limit of {_limit():,} bytes"
    if request.path.startswith("/api/"):
        return JsonResponse({"detail": message, "errors": []}, status=413)
    return HttpResponse(message, status=413, content_type="text/plain; charset=utf-8")


class RequestBodyLimitMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        try:
            size = int(request.META.get("CONTENT_LENGTH") or 0)
        except ValueError:
            size = 0
        if size > _limit():
            return _refusal(request, size)
        return self.get_response(request)


class UploadLimitHandler(FileUploadHandler):
    """Counts what a multipart body delivers and stops at the limit (a body sent without a length)."""

    def __init__(self, request: HttpRequest | None = None) -> None:
        super().__init__(request)
        self.received = 0

    def receive_data_chunk(self, raw_data: bytes, start: int) -> bytes:
        self.received += len(raw_data)
        if self.received > _limit():
            raise RequestDataTooBig(f"the upload is over the limit of {_limit():,} bytes")
        return raw_data

    def file_complete(self, file_size: int) -> None:
        return None
