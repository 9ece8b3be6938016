"""Stored agreement reports (agreement.models.StoredReport): what the *Judge vs reference* page shows for
its default selection and what the Annotators page shows for the whole study, written by the score job.

Computing either reads every label of the study and bootstraps a thousand resamples: seconds at 100,000
traces, on a request that could not wait for it. The score job, which every change of the data queues
(annotation.signals.data_changed), writes both after the scores they read (``refresh``, registered with
``scoring.score_jobs.register_summary`` by agreement.apps). The same signal marks them ``stale``
(``invalidate``) instead of deleting them: a page then shows the stored figures, says when they were
computed and that a recompute is under way, and the job replaces them. Selections other than the
default (another source, profile, seed or a calibration sample) are computed on request and cached per
data version (agreement.services).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from agreement.models import StoredReport
from annotation.models import Job, Study


def pair_key(reference: str, candidate: str, profile_pk: int, profile_version: int, seed: int) -> str:
    """What a *Judge vs reference* report is of: two sources, a profile at a version, a seed."""
    return "\x1f".join([reference, candidate, str(profile_pk), str(profile_version), str(seed)])


ANNOTATORS_KEY = "study"


def read(study: Study, kind: str, key: str) -> StoredReport | None:
    """The stored report of ``kind`` and ``key``, stale or not, or None when none was stored."""
    return StoredReport.objects.filter(study=study, kind=kind, key=key).first()


def status(row: StoredReport) -> dict[str, Any]:
    """What a page says of a stored report: when it was computed, and whether the data changed since."""
    return {"computed_at": row.computed_at, "stale": row.stale}


def write(study: Study, kind: str, key: str, data: dict[str, Any], *, read_at: datetime,
          job: Job | None) -> StoredReport:
    """Store ``data`` as the one report of ``kind`` for the study (older keys go: another profile
    version, another primary judge). ``read_at``: when the job began to read the data it is computed from;
    a change of the data since then (``invalidate`` marked the row, or a score job was queued that has not
    run) leaves it stale, so the page never shows it as current."""
    with transaction.atomic():
        current = (StoredReport.objects.select_for_update().filter(study=study, kind=kind, key=key).first())
        changed = current is not None and current.marked_at is not None and current.marked_at >= read_at
        stale = changed or _recompute_pending(study, job, read_at)
        StoredReport.objects.filter(study=study, kind=kind).exclude(key=key).delete()
        row, _ = StoredReport.objects.update_or_create(
            study=study, kind=kind, key=key, defaults={"data": data, "computed_at": timezone.now(), "stale": stale})
    return row


def _recompute_pending(study: Study, job: Job | None, read_at: datetime) -> bool:
    """A score job queued for the study since ``read_at`` (each change of the data queues one, or joins
    one still queued): the data may have changed after it was read."""
    queued = Job.objects.filter(study=study, kind=Job.Kind.SCORE, status=Job.Status.QUEUED, created_at__gte=read_at)
    if job is not None:
        queued = queued.exclude(pk=job.pk)
    return queued.exists()


def invalidate(sender, study: Study, **kwargs) -> None:
    """Receiver of annotation.signals.data_changed: the stored reports describe older data. They stay,
    marked, until the score job that the same change queued replaces them."""
    StoredReport.objects.filter(study=study).update(stale=True, marked_at=timezone.now())
