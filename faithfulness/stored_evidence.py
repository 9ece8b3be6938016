"""Stored per-model evidence (EvidenceSummary): the part of the evidence (faithfulness.evidence) read from every trace,
step and label of a study.

Reading it live costs seconds on a large study (every step's text for the halting rates,
every label for the validity rates), and both the Evidence page and the leaderboard's tier
cards need it on every request. The score job writes it after the scores (``store``, hooked
in by faithfulness.apps), from the same data in the same pass of the same job that every
change of the data queues (annotation.signals.data_changed); the same signal deletes the
rows (``invalidate``), so a page never reads numbers older than the data: between a change
and the job's end it computes them from the data, as it did before.

What stays live in ``faithfulness.evidence.evidence``: the intervention and anytime runs, the generations'
token counts and the verifier's version, a few small queries.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.db.models import Count, Sum

from annotation.models import Job, Study, Trace
from faithfulness.core import tiers as tier_core
from faithfulness.core import validity as val_core
from faithfulness.models import EvidenceSummary

#: The Evidence fields a summary holds (the rest of tier_core.Evidence is read live).
FIELDS = ("traces", "with_regime", "regime", "accuracy", "accuracy_n", "with_steps", "steps_mean",
          "steps_median", "steps_max", "verifiers", "halting")


def compute(study: Study, model: str | None = None,
            policies: tuple[str, ...] = val_core.POLICIES) -> dict[str, dict[str, dict[str, Any]]]:
    """policy -> model -> the FIELDS of its evidence, from the data (one read for every policy)."""
    import statistics
    from collections import defaultdict
    from dataclasses import asdict

    from faithfulness import evidence as live

    data = live._study_data(study, model)
    out: dict[str, dict[str, dict[str, Any]]] = {policy: {} for policy in policies}
    for name in sorted(data.traces):
        rows = data.traces[name]
        part: dict[str, Any] = {"traces": len(rows), "with_regime": 0, "steps_mean": None, "steps_median": None,
                                "steps_max": None}
        regime_vals: dict[str, list[Any]] = defaultdict(list)
        for regime, n in data.regimes.get(name, []):
            if any(v is not None for v in regime.values()):
                part["with_regime"] += n
                for key, v in regime.items():
                    if v is not None and v not in regime_vals[key] and len(regime_vals[key]) < 20:
                        regime_vals[key].append(v)
        part["regime"] = dict(regime_vals)
        checked = [c for _pk, _n, c, *_r in rows if c is not None]
        part["accuracy"] = sum(checked) / len(checked) if checked else None
        part["accuracy_n"] = len(checked)
        steps = [n for _pk, n, *_r in rows if n > 0]
        part["with_steps"] = len(steps)
        if steps:
            part["steps_mean"], part["steps_median"] = statistics.fmean(steps), statistics.median(steps)
            part["steps_max"] = max(steps)
        part["halting"] = live.halting_of(data, name)
        by: dict[int, list[int]] = {}
        for _pk, n, _c, l_gold, _gold in rows:
            cell = by.setdefault(l_gold, [0, 0])
            cell[0], cell[1] = cell[0] + 1, cell[1] + n
        part["difficulty"] = by  # skeleton length -> [traces, steps in them]: the Evidence page's chart
        for policy in policies:
            out[policy][name] = {**part, "verifiers": [asdict(v) for v in live.validity_of(data, name, policy)]}
    return out


def read(study: Study, model: str | None, policy: str) -> dict[str, dict[str, Any]] | None:
    """model -> FIELDS as the score job stored them, or None when no summary is current."""
    rows = EvidenceSummary.objects.filter(study=study, policy=policy)
    if model:
        rows = rows.filter(model=model)
    found = {name: data for name, data in rows.values_list("model", "data")}
    if not found and not EvidenceSummary.objects.filter(study=study).exists():
        return None  # none stored (never computed, or deleted by a change): the caller reads the data
    return found  # a summary of the whole study: a model without a row has no traces


def difficulty(study: Study, models: list[str]) -> dict[str, dict[int, tuple[int, int]]]:
    """model -> skeleton length (L_gold) -> (traces, steps in them), in the order of ``models``:
    stored by the score job when current, else grouped from the traces."""
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


def store(study: Study, job: Job | None = None) -> int:
    """Recompute and replace the study's summaries (every model, every policy); the number of rows."""
    computed = compute(study)
    rows = [EvidenceSummary(study=study, model=name, policy=policy, data=part, job=job)
            for policy, per_model in computed.items() for name, part in per_model.items()]
    with transaction.atomic():
        EvidenceSummary.objects.filter(study=study).delete()
        if rows:
            EvidenceSummary.objects.bulk_create(rows)
        else:
            # A study without traces: one marker row says "computed: no models", so the pages need not read.
            EvidenceSummary.objects.create(study=study, model="", policy="", data={}, job=job)
    return len(rows)


def refresh(study: Study, job: Job | None, whole: bool) -> None:
    """The score job's hook (scoring.score_jobs.register_summary): every job that recomputes all
    profiles (each change of the data queues one) stores anew; a job for some profiles only
    (the data unchanged) stores when there is nothing stored."""
    if whole or not EvidenceSummary.objects.filter(study=study).exists():
        store(study, job)


def invalidate(sender, study: Study, **kwargs) -> None:
    """Receiver of annotation.signals.data_changed: the stored summaries describe older data."""
    EvidenceSummary.objects.filter(study=study).delete()
