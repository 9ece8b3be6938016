"""What every page shares. Each view starts with an access helper that returns the object or
raises 404 (not a member) / 403 (a member without the role), then delegates
to the domain modules (services, review, skeletons, members); htmx requests
get the page's partial.

Roles: annotators review, author skeleton drafts and see their queue;
adjudicators also approve skeletons and settle disagreements; owners also
manage members and queues. A non-member gets 404 everywhere.
"""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.utils.http import url_has_allowed_host_and_scheme
from django.utils.text import capfirst

from annotation import access, errors
from annotation.models import Membership, Problem, Study, Trace


def member_view(view):
    """login_required; refusals (annotation.access.AccessDenied) are rendered
    by ``permission_denied`` below, the same way on every page."""
    return login_required(view)


def permission_denied(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """``handler403`` of the project: an outsider's refusal is a plain 404 (a
    study's existence is not revealed), a member's a 403 naming the role."""
    if isinstance(exception, access.AccessDenied) and exception.outsider:
        return errors.page_not_found(request, Http404(str(exception)))
    reason = str(exception) if isinstance(exception, access.AccessDenied) else "you may not do this"
    return errors.render_error(request, 403, capfirst(reason))  # a sentence: "Adjudication is for owners ..."


def study_for(request: HttpRequest, study_id: int) -> tuple[Study, Membership]:
    return access.check_study(request.user, study_id)


def trace_for(request: HttpRequest, trace_id: int) -> tuple[Trace, Membership]:
    return access.check_trace(request.user, trace_id)


def problem_for(request: HttpRequest, problem_id: int) -> tuple[Problem, Membership]:
    return access.check_object(request.user, Problem.objects.select_related("study", "approved_skeleton"),
                               problem_id, study_path="study_id", what="problem")


def safe_next(request: HttpRequest, fallback: str) -> str:
    """The posted ``next`` when it stays on this site, else ``fallback``: a
    form must never send the browser to another host (an open redirect)."""
    wanted = request.POST.get("next") or request.GET.get("next") or ""
    if wanted and url_has_allowed_host_and_scheme(wanted, allowed_hosts={request.get_host()},
                                                  require_https=request.is_secure()):
        return wanted
    return fallback


def page_query(request: HttpRequest, drop=("page",)) -> str:
    q = request.GET.copy()
    for key in drop:
        q.pop(key, None)
    return q.urlencode()
