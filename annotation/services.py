"""Named domain operations shared by the web views, the API and the CLI.

Access (who may do what) is decided by ``annotation.access``; ``do_*``
functions change data inside a transaction and queue background work only
after commit.
"""

from __future__ import annotations

import hashlib
import io
import secrets
import shutil
import tempfile
import zipfile
from pathlib import Path
from typing import IO, Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.files.base import ContentFile, File
from django.db import transaction
from rest_framework.authtoken.models import Token

from annotation import jobs, signals
from annotation.importing import archives
from annotation.importing.adapters import PATH_FORMAT_OPTIONS, PATH_FORMAT_ROOTS, PATH_FORMATS
from annotation.importing.pipeline import ImportReport, import_stream
from annotation.models import Job, Membership, Problem, Study, Trace
from reasonlib.answers import check_answer

User = get_user_model()


@transaction.atomic
def do_create_study(name: str, *, owner, **fields) -> Study:
    """A new study owned by ``owner``. Never attaches anyone to an existing
    study: a name that is taken (even by a concurrent request) raises
    IntegrityError."""
    study = Study.objects.create(name=name, **fields)
    Membership.objects.create(study=study, user=owner, role=Membership.Role.OWNER)
    return study


def study_name_taken(name: str, *, exclude: Study | None = None) -> bool:
    """Whether another study has this name, whatever its case: "GSM8K" and "gsm8k" in one list are two studies
    nobody can tell apart (web and API alike; the column's own unique constraint is case-sensitive)."""
    others = Study.objects.filter(name__iexact=name.strip())
    if exclude is not None:
        others = others.exclude(pk=exclude.pk)
    return others.exists()


#: Study fields the scores depend on: the "final" source falls back to the primary judge.
STUDY_SCORED_FIELDS = ("primary_judge",)
#: Problem fields the analytics read: leaderboards grouped or filtered by domain are cached
#: per score set, so a new score set is what refreshes them; a new gold answer re-checks the answers.
PROBLEM_SCORED_FIELDS = ("domain", "gold_answer")


def do_update_study(study: Study, fields: dict[str, Any], *, user=None) -> set[str]:
    """Change a study's settings (web and API alike) and return the names
    that changed. A change the scores depend on queues a recompute once the
    change is committed, so ``final`` scores never keep the old primary judge."""
    return _update(study, fields, study, STUDY_SCORED_FIELDS, "study settings changed")


def do_update_problem(problem: Problem, fields: dict[str, Any], *, user=None) -> set[str]:
    """Change a problem's text, gold answer, domain or tags; a change the
    analytics read (the domain, the gold answer) queues a recompute of its study once committed.
    A new gold answer re-checks every trace's final answer against it."""
    with transaction.atomic():
        changed = _update(problem, fields, problem.study, PROBLEM_SCORED_FIELDS, "problem changed")
        if "gold_answer" in changed:
            _recheck_answers(problem)
    return changed


def _recheck_answers(problem: Problem) -> None:
    """The automatic answer check of the problem's traces against its (new) gold answer, as the import makes it:
    a verdict that came with the file or from a reviewer stands, the automatic one follows the new gold."""
    gold = problem.gold_answer.strip()
    checks: dict[str, bool | None] = {}
    changed = []
    for trace in problem.traces.only("pk", "answer", "answer_correct", "answer_origin", "auto_answer_correct"):
        answer = trace.answer.strip()
        if answer not in checks:
            checks[answer] = (check_answer(answer, gold, timeout=settings.ANSWER_CHECK_TIMEOUT)
                              if answer and gold else None)
        auto = checks[answer]
        trace.auto_answer_correct = auto
        if trace.answer_origin in (Trace.AnswerOrigin.AUTOMATIC, Trace.AnswerOrigin.NONE):
            trace.answer_correct = auto
            trace.answer_origin = Trace.AnswerOrigin.AUTOMATIC if auto is not None else Trace.AnswerOrigin.NONE
        changed.append(trace)
    Trace.objects.bulk_update(changed, ["auto_answer_correct", "answer_correct", "answer_origin"], batch_size=1000)


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


