"""Receivers: every study gets the built-in mechanistic judge."""

from __future__ import annotations

from django.db.models.signals import post_save
from django.dispatch import receiver

from annotation.models import Study


@receiver(post_save, sender=Study, dispatch_uid="judges-mechanistic-for-new-studies")
def _mechanistic_for_new_studies(sender, instance: Study, created: bool, raw: bool = False, **kwargs) -> None:
    if created and not raw:
        from judges.services import ensure_mechanistic

        ensure_mechanistic(instance)
