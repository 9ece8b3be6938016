"""Receivers: every study gets the built-in mechanistic judge; a deleted
judge's cached answers go with it."""

from __future__ import annotations

from django.db.models.signals import post_delete, post_save
from django.dispatch import receiver

from annotation.models import Study
from judges.models import JudgeConfig
from runs import cache


@receiver(post_save, sender=Study, dispatch_uid="judges-mechanistic-for-new-studies")
def _mechanistic_for_new_studies(sender, instance: Study, created: bool, raw: bool = False, **kwargs) -> None:
    if created and not raw:
        from judges.services import ensure_mechanistic

        ensure_mechanistic(instance)


@receiver(post_delete, sender=JudgeConfig, dispatch_uid="judges-drop-cached-answers")
def _drop_cached_answers(sender, instance: JudgeConfig, **kwargs) -> None:
    cache.drop(f"judge:{instance.pk}")