def import_status(report: ImportReport) -> str:
    """The job status of a finished import: failed when nothing was written,
    partial when --skip-invalid skipped rejected lines, else succeeded."""
    if not report.committed:
        return Job.Status.FAILED
    return Job.Status.PARTIAL if report.rejected else Job.Status.SUCCEEDED


# --------------------------------------------------------------------------
# API tokens: one per user (DRF's TokenAuthentication), made and revoked by the user on the profile page


@transaction.atomic
def do_create_api_token(user) -> str:
    """A new API token for ``user``, replacing the one they had (which stops working at once). The key is
    returned for the caller to show once; pages afterwards show only its first characters."""
    Token.objects.filter(user=user).delete()
    return Token.objects.create(user=user).key


@transaction.atomic
def do_revoke_api_token(user) -> bool:
    """Delete ``user``'s API token; False when they had none."""
    deleted, _ = Token.objects.filter(user=user).delete()
    return bool(deleted)


def api_token_of(user) -> Token | None:
    return Token.objects.filter(user=user).first()


def run_import_job(job_id: int, stream: IO[bytes] | None = None, *, progress=None) -> ImportReport | None:
    """The body of every import: CLI (in process) and upload (Celery) alike."""
    if not jobs.claim(job_id):
        return None
    job = Job.objects.select_related("study", "created_by").get(pk=job_id)

    def publish(done: int, total: int) -> None:
        jobs.report_progress(job_id, done, total)
        if progress:
            progress(done, total)

    params = job.params
    try:
        if stream is not None:
            report = import_stream(job.study, stream, params["format"], skip_invalid=params.get("skip_invalid", False),
                                   actor=job.created_by, progress=publish,
                                   thought_segmenter=params.get("thought_segmenter"))
        elif params.get("archive"):
            report = _import_folder_upload(job, publish)
        else:
            with job.input_file.open("rb") as fh:
                report = import_stream(job.study, fh, params["format"], skip_invalid=params.get("skip_invalid", False),
                                       actor=job.created_by, progress=publish,
                                       thought_segmenter=params.get("thought_segmenter"))
    except Exception as exc:
        jobs.finish(job_id, status=Job.Status.FAILED, error=f"{type(exc).__name__}: {exc}")
        _delete_upload(job)
        raise
    _delete_upload(job)
    # --skip-invalid with rejected lines commits the rest: that is "partial",
    # never a green "succeeded" (issue 23), on the job page, the study's job
    # list, the REST job and the CLI alike.
    status = import_status(report)
    if status == Job.Status.FAILED:
        error = f"{len(report.rejected)} line(s) rejected; nothing was imported"
    elif status == Job.Status.PARTIAL:
        error = f"{len(report.rejected)} line(s) rejected and skipped (--skip-invalid); the other lines were imported"
    else:
        error = ""
    jobs.finish(job_id, status=status, result=report.as_dict(), error=error, done=report.read, total=report.read)
    # A path format's importer announces its own change (abstraction.importing.import_outputs).
    if (report.committed and params["format"] not in PATH_FORMATS
            and (report.traces_created or report.labels_created or report.labels_updated)):
        _after_import(job.study)
    return report


