import sys
import time

from django.conf import settings
from django.core.management.base import CommandError

from annotation import jobs
from annotation.commands import RefusingCommand
from annotation.management.commands._progress import Bar
from annotation.models import Job, Study
from scoring import services


class Command(RefusingCommand):
    requires_system_checks: list[str] = []
    help = "Recompute all scores of a study (every label source) and wait; Celery unless eager."

    def add_arguments(self, parser):
        parser.add_argument("--study", required=True)
        parser.add_argument("--profile", help="only this profile (default: every current profile of the study)")
        parser.add_argument("--inline", action="store_true", help="compute in this process instead of a Celery worker")
        parser.add_argument("--timeout", type=float, default=None, help="give up waiting after this many seconds")

    def handle(self, *args, **opts):
        study = Study.objects.filter(name=opts["study"]).first()
        if study is None:
            raise CommandError(f"no study named {opts['study']!r}")
        current = services.ensure_profiles(study)
        if opts["profile"] and opts["profile"] not in current:
            raise CommandError(f"no profile named {opts['profile']!r}; choose one of {', '.join(current)}")
        profiles = [opts["profile"]] if opts["profile"] else None
        inline = opts["inline"] or settings.CELERY_TASK_ALWAYS_EAGER
        bar = Bar(f"score {study.name}", unit="set", unit_scale=False, enabled=sys.stderr.isatty())
        try:
            if inline:
                job = Job.objects.create(study=study, kind=Job.Kind.SCORE,
                                         params={"profiles": profiles, "reason": "score command"})
                from scoring import score_jobs  # pandas loads only when scoring here, not for --help

                score_jobs.run_score_job(job.pk, progress=bar, inline=True)
            else:
                job = self._queue(study, profiles)
                self._wait(job, bar, opts["timeout"])
        finally:
            bar.close()
        job.refresh_from_db()
        if job.status != Job.Status.SUCCEEDED:
            raise CommandError(f"score job {job.pk} {job.status}: {job.error or 'no error recorded'}")
        result = job.result
        self.stdout.write(
            f"scored {result['traces']} traces of {study.name!r}: {result['rows']} scores for "
            f"{len(result['sources'])} source(s) x {len(result['profiles'])} profile(s) "
            f"({', '.join(result['profiles'])}) in {result['seconds']['total']:.2f} s"
        )

    def _queue(self, study, profiles):
        from kombu.exceptions import OperationalError as BrokerError

        try:
            return services.do_queue_score_job(study, profiles=profiles, reason="score command")
        except BrokerError as exc:  # the base's words, and how to do without the queue
            raise CommandError(f"the task queue is not reachable ({exc}); use --inline") from None

    def _wait(self, job, bar, timeout):
        started = time.monotonic()
        while True:
            job.refresh_from_db()
            progress = jobs.live_progress(job)
            bar(progress["done"], progress["total"])
            if job.finished:
                return
            if timeout is not None and time.monotonic() - started > timeout:
                raise CommandError(f"score job {job.pk} still {job.status} after {timeout:g} s "
                                   "(is a Celery worker running?)")
            time.sleep(0.5)
