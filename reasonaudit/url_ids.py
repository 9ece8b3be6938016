"""Ids in URLs fit the database's integers: a larger one is a 404 before any view runs.

Django's ``<int:...>`` converter takes any number of digits, and a lookup with a value beyond 64
bits fails in the database driver (SQLite: OverflowError), a 500 (issue 29, L3: study ids above
2^63). One check on every resolved route covers every view, page and API alike, present and future."""

from __future__ import annotations

from collections.abc import Callable

from django.http import Http404, HttpRequest, HttpResponse

from reasonlib.ids import MAX_ID  # every id column: a signed 64-bit integer, on SQLite and PostgreSQL


class UrlIdRangeMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_view(self, request: HttpRequest, view_func, view_args, view_kwargs) -> None:
        for value in (*view_args, *view_kwargs.values()):
            # bool is an int too, but no converter yields one.
            if isinstance(value, int) and not isinstance(value, bool) and not -MAX_ID - 1 <= value <= MAX_ID:
                raise Http404("no such object")
        return None