def _import_folder_upload(job: Job, publish) -> ImportReport:
    """An upload that is a folder (docs/import-format.md, "Uploading folders"): the stored archive is unpacked
    into a temporary folder that is removed afterwards, then read as the CLI reads a path."""
    params = job.params
    with tempfile.TemporaryDirectory(prefix="reasonaudit-import-") as tmp:
        folder = Path(tmp)
        local = folder / Path(job.input_file.name).name
        with job.input_file.open("rb") as src, local.open("wb") as dst:
            shutil.copyfileobj(src, dst)
        fmt = params["format"]
        try:
            root = archives.extract(local, folder / "content", max_bytes=settings.IMPORT_MAX_BYTES,
                                    root_names=PATH_FORMAT_ROOTS.get(fmt, frozenset()))
        except archives.ArchiveError as exc:
            report = ImportReport()
            report.reject(0, str(exc))
            return report
        if fmt in PATH_FORMATS:
            return PATH_FORMATS[fmt](job.study, root, model=params.get("model") or None,
                                     skip_invalid=params.get("skip_invalid", False), actor=job.created_by,
                                     progress=publish, **params.get("options", {}))
        # lm-eval: the samples file is opened by its path, so the reader finds the results JSON beside it.
        with (root / params["member"]).open("rb") as fh:
            return import_stream(job.study, fh, fmt, skip_invalid=params.get("skip_invalid", False),
                                 actor=job.created_by, progress=publish, thought_segmenter=params.get("thought_segmenter"))


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
                         path: Path | None = None, results: File | None = None, model: str = "",
                         options: dict[str, Any] | None = None, thought_segmenter: str = "") -> Job:
    """The job row of one import, refused before anything is written when an upload is over the limit; the
    upload's size and sha256 stay in the job's params after the file is deleted. Uploads of formats read from
    a folder are stored as an archive: ``abstraction-outputs`` (a path format) is uploaded as one; an lm-eval
    samples file and its ``results`` JSON are zipped together here, under their own names, which the reader
    relies on. ``thought_segmenter`` (one of ``Study.Segmenter``; empty: the study's) cuts this import's
    thoughts."""
    params: dict[str, Any] = {"format": fmt, "skip_invalid": skip_invalid,
                              "filename": upload.name if upload else str(path)}
    if thought_segmenter:
        if thought_segmenter not in Study.Segmenter.values:
            raise ValueError(f"thought_segmenter: {thought_segmenter!r} is not one of {', '.join(Study.Segmenter.values)}")
        params["thought_segmenter"] = thought_segmenter
    for part in (upload, results):
        if part is not None:
            problem = upload_too_large(part.size)
            if problem is not None:
                raise ValueError(problem)
    if upload is not None:
        params.update(size=upload.size, sha256=_sha256(upload))
    job = Job(study=study, kind=Job.Kind.IMPORT, created_by=user, params=params)
    if upload is not None and fmt == "lm-eval":
        if results is None:
            raise ValueError("results: an lm-eval upload needs the results_<time>.json written with the samples")
        samples_name, results_name = Path(upload.name).name, Path(results.name).name
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as zf:
            zf.writestr(samples_name, upload.read())
            zf.writestr(results_name, results.read())
        params.update(archive=True, member=samples_name, results=results_name)
        job.input_file.save(f"{Path(samples_name).stem}.zip", ContentFile(buffer.getvalue()), save=False)
    elif upload is not None:
        if fmt in PATH_FORMATS:
            if not archives.is_archive(upload.name):
                raise ValueError(f"file: the {fmt} format is a folder; upload it as a .zip or .tar.gz archive")
            # options only a format takes (PATH_FORMAT_OPTIONS: gsm-symbolic's instances and seed)
            given = {k: v for k, v in (options or {}).items() if k in PATH_FORMAT_OPTIONS.get(fmt, ())}
            params.update(archive=True, model=model, options=given)
        job.input_file.save(Path(upload.name).name or "upload.jsonl", upload, save=False)
    job.save()
    return job


def _delete_upload(job: Job) -> None:
    """An upload is kept only until its import ends (its size and sha256 stay in the job's params)."""
    if job.input_file:
        job.input_file.delete(save=False)
        Job.objects.filter(pk=job.pk).update(input_file="")


def do_queue_import(study: Study, upload: File, *, fmt: str, skip_invalid: bool, user, results: File | None = None,
                    model: str = "", options: dict[str, Any] | None = None, thought_segmenter: str = "") -> Job:
    """Store the upload and import it in the background once the job row is committed."""
    with transaction.atomic():
        job = do_create_import_job(study, fmt=fmt, skip_invalid=skip_invalid, user=user, upload=upload,
                                   results=results, model=model, options=options, thought_segmenter=thought_segmenter)
        jobs.queue("annotation.tasks.import_job", job.pk)
    return job
