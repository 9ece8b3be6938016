"""The score job's writer of the stored agreement reports (agreement.stored holds what pages read of
them): the *Judge vs reference* report of the page's default selection and the Annotators report, read
after the study's scores are stored, chunk by chunk (agreement.streamed). Apart from
agreement.stored because it computes through agreement.services, which reads through agreement.stored."""

from __future__ import annotations

from django.utils import timezone

from agreement import data as ad
from agreement import services as svc
from agreement import stored, streamed
from agreement.models import StoredReport
from annotation.models import Job, Study


def store(study: Study, job: Job | None = None, *, chunk_size: int | None = None) -> None:
    """Both reports, read chunk by chunk (agreement.streamed) when the default selection's sources have
    stored scores, else from one read of the whole study."""
    read_at = timezone.now()
    sel = svc.select(study, {})
    streamed_reports = streamed.reports(sel, chunk_size=chunk_size)
    if streamed_reports is not None:
        metrics, rows, people = streamed_reports
        stored.write(study, StoredReport.Kind.PAIR, svc.stored_pair_key(sel), {"metrics": metrics},
                     read_at=read_at, job=job, disagreements=rows)
        stored.write(study, StoredReport.Kind.ANNOTATORS, stored.ANNOTATORS_KEY, people, read_at=read_at, job=job)
        return
    data = ad.AgreementData.read(study)
    report = svc.pair_report(sel, data)
    stored.write(study, StoredReport.Kind.PAIR, svc.stored_pair_key(sel), {"metrics": report["metrics"]},
                 read_at=read_at, job=job, disagreements=report["disagreements"])
    stored.write(study, StoredReport.Kind.ANNOTATORS, stored.ANNOTATORS_KEY, svc.annotator_report(study, data=data),
                 read_at=read_at, job=job)


def refresh(study: Study, job: Job | None, whole: bool) -> None:
    """The score job's hook (scoring.hooks.register_summary): a job that recomputes every profile
    (each change of the data queues one) stores anew; one for some profiles only (a profile changed, the
    data did not) stores when the default selection's report is not stored current."""
    if not whole:
        sel = svc.select(study, {})
        row = stored.read(study, StoredReport.Kind.PAIR, svc.stored_pair_key(sel))
        if row is not None and not row.stale:
            return
    store(study, job)
