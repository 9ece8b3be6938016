"""The web's one rendering of the refusal family (reasonlib.refusals; the API renders the same refusals
in annotation.api.errors, commands in runs.cli).

A view that shows a form catches refusals into it with :func:`refusals_into`, so the message stands under
its field (or above the form when it names none). Any other refusal that leaves a view is answered here,
never as a 500: an htmx request gets the status and the text, which the page shows in place; a form post
goes back to the page it came from with the text flashed on top; a page that shows its own refusals
(:func:`refusals_shown_on`, the filter pages) gets that page, a post that names the page to go back to
(:func:`refusals_back_to`) goes there with the text flashed; anything else gets the styled error page
with the refusal's status. A task queue that is down is the 503 refusal; a model's or a serializer's
``ValidationError`` is bad input (400), as on the API. Access refusals
(annotation.access.AccessDenied) are left to ``handler403``, which hides a study from outsiders.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from django import forms
from django.contrib import messages
from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.utils.http import url_has_allowed_host_and_scheme
from kombu.exceptions import OperationalError as BrokerError
from rest_framework.exceptions import ValidationError as SerializerValidationError

from annotation.access import AccessDenied
from annotation.api.errors import model_refusal, serializer_refusal
from annotation.errors import render_error
from reasonlib.refusals import Refusal, Unavailable

BROKER_MESSAGE = "The task queue is not reachable; try again later."


class RefusalMiddleware:
    def __init__(self, get_response) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        exception = as_refusal(exception) or exception
        if not isinstance(exception, Refusal) or isinstance(exception, AccessDenied):
            return None
        if request.path.startswith("/api/"):
            return None  # DRF's handler answers there (a refusal outside a DRF view is a bug to see)
        page = getattr(request, "refusal_page", None)
        if page is not None:
            template, context = page
            return render(request, template, {**context, "error": str(exception)}, status=exception.status)
        back = getattr(request, "refusal_back", None)
        if back is not None:
            url, said = back
            messages.error(request, f"{said}: {exception}" if said else str(exception))
            return HttpResponseRedirect(url)
        return respond(request, str(exception), exception.status)


def as_refusal(exc: BaseException) -> Refusal | None:
    """``exc`` as the refusal it means, as the API reads it (annotation.api.errors): a refusal itself, a
    task queue that is down (503), a model's ``ValidationError`` (``full_clean``) or a serializer's (a
    run's parameters) as bad input naming their fields; None for anything else (a bug: a 500)."""
    if isinstance(exc, Refusal):
        return exc
    if isinstance(exc, BrokerError):
        return Unavailable(BROKER_MESSAGE)
    if isinstance(exc, DjangoValidationError):
        return model_refusal(exc)
    if isinstance(exc, SerializerValidationError):
        return serializer_refusal(exc)
    return None


def refusals_shown_on(request: HttpRequest, template: str, **context: object) -> None:
    """From here on, a refusal leaving the view is shown on the view's own page ``template`` (its text as
    ``error``, with ``context``, the refusal's status) rather than on the styled error page: a page of
    filters (analytics, agreement) says which filter names nothing where its filters are."""
    request.refusal_page = (template, context)  # type: ignore[attr-defined]


def refusals_back_to(request: HttpRequest, url: str, said: str = "") -> None:
    """From here on, a refusal leaving the view goes back to ``url`` with its text flashed after ``said``
    ("Not saved"): a form post whose page is known whatever the Referer says (a form on a list page)."""
    request.refusal_back = (url, said)  # type: ignore[attr-defined]


def respond(request: HttpRequest, message: str, status: int) -> HttpResponse:
    if getattr(request, "htmx", False):
        return HttpResponse(message, status=status, content_type="text/plain; charset=utf-8")
    back = request.headers.get("referer", "")
    if request.method == "POST" and back and url_has_allowed_host_and_scheme(
            back, allowed_hosts={request.get_host()}, require_https=request.is_secure()):
        messages.error(request, message)
        return HttpResponseRedirect(back)
    return render_error(request, status, message)


@contextmanager
def refusals_into(form: forms.BaseForm) -> Iterator[None]:
    """Put a refusal raised inside the block under its field of ``form`` (above the form when the field is
    not one of the form's); the view then shows the form again, as for its own validation errors. A model's
    or a serializer's ``ValidationError`` counts as the bad input it is (:func:`as_refusal`)."""
    try:
        yield
    except (Refusal, DjangoValidationError, SerializerValidationError) as caught:
        exc = as_refusal(caught)
        if exc is None or isinstance(exc, AccessDenied):
            raise
        if not hasattr(form, "cleaned_data"):  # an unbound form (a post that used none of its fields) shows it too
            form.cleaned_data = {}
        for field, message in exc.errors:
            form.add_error(field if field in form.fields else None, message if field in form.fields
                           else (f"{field}: {message}" if field else message))
