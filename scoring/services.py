"""Named scoring operations shared by the pages, the API, the CLI and the
Celery task: profiles (``ensure_profiles``, ``do_create_profile``,
``do_edit_profile``), queueing recomputes (``request_recompute``,
``do_queue_score_job``) and lookups (``resolve_profile``,
``resolve_source``). Running a recompute is ``scoring.score_jobs``; this
module queues its task by name, so it imports neither the task nor the
pandas-backed modules the run needs.

``do_*`` functions change data inside a transaction and queue background
work only after commit.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from annotation import jobs
from annotation.models import Job, Study
from reasonlib.refusals import FieldInvalid, Invalid
from scoring.core.profile import ABLATIONS, DEFAULT, Profile
from scoring.models import ScoringProfile

log = logging.getLogger("scoring")

DEFAULT_NAME = "default"
#: Built-in profiles of every study: the paper's defaults and the spec's ablations.
BUILTIN_PROFILES: dict[str, dict[str, Any]] = {DEFAULT_NAME: {}, **ABLATIONS}
ABLATION_NAMES = tuple(ABLATIONS)
#: A queued score job older than this is presumed lost and not joined.
PENDING_STALE = timedelta(minutes=10)


class UnknownProfile(Invalid):
    """A profile name that names no current profile of the study."""

    default_field = "profile"


# ---------------------------------------------------------------------------
# Profiles
# ---------------------------------------------------------------------------
def _builtin_params(name: str) -> dict[str, Any]:
    return DEFAULT.replace(**BUILTIN_PROFILES[name]).to_dict()


def ensure_profiles(study: Study) -> dict[str, ScoringProfile]:
    """The study's current profiles by name, creating the built-in ones (and
    the study's default profile) the first time. One query when they exist."""
    current = {p.name: p for p in ScoringProfile.objects.filter(study=study, is_current=True).order_by("name")}
    missing = [name for name in BUILTIN_PROFILES if name not in current]
    if missing:
        for name in missing:
            try:
                with transaction.atomic():
                    current[name] = ScoringProfile.objects.create(
                        study=study, name=name, version=1, params=_builtin_params(name)
                    )
            except IntegrityError:  # created meanwhile by another request, or an old version exists
                current[name] = ScoringProfile.objects.get(study=study, name=name, is_current=True)
        current = dict(sorted(current.items()))
    if study.default_profile_id is None or study.default_profile_id not in {p.pk for p in current.values()}:
        # The study points at no profile, or at a version that was superseded.
        default = _current_default(study, current)
        Study.objects.filter(pk=study.pk).update(default_profile=default)
        study.default_profile_id = default.pk
    return current


def _current_default(study: Study, current: dict[str, ScoringProfile]) -> ScoringProfile:
    if study.default_profile_id is not None:
        for p in current.values():
            if p.pk == study.default_profile_id:
                return p
        old = ScoringProfile.objects.filter(pk=study.default_profile_id).values_list("name", flat=True).first()
        if old in current:
            return current[old]
    return current[DEFAULT_NAME]


def default_profile(study: Study, current: dict[str, ScoringProfile] | None = None) -> ScoringProfile:
    current = current if current is not None else ensure_profiles(study)
    return _current_default(study, current)


def resolve_profile(study: Study, name: str | None, current: dict[str, ScoringProfile] | None = None) -> ScoringProfile:
    """The current version of the profile ``name`` (the study's default when empty)."""
    current = current if current is not None else ensure_profiles(study)
    if not name:
        return default_profile(study, current)
    if name not in current:
        raise UnknownProfile(f"no profile named {name!r}; choose one of {', '.join(current)}")
    return current[name]


def resolve_source(study: Study, name: str | None, judges: list[str] | None = None) -> str:
    """A valid source name (``final`` when empty); raises sources.UnknownSource."""
    from scoring import sources

    return sources.check_source(study, name or sources.FINAL, judges)


def validate_params(params: Any) -> dict[str, Any]:
    """Full, validated parameters (missing keys take the paper's defaults);
    raises reasonlib.refusals.Invalid (a ValueError) naming the bad field."""
    return Profile.from_dict(params).to_dict()


