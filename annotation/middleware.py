"""The web side of the errors every kind of run shares, mapped once (the API maps the same
exceptions in annotation.api.errors): a run already in progress (409) and a task queue that is
down (503). A form post goes back to the page it came from with the message on top; an htmx
request gets the status and the message as text, which the page shows in place."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.utils.http import url_has_allowed_host_and_scheme
from kombu.exceptions import OperationalError as BrokerError

from annotation.jobs import RunConflict

BROKER_MESSAGE = "The task queue is not reachable; try again later."


class RunErrorsMiddleware:
    def __init__(self, get_response) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if isinstance(exception, RunConflict):
            return respond(request, str(exception), 409)
        if isinstance(exception, BrokerError):
            return respond(request, BROKER_MESSAGE, 503)
        return None


def respond(request: HttpRequest, message: str, status: int) -> HttpResponse:
    if getattr(request, "htmx", False):
        return HttpResponse(message, status=status, content_type="text/plain; charset=utf-8")
    back = request.headers.get("referer", "")
    if request.method == "POST" and back and url_has_allowed_host_and_scheme(
            back, allowed_hosts={request.get_host()}, require_https=request.is_secure()):
        messages.error(request, message)
        return HttpResponseRedirect(back)
    return render(request, "annotation/run_error.html", {"reason": message}, status=status)
