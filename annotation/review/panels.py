"""Panels other apps add to the review page (a trace's step importance, ...): annotation cannot import the
apps above it, so they register a panel here from their AppConfig.ready, as trace conditions register in
annotation.review.filters. A panel is a function (request, trace, membership) -> HTML (safe, escaped by its
own template) or "" when it has nothing to show for the trace; the review page draws them in order. Each
panel decides itself what the member may read (annotation.gate)."""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest
from django.utils.safestring import SafeString

from annotation.models import Membership, Trace

ReviewPanel = Callable[[HttpRequest, Trace, Membership], str]
_PANELS: dict[str, ReviewPanel] = {}


def register_panel(name: str, panel: ReviewPanel) -> None:
    _PANELS[name] = panel


def review_panels(request: HttpRequest, trace: Trace, membership: Membership) -> list[SafeString]:
    """The registered panels' HTML for ``trace``, in registration order, empty ones left out."""
    out = []
    for panel in _PANELS.values():
        html = panel(request, trace, membership)
        if html:
            out.append(SafeString(html))
    return out
