"""Who may see and do what: the one place that decides access.

Every web view, API view and management command asks this module; none
decides access itself. The rules (docs/review.md, docs/agreement.md):

* A study exists only for its members. Anyone else -- another user, an
  anonymous visitor -- is refused as an *outsider*, which every caller
  renders as 404, so an outsider cannot learn that a study (or anything in
  it) exists.
* Members are refused by *role* with 403, and the message names the role
  the operation needs: annotators review and draft skeletons; adjudicators
  also approve skeletons, settle disagreements and export labels; owners
  also manage members, imports, judges, profiles and queues.
* Blind mode: in a blind study an annotator sees other sources' verdicts
  (other annotators' labels, judge verdicts) only on a trace they finished
  labelling; pages that list such verdicts across traces (agreement,
  a judge's disagreements) are for those who see everything. Filters,
  counts, cohorts, comparisons, reports and exports declare the label
  sources they read and ask the visibility gate (annotation.gate), built on
  ``sees_everything`` below.
* A job may be cancelled by who started it, and by the study's owners and
  adjudicators.

One refusal type, :class:`AccessDenied` (a ``PermissionDenied`` of the
family of ``reasonlib.refusals``), carries the answer;
``reasonaudit.urls.handler403`` renders it on the web and
``annotation.api.errors.exception_handler`` in the API, the same way.
"""

from __future__ import annotations

from typing import TypeVar

from django.core.exceptions import PermissionDenied
from django.db.models import F, Model, QuerySet

from annotation.models import Job, Membership, Study, Trace
from reasonlib.refusals import Refusal

OWNER, ADJUDICATOR, ANNOTATOR = Membership.Role.OWNER, Membership.Role.ADJUDICATOR, Membership.Role.ANNOTATOR
#: Who may change what a study's members do: role sets by operation kind.
OWNERS = (OWNER,)
ADJUDICATORS = (OWNER, ADJUDICATOR)

M = TypeVar("M", bound=Model)

class AccessDenied(Refusal, PermissionDenied):
    """The refusal of access (of the family of reasonlib.refusals). ``outsider``
    refusals are answered 404 with a message that names no study; the others
    403 with ``str(exc)``, which names the role the operation needs."""

    def __init__(self, message: str, *, outsider: bool = False) -> None:
        super().__init__(message, code="not_found" if outsider else "forbidden")
        self.outsider = outsider

    @property
    def status(self) -> int:  # type: ignore[override] - decided per refusal, not per class
        return 404 if self.outsider else 403

    @property
    def status_code(self) -> int:
        return self.status

    def __reduce__(self):
        return type(self), (self.message,), {"outsider": self.outsider}


def not_found(what: str = "page") -> AccessDenied:
    """An outsider's refusal: the same words whether ``what`` exists or not."""
    return AccessDenied(f"No such {what}", outsider=True)


# --------------------------------------------------------------------------
# Membership


def membership(user, study_id: int) -> Membership | None:
    """The user's membership of the study, with the study; None for outsiders."""
    if user is None or not user.is_authenticated:
        return None
    return Membership.objects.select_related("study").filter(study_id=study_id, user=user).first()


def check_study(user, study_id: int) -> tuple[Study, Membership]:
    """The study and the user's membership, or an outsider's refusal."""
    m = membership(user, study_id)
    if m is None:
        raise not_found("study")
    return m.study, m


def check_member_of(user, obj: M | None,  # noqa: UP047 - the repo's tools parse 3.11 syntax
                    study_id: int | None, what: str) -> tuple[M, Membership]:
    """``obj`` (already fetched, or None when missing) and the user's
    membership of ``study_id``; an outsider's refusal when either is missing."""
    if obj is None or study_id is None:
        raise not_found(what)
    m = membership(user, study_id)
    if m is None:
        raise not_found(what)
    return obj, m


