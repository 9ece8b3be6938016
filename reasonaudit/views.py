"""Project-level views that belong to no app."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponseRedirect
from django.templatetags.static import static
from django.views.decorators.http import require_safe


@require_safe
def favicon(request: HttpRequest) -> HttpResponseRedirect:
    # Browsers and tools ask for /favicon.ico whatever the page links; send
    # them to the SVG icon. Temporary: its hashed static URL changes with it.
    return HttpResponseRedirect(static("favicon.svg"))
