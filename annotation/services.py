"""Named domain operations shared by the web views, the API and the CLI.

Access (who may do what) is decided by ``annotation.access``; ``do_*``
functions change data inside a transaction and queue background work only
after commit.
"""

from __future__ import annotations

import hashlib
import secrets
from pathlib import Path
from typing import IO, Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.files.base import File
from django.db import transaction

from annotation import jobs, signals
from annotation.importing.pipeline import ImportReport, import_stream
from annotation.models import Job, Membership, Problem, Study

User = get_user_model()


@transaction.atomic
def do_create_study(name: str, *, owner, **fields) -> Study:
    """A new study owned by ``owner``. Never attaches anyone to an existing
    study: a name that is taken (even by a concurrent request) raises
    IntegrityError."""
    study = Study.objects.create(name=name, **fields)
    Membership.objects.create(study=study, user=owner, role=Membership.Role.OWNER)
    return study


#: Study fields the scores depend on: the "final" source falls back to the primary judge.
STUDY_SCORED_FIELDS = ("primary_judge",)
#: Problem fields the analytics read: leaderboards grouped or filtered by domain are cached
#: per score set, so a new score set is what refreshes them.
PROBLEM_SCORED_FIELDS = ("domain",)


def do_update_study(study: Study, fields: dict[str, Any], *, user=None) -> set[str]:
    """Change a study's settings (web and API alike) and return the names
    that changed. A change the scores depend on queues a recompute once the
    change is committed, so ``final`` scores never keep the old primary judge."""
    return _update(study, fields, study, STUDY_SCORED_FIELDS, "study settings changed")


def do_update_problem(problem: Problem, fields: dict[str, Any], *, user=None) -> set[str]:
    """Change a problem's text, gold answer, domain or tags; a change the
    analytics read (the domain) queues a recompute of its study once committed."""
    return _update(problem, fields, problem.study, PROBLEM_SCORED_FIELDS, "problem changed")


def _update(obj: Study | Problem, fields: dict[str, Any], study: Study, scored: tuple[str, ...], reason: str) -> set[str]:
    with transaction.atomic():
        changed = {name for name, value in fields.items() if getattr(obj, name) != value}
        for name in changed:
            setattr(obj, name, fields[name])
        if changed:
            obj.save(update_fields=sorted(changed))
        if changed & set(scored):
            _data_changed_on_commit(study, reason)
    return changed


def _data_changed_on_commit(study: Study, reason: str) -> None:
    transaction.on_commit(lambda: signals.data_changed.send(sender=Study, study=study, reason=reason))


@transaction.atomic
def do_get_or_create_study(name: str, *, owner=None) -> tuple[Study, bool]:
    """For operators (CLI, demo): the study by name, created if missing."""
    study, created = Study.objects.get_or_create(name=name)
    if owner is not None:
        Membership.objects.get_or_create(study=study, user=owner, defaults={"role": Membership.Role.OWNER})
    return study, created


@transaction.atomic
def do_add_member(study: Study, username: str, role: str, *, password: str | None = None) -> tuple[Membership, bool]:
    """Create the user if missing (with ``password``, else unusable) and set their role."""
    if role not in Membership.Role.values:
        raise ValueError(f"unknown role {role!r}; choose one of {', '.join(Membership.Role.values)}")
    user, user_created = User.objects.get_or_create(username=username)
    if password is not None:
        user.set_password(password)
        user.is_active = True
        user.save()
    elif user_created:
        user.set_unusable_password()
        user.save()
    membership, _ = Membership.objects.update_or_create(study=study, user=user, defaults={"role": role})
    return membership, user_created


def generate_password() -> str:
    return secrets.token_urlsafe(12)


def run_import_job(job_id: int, stream: IO[bytes] | None = None, *, progress=None) -> ImportReport | None:
    """The body of every import: CLI (in process) and upload (Celery) alike."""
    if not jobs.claim(job_id):
        return None
    job = Job.objects.select_related("study", "created_by").get(pk=job_id)

    def publish(done: int, total: int) -> None:
        jobs.report_progress(job_id, done, total)
        if progress:
            progress(done, total)

    try:
        if stream is None:
            with job.input_file.open("rb") as fh:
                report = import_stream(
                    job.study, fh, job.params["format"], skip_invalid=job.params.get("skip_invalid", False),
                    actor=job.created_by, progress=publish,
                )
        else:
            report = import_stream(
                job.study, stream, job.params["format"], skip_invalid=job.params.get("skip_invalid", False),
                actor=job.created_by, progress=publish,
            )
    except Exception as exc:
        jobs.finish(job_id, status=Job.Status.FAILED, error=f"{type(exc).__name__}: {exc}")
        _delete_upload(job)
        raise
    _delete_upload(job)
    status = Job.Status.SUCCEEDED if report.committed else Job.Status.FAILED
    error = "" if report.committed else f"{len(report.rejected)} line(s) rejected; nothing was imported"
    jobs.finish(job_id, status=status, result=report.as_dict(), error=error, done=report.read, total=report.read)
    if report.committed and (report.traces_created or report.labels_created or report.labels_updated):
        _after_import(job.study)
    return report


def _after_import(study: Study) -> None:
    """Hook for work that follows new data (scoring); filled in by the scoring app."""
    from annotation import signals

    signals.data_changed.send(sender=Study, study=study, reason="import")


def upload_too_large(size: int | None) -> str | None:
    """Why an upload of ``size`` bytes is refused (over REASONAUDIT_IMPORT_MAX_BYTES), or None."""
    limit = settings.IMPORT_MAX_BYTES
    if size is not None and size > limit:
        return f"the file is {size:,} bytes, over the import limit of {limit:,} bytes"
    return None


def _sha256(upload: File) -> str:
    digest = hashlib.sha256()
    for chunk in upload.chunks():
        digest.update(chunk)
    upload.seek(0)
    return digest.hexdigest()


@transaction.atomic
def do_create_import_job(study: Study, *, fmt: str, skip_invalid: bool, user=None, upload: File | None = None,
                         path: Path | None = None) -> Job:
    """An import job; an upload is stored for the worker (refused before anything is written when it is
    over the limit) with its size and sha256 in the job's params, which stay after the file is deleted."""
    params: dict[str, Any] = {"format": fmt, "skip_invalid": skip_invalid,
                              "filename": upload.name if upload else str(path)}
    if upload is not None:
        problem = upload_too_large(upload.size)
        if problem is not None:
            raise ValueError(problem)
        params.update(size=upload.size, sha256=_sha256(upload))
    job = Job(study=study, kind=Job.Kind.IMPORT, created_by=user, params=params)
    if upload is not None:
        job.input_file.save(Path(upload.name).name or "upload.jsonl", upload, save=False)
    job.save()
    return job


def _delete_upload(job: Job) -> None:
    """An upload is kept only until its import ends (its size and sha256 stay in the job's params)."""
    if job.input_file:
        job.input_file.delete(save=False)
        Job.objects.filter(pk=job.pk).update(input_file="")


def do_queue_import(study: Study, upload: File, *, fmt: str, skip_invalid: bool, user) -> Job:
    """Store the upload and import it in the background once the job row is committed."""
    with transaction.atomic():
        job = do_create_import_job(study, fmt=fmt, skip_invalid=skip_invalid, user=user, upload=upload)
        jobs.queue("annotation.tasks.import_job", job.pk)
    return job