def check_object(user, queryset: QuerySet[M],  # noqa: UP047
                 pk: int, *, study_path: str, what: str) -> tuple[M, Membership]:
    """One row of ``queryset`` in a study the user belongs to, and that
    membership. ``study_path`` is the lookup from the row to its study id
    (``"study_id"``, ``"trace__study_id"``)."""
    obj = queryset.filter(pk=pk).first()
    study_id = _follow(obj, study_path) if obj is not None else None
    return check_member_of(user, obj, study_id, what)


def _follow(obj, path: str):
    for part in path.split("__"):
        obj = getattr(obj, part)
    return obj


# --------------------------------------------------------------------------
# Roles


def has_role(m: Membership | None, *roles: str) -> bool:
    return m is not None and m.role in roles


def check_role(m: Membership, *roles: str, to: str = "") -> None:
    """403 unless the member holds one of ``roles``; the message names them."""
    if m.role not in roles:
        needed = " and ".join(_plural(r) for r in roles)
        doing = f"{to} is for {needed}" if to else f"this is for {needed}"
        raise AccessDenied(f"{doing}; you are {_article(m.role)} {m.role}")


def check_owner(m: Membership, to: str = "") -> None:
    check_role(m, *OWNERS, to=to)


def check_adjudicator(m: Membership, to: str = "") -> None:
    """Owners and adjudicators."""
    check_role(m, *ADJUDICATORS, to=to)


def can_adjudicate(m: Membership | None) -> bool:
    return has_role(m, *ADJUDICATORS)


def _plural(role: str) -> str:
    return f"{role}s"


def _article(role: str) -> str:
    return "an" if role[:1] in "aeiou" else "a"


# --------------------------------------------------------------------------
# Blind mode


def sees_everything(m: Membership) -> bool:
    """Owners and adjudicators are not blinded; neither is anyone in an open study."""
    return not m.study.blind or m.role in ADJUDICATORS


def is_revealed(m: Membership, finished_trace: bool) -> bool:
    """Whether the member sees other sources' verdicts on one trace: always
    when they see everything, else once they finished labelling it."""
    return sees_everything(m) or finished_trace


def check_sees_everything(m: Membership, what: str) -> None:
    """For pages that list other sources' verdicts across traces."""
    if not sees_everything(m):
        raise AccessDenied(f"this study is blind: {what} shows every source's verdicts, so it is for owners and "
                           f"adjudicators; you are {_article(m.role)} {m.role}")


# --------------------------------------------------------------------------
# Jobs


def can_cancel_job(user, job: Job, m: Membership) -> bool:
    """Who started the job, and the study's owners and adjudicators."""
    return (job.created_by_id is not None and job.created_by_id == user.pk) or m.role in ADJUDICATORS


def check_cancel_job(user, job: Job, m: Membership) -> None:
    if not can_cancel_job(user, job, m):
        raise AccessDenied("cancelling a job is for who started it, owners and adjudicators; "
                           f"you are {_article(m.role)} {m.role} who did not start it")


def check_job(user, job_id: int, *, kinds: tuple[str, ...] | None = None,
              study_id: int | None = None) -> tuple[Job, Membership]:
    """A job of a study the user belongs to (of one of ``kinds``, in
    ``study_id`` when given), and that membership."""
    qs = Job.objects.select_related("study")
    if kinds:
        qs = qs.filter(kind__in=kinds)
    if study_id is not None:
        qs = qs.filter(study_id=study_id)
    return check_object(user, qs, job_id, study_path="study_id", what="job")


# --------------------------------------------------------------------------
# Traces (the review page and its API: one query for the trace and my role)


def check_trace(user, trace_id: int) -> tuple[Trace, Membership]:
    """The trace with its problem and study, and the user's membership, in
    one query; an outsider's refusal otherwise."""
    trace = (
        Trace.objects.select_related("study", "problem")
        .filter(pk=trace_id, study__memberships__user=user)
        .annotate(my_role=F("study__memberships__role"))
        .first()
        if user.is_authenticated else None
    )
    if trace is None:
        raise not_found("trace")
    # Built from the joined row rather than fetched again; never saved.
    return trace, Membership(study=trace.study, user=user, role=trace.my_role)
