"""Stored per-model evidence (EvidenceSummary): the part of the evidence (faithfulness.evidence) read from every trace,
step and label of a study.

Reading it live costs seconds on a large study (every step's text for the halting rates,
every label for the validity rates), and both the Evidence page and the leaderboard's tier
cards need it on every request. The score job writes it after the scores
(``faithfulness.evidence.store_summaries``, hooked in by faithfulness.apps), from the same data in the same pass of the same job that every
change of the data queues (annotation.signals.data_changed); the same signal marks the
rows stale (``invalidate``). Between a change and the job's end a page shows the stored numbers and says
when they were computed (``status``), never as current; it computes them from the data only when none were
ever stored. Computing them on each request took three minutes a leaderboard at a million traces (issue 33).

What stays live in ``faithfulness.evidence.evidence``: the intervention and anytime runs, the generations'
token counts and the verifier's version, a few small queries.
"""

from __future__ import annotations

from typing import Any

from django.db.models import Count, Sum
from django.utils import timezone

from annotation.models import Study, Trace
from faithfulness.core import tiers as tier_core
from faithfulness.core import validity as val_core
from faithfulness.models import EvidenceSummary

#: The Evidence fields a summary holds (the rest of tier_core.Evidence is read live).
FIELDS = ("traces", "with_regime", "regime", "accuracy", "accuracy_n", "with_steps", "steps_mean",
          "steps_median", "steps_max", "verifiers", "halting")


def read(study: Study, model: str | None, policy: str) -> dict[str, dict[str, Any]] | None:
    """model -> FIELDS as the score job stored them (stale ones too: ``status``), or None when none are stored."""
    rows = EvidenceSummary.objects.filter(study=study, policy=policy)
    if model:
        rows = rows.filter(model=model)
    found = {name: data for name, data in rows.values_list("model", "data")}
    if not found and not EvidenceSummary.objects.filter(study=study).exists():
        return None  # none stored (never computed): the caller reads the data
    return found  # a summary of the whole study: a model without a row has no traces


def difficulty(study: Study, models: list[str]) -> dict[str, dict[int, tuple[int, int]]]:
    """model -> skeleton length (L_gold) -> (traces, steps in them), in the order of ``models``:
    stored by the score job, else (none stored) grouped from the traces."""
    found: dict[str, dict[int, tuple[int, int]]] = {}
    if EvidenceSummary.objects.filter(study=study).exists():
        rows = EvidenceSummary.objects.filter(study=study, policy=val_core.EXCLUDE, model__in=models)
        for name, by in rows.values_list("model", "data__difficulty"):
            found[name] = {int(d): (t, s) for d, (t, s) in (by or {}).items()}
    else:
        by_model: dict[str, dict[int, tuple[int, int]]] = {name: {} for name in models}
        for name, l_gold, n, steps in Trace.objects.filter(study=study, model__in=models).own() \
                .values_list("model", "problem__l_gold").annotate(n=Count("pk"), steps=Sum("n_steps")).order_by():
            by_model[name][l_gold] = (n, steps or 0)
        found = by_model
    return {name: found.get(name, {}) for name in models}


def verifiers(part: dict[str, Any]) -> list[tier_core.Verifier]:
    return [tier_core.Verifier(**v) for v in part["verifiers"]]


def status(study: Study) -> dict[str, Any] | None:
    """When the stored summaries were computed and the data last changed since, while they are stale; None
    when they are current or there are none (templates/annotation/_summary_status.html)."""
    return EvidenceSummary.objects.filter(study=study, stale=True).values("computed_at", "marked_at").first()


def invalidate(sender, study: Study, **kwargs) -> None:
    """Receiver of annotation.signals.data_changed: the stored summaries describe older data. They stay, marked,
    until the score job that the same change queued writes them anew."""
    EvidenceSummary.objects.filter(study=study).update(stale=True, marked_at=timezone.now())
