"""One styled answer for every 4xx the web pages return (docs/web.md, "Errors").

Views that know what went wrong render their own page or fragment (a form with its inline errors, a 409
fragment swapped in place). Everything else that leaves the app as a 4xx -- Django's 404/400/CSRF
refusals, ``require_POST``'s empty 405, a view's plain-text 400 -- is turned here into the styled error
page, or for an htmx request into its fragment aimed at the page's ``#htmx-error`` region (an htmx
request that got a whole page, or an empty body, would otherwise show nothing at all). The REST API
(``/api/``) and the admin keep their own answers.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.template.loader import render_to_string
from django.utils.safestring import mark_safe

TITLES = {
    400: "Bad request",
    403: "Not allowed",
    404: "Not found",
    405: "Method not allowed",
    409: "Conflict",
    413: "Too large",
    429: "Too many requests",
}
#: Statuses whose HTML fragment a view means to be swapped in place (the htmx-config of base.html).
IN_PLACE = (400, 409)
#: The region of base.html that shows an error fragment of an htmx request.
HTMX_TARGET = "#htmx-error"
_PASS_THROUGH = ("/api/", "/admin/", "/static/")


def is_htmx(request: HttpRequest) -> bool:
    return request.headers.get("HX-Request") == "true"


def render_error(request: HttpRequest, status: int, reason: str = "", *, title: str = "",
                 fragment_html: str = "", back: str = "", back_label: str = "") -> HttpResponse:
    """The styled error page (or, for htmx, its fragment retargeted to ``#htmx-error``)."""
    context = {"title": title or TITLES.get(status, "Request refused"), "reason": reason, "status": status,
               "fragment_html": mark_safe(fragment_html), "back": back, "back_label": back_label}  # noqa: S308 - already-escaped HTML of our own templates
    template = "annotation/error.html#fragment" if is_htmx(request) else "annotation/error.html"
    response = HttpResponse(render_to_string(template, context, request=request), status=status)
    if is_htmx(request):
        response["HX-Retarget"] = HTMX_TARGET
        response["HX-Reswap"] = "innerHTML"
    response.styled_error = True  # type: ignore[attr-defined]
    return response


def _api_error(status: int, detail: str) -> JsonResponse:
    """The API's error body (docs/api.md, "Errors") for what no API view saw: an address under /api/ that
    matches no endpoint (a malformed id such as ``jobs/null,null/`` included), a request that could not
    be read."""
    return JsonResponse({"detail": detail, "errors": []}, status=status)


def page_not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """``handler404``: the page does not exist, or the viewer may not know that it does."""
    if request.path.startswith("/api/"):
        return _api_error(404, "Not found.")
    return render_error(request, 404, "there is no such page, or you are not a member of its study")


def bad_request(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """``handler400`` (e.g. a request for a host not in ALLOWED_HOSTS, a malformed upload)."""
    if request.path.startswith("/api/"):
        return _api_error(400, "the request could not be read")
    return render_error(request, 400, "the request could not be read")


def csrf_failure(request: HttpRequest, reason: str = "") -> HttpResponse:
    """``CSRF_FAILURE_VIEW``: usually a form left open across a sign-in or a server restart."""
    return render_error(request, 403, "the form's security token was missing or out of date; reload the page and "
                        "send the form again", title="Form expired")


_TAG = re.compile(r"<[a-zA-Z!/]")


class ErrorPageMiddleware:
    """Styles the 4xx answers that no view styled (see the module docstring)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if not 400 <= response.status_code < 500 or getattr(response, "styled_error", False):
            return response
        if request.path.startswith(_PASS_THROUGH) or getattr(response, "streaming", False):
            return response
        status = response.status_code
        body = response.content.decode(response.charset or "utf-8", errors="replace").strip()
        html = response.get("Content-Type", "").startswith("text/html") and bool(_TAG.search(body))
        whole_page = html and "<html" in body[:600].lower()
        ours = whole_page and 'class="topbar"' in body
        htmx = is_htmx(request)
        if html and not whole_page:
            # A view's fragment: htmx swaps 400/409 in place; anything else is shown inside the styled frame.
            if htmx and status in IN_PLACE:
                return response
            styled = render_error(request, status, fragment_html=body)
        elif ours and not htmx:
            return response  # a page of ours that already explains itself (a form with inline errors)
        elif whole_page:
            styled = render_error(request, status, self._reason(request, response, ""))
        else:
            styled = render_error(request, status, self._reason(request, response, body))
        for header in ("Allow", "Retry-After", "Vary"):
            if header in response:
                styled[header] = response[header]
        return styled

    @staticmethod
    def _reason(request: HttpRequest, response: HttpResponse, text: str) -> str:
        if text:
            return text
        if response.status_code == 405:
            return f"{request.method} is not accepted at this address (it accepts {response.get('Allow', 'none')})"
        return ""