@transaction.atomic
def do_create_profile(study: Study, name: str, params: dict[str, Any], *, user=None) -> ScoringProfile:
    ensure_profiles(study)
    name = (name or "").strip()
    if not name or len(name) > 100:
        raise FieldInvalid("name", "give a name of 1 to 100 characters")
    if ScoringProfile.objects.filter(study=study, name=name).exists():
        raise FieldInvalid("name", f"a profile named {name!r} exists; edit it instead")
    profile = ScoringProfile.objects.create(
        study=study, name=name, version=1, params=validate_params(params), created_by=user
    )
    request_recompute(study, reason=f"profile {name} created", profiles=[name], user=user)
    return profile


@transaction.atomic
def do_edit_profile(study: Study, name: str, changes: dict[str, Any], *, user=None) -> tuple[ScoringProfile, bool]:
    """Apply ``changes`` to the current version of ``name`` as a new version
    row (the old one is kept, no longer current). Returns (current row,
    whether a new version was made); unchanged parameters make none."""
    ensure_profiles(study)
    old = ScoringProfile.objects.select_for_update().filter(study=study, name=name, is_current=True).first()
    if old is None:
        raise UnknownProfile(f"no profile named {name!r}")
    params = validate_params({**Profile.from_dict(old.params).to_dict(), **changes})
    if params == validate_params(old.params):
        return old, False
    ScoringProfile.objects.filter(pk=old.pk).update(is_current=False)
    new = ScoringProfile.objects.create(
        study=study, name=name, version=old.version + 1, params=params, created_by=user
    )
    Study.objects.filter(pk=study.pk, default_profile=old).update(default_profile=new)
    if study.default_profile_id == old.pk:
        study.default_profile_id = new.pk
    request_recompute(study, reason=f"profile {name} v{new.version}", profiles=[name], user=user)
    return new, True


# ---------------------------------------------------------------------------
# Queueing (debounced)
# ---------------------------------------------------------------------------
def _covers(pending: dict[str, Any], profiles: list[str] | None) -> bool:
    """Whether a queued job's parameters include everything a request asks for."""
    queued = pending.get("profiles")
    if queued is None:
        return True
    return profiles is not None and set(profiles) <= set(queued)


def request_recompute(study: Study, *, reason: str, profiles: list[str] | None = None, user=None) -> Job:
    """Queue a recompute of the study's scores after the current transaction
    commits -- unless one is queued already and not yet started, which will
    read the newest data when it runs (debounce: a burst of label saves
    queues one job). ``profiles=None`` means every current profile.

    The task starts ``SCORING_DEBOUNCE_SECONDS`` (default 5) after the first
    request, so saves within that window join it. A job still queued after
    ``PENDING_STALE`` (its message lost, no worker) is not joined.
    """
    with transaction.atomic():
        pending = (
            Job.objects.select_for_update()
            .filter(study=study, kind=Job.Kind.SCORE, status=Job.Status.QUEUED,
                    created_at__gte=timezone.now() - PENDING_STALE)
            .order_by("created_at")
        )
        for job in pending:
            if _covers(job.params, profiles):
                return job
        job = Job.objects.create(
            study=study, kind=Job.Kind.SCORE, created_by=user,
            params={"profiles": profiles, "reason": reason[:200]},
        )
        delay = float(getattr(settings, "SCORING_DEBOUNCE_SECONDS", 5))
        transaction.on_commit(lambda: _enqueue(job.pk, countdown=delay))
    return job


def do_queue_score_job(study: Study, *, profiles: list[str] | None = None, user=None, reason: str = "manual") -> Job:
    """A new job that is not merged with pending ones (the CLI waits for its own job)."""
    with transaction.atomic():
        job = Job.objects.create(
            study=study, kind=Job.Kind.SCORE, created_by=user, params={"profiles": profiles, "reason": reason}
        )
        transaction.on_commit(lambda: _enqueue(job.pk, countdown=0))
    return job


def _enqueue(job_id: int, *, countdown: float) -> None:
    from kombu.exceptions import OperationalError as BrokerError

    eager = settings.CELERY_TASK_ALWAYS_EAGER
    try:
        # By name: scoring.tasks imports this module.
        jobs.queue_task("scoring.tasks.recompute_scores", job_id, countdown=0 if eager else countdown)
    except BrokerError as exc:
        # Saving labels must not fail because the queue is down; the job is
        # marked failed so the next change queues a fresh one.
        log.warning("could not queue score job %s: %s", job_id, exc)
        jobs.finish(job_id, status=Job.Status.FAILED, error=f"the task queue is not reachable: {exc}")
