"""Receivers: every study gets the built-in mechanistic judge, and the demo
is judged by it."""

from __future__ import annotations

from django.db.models.signals import post_save
from django.dispatch import receiver

from annotation.models import Study
from annotation.signals import data_changed


@receiver(post_save, sender=Study, dispatch_uid="judges-mechanistic-for-new-studies")
def _mechanistic_for_new_studies(sender, instance: Study, created: bool, raw: bool = False, **kwargs) -> None:
    if created and not raw:
        from judges.services import ensure_mechanistic

        ensure_mechanistic(instance)


@receiver(data_changed, dispatch_uid="judges-demo")
def _judge_the_demo(sender, study: Study, reason: str, **kwargs) -> None:
    # `manage.py demo` promises mechanistic labels: judge in this process, no worker needed.
    if reason != "demo":
        return
    from judges import services
    from judges.models import JudgeRun

    judge = services.ensure_mechanistic(study)
    if services.traces_in_scope(judge, JudgeRun.Scope.UNLABELLED).exists():
        try:
            run = services.do_start_run(judge, scope=JudgeRun.Scope.UNLABELLED, queue=False)
        except services.RunConflict:
            return  # a run is on it already
        services.run_inline(run)
