import sys
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import CommandError

from annotation import services
from annotation.commands import RefusingCommand
from annotation.management.commands._progress import Bar
from annotation.models import Membership, Study
from demo import research

DEMO_STUDY = "GSM8K demo"
DEMO_FILE = Path(settings.BASE_DIR) / "annotation" / "demo_data" / "gsm8k" / "example_model_solutions.jsonl"
# Two independent step-label passes over a 40-trace sample (see the README there).
DEMO_LABELS = sorted((Path(settings.BASE_DIR) / "annotation" / "demo_data" / "gsm8k_labels").glob("labels_*.jsonl"))


class Command(RefusingCommand):
    help = "Create (idempotently) the GSM8K demo study and the user 'demo'."

    def add_arguments(self, parser):
        parser.add_argument("--password", help="password for the user 'demo' (default: random, printed once)")
        parser.add_argument("--stand-in-url", metavar="URL",
                            help="base URL of the stand-in reasoning model that stays running (./run serves it: "
                                 "python -m demo.standin.serve PORT); the demo's stand-in subject model points at "
                                 "it. Default: one started for the demo's runs and stopped after them")

    def handle(self, *args, **opts):
        User = get_user_model()
        password = opts["password"]
        user = User.objects.filter(username="demo").first()
        if user is None or password:
            password = password or services.generate_password()
            if user is None:
                user = User(username="demo")
            user.set_password(password)
            user.is_active = True
            user.save()
            self.stdout.write(self.style.SUCCESS(f"user demo, password: {password}"))
        else:
            self.stdout.write("user demo exists (its password was printed when it was made; "
                              "set a new one with: python manage.py demo --password NEW)")

        study, _ = services.do_get_or_create_study(DEMO_STUDY, owner=user)
        Membership.objects.filter(study=study, user=user).update(role=Membership.Role.OWNER)
        if not study.traces.exists():
            if not DEMO_FILE.is_file():
                raise CommandError(f"demo data missing: {DEMO_FILE}")
            job = services.do_create_import_job(study, fmt="gsm8k-solutions", skip_invalid=False, user=user,
                                                path=DEMO_FILE)
            with DEMO_FILE.open("rb") as fh:
                report = services.run_import_job(job.pk, fh)
            if report is None or not report.committed:
                raise CommandError(f"demo import failed: {report.rejected if report else 'job not claimed'}")
            self.stdout.write(f"imported {report.traces_created} traces of {report.problems_created} problems")
        else:
            self.stdout.write(f"study {DEMO_STUDY!r} already has {study.traces.count()} traces")
        for path in DEMO_LABELS:
            # Idempotent: a second run finds every label unchanged.
            job = services.do_create_import_job(study, fmt="reasonaudit", skip_invalid=False, user=user, path=path)
            with path.open("rb") as fh:
                report = services.run_import_job(job.pk, fh)
            if report is None or not report.committed:
                raise CommandError(f"demo labels {path.name} failed: {report.rejected if report else 'not claimed'}")
            if report.labels_created or report.labels_updated:
                self.stdout.write(f"{path.name}: {report.labels_created} step labels imported")
        # The research pages (Abstraction, Fidelity, Evidence) filled too: published outputs and a stand-in
        # model's runs, before the judge and the scores so that those cover the stand-in's traces as well.
        research.import_abstraction(study, self.stdout.write)
        research.run_stand_in(study, self.stdout.write, url=opts["stand_in_url"])
        self._post_import(study)
        self.stdout.write(self.style.SUCCESS(f"demo study ready: {study.name} (id {study.pk})"))

    def _post_import(self, study: Study) -> None:
        """Judge with the built-in mechanistic verifier and score, in this
        process: the demo must be complete before any worker is running."""
        from judges import services as judge_services
        from judges.models import JudgeRun
        from scoring import score_jobs

        judge = judge_services.ensure_mechanistic(study)
        if judge_services.traces_in_scope(judge, JudgeRun.Scope.UNLABELLED).exists():
            run = judge_services.do_start_run(judge, scope=JudgeRun.Scope.UNLABELLED, queue=False)
            bar = Bar("mechanistic judge", unit="trace", unit_scale=False, enabled=sys.stderr.isatty())
            job = judge_services.run_inline(run, progress=bar)
            bar.close()
            self.stdout.write(f"mechanistic judge: {job.done} traces labelled ({job.status})")
        bar = Bar("scoring", unit="step", unit_scale=False, enabled=sys.stderr.isatty())
        result = score_jobs.recompute(study, progress=bar)
        bar.close()
        self.stdout.write(f"scores: {result['rows']} rows for sources {', '.join(result['sources']) or 'none'} "
                          f"under profiles {', '.join(result['profiles'])} in {sum(result['seconds'].values()):.1f} s")
