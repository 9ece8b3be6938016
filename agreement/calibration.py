"""Judge calibration studies (docs/agreement.md, "Calibration studies").

A calibration study fixes what a researcher cites: a reference label source,
the candidates measured against it, a scoring profile and a seeded,
stratified sample of traces (by model and answer correctness). Owners create
it (``do_create_calibration``) and queue the sample for annotators
(``do_queue_calibration``, the queue of the review workflow); the report
(``calibration_report``) gives every agreement metric per candidate on the
sample, and ``tuning`` runs the paper's omega (and w) experiment.

Prompt versions as candidates: a judge has one label per step
(``StepLabel`` is unique per step and judge) and a re-run with another
prompt overwrites it, so the labels of two prompt versions never coexist and
cannot be compared on the same traces. Candidates are therefore judges; the
report shows which prompt version produced each judge's current labels on
the sample (``JudgeTraceResult.prompt_version``) and warns when they are
mixed. To compare prompt versions, give each its own judge configuration.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
from django.core.cache import cache
from django.db import IntegrityError, transaction
from django.db.models import Count

from agreement import data as ad
from agreement import services as svc
from agreement.core.correlation import mean_ratings
from agreement.core.sampling import CalibrationError, allocate, describe_allocation, stratified_sample, stratum_name
from agreement.core.tuning import tune_omega
from agreement.models import CalibrationStudy, CalibrationTrace
from annotation import scopes
from annotation.models import Study, Trace
from annotation.review.queues import AssignError, do_assign
from scoring import services
from scoring.core.labels import complete_traces
from scoring.core.scores import estimate_hazard
from scoring.models import ScoringProfile

MAX_SAMPLE = 100_000
MAX_CANDIDATES = 12


# ---------------------------------------------------------------------------
# Creating and queueing
# ---------------------------------------------------------------------------
def eligible_traces(study: Study, models: Sequence[str] = (), domain: str = "", cohort: str = "") -> pd.DataFrame:
    """trace_id (pk), stratum of the study's traces with steps (one query); ``cohort``: only a saved
    cohort's traces (annotation.scopes, offered by search)."""
    qs = Trace.objects.of_study(study).filter(n_steps__gte=1)
    if cohort:
        try:
            qs = qs.filter(pk__in=scopes.scope_trace_ids(study, "cohort", str(cohort)))
        except scopes.ScopeError as exc:
            raise CalibrationError("cohort", str(exc)) from None
    if models:
        qs = qs.filter(model__in=list(models))
    if domain:
        qs = qs.filter(problem__domain=domain)
    rows = list(qs.order_by("pk").values_list("pk", "model", "answer_correct"))
    return pd.DataFrame({"trace_id": [r[0] for r in rows],
                         "stratum": [stratum_name(r[1], r[2]) for r in rows]})


def labelled_completely(study: Study, source: str) -> set[int]:
    """The pks of the study's traces whose every step has a label from ``source`` (one read of the study)."""
    data = ad.AgreementData.read(study)
    traces = data.traces()[["trace_id", "n_steps"]]
    complete = complete_traces(traces, data.steps(source))
    return set(traces["trace_id"][complete.to_numpy()].tolist())


def check_sources(study: Study, reference: str, candidates: Sequence[str]) -> tuple[str, list[str]]:
    judges, annotators = ad.judge_pks(study), ad.annotator_names(study)
    try:
        reference = ad.check_source(study, reference, judges=judges, annotators=annotators)
    except ad.UnknownSource as exc:
        raise CalibrationError("reference", exc.message) from None
    out = []
    for c in candidates:
        try:
            c = ad.check_source(study, c, judges=judges, annotators=annotators)
        except ad.UnknownSource as exc:
            raise CalibrationError("candidates", exc.message) from None
        if c == reference:
            raise CalibrationError("candidates", f"{c} is the reference")
        if c not in out:
            out.append(c)
    if not out:
        raise CalibrationError("candidates", "choose at least one candidate")
    if len(out) > MAX_CANDIDATES:
        raise CalibrationError("candidates", f"at most {MAX_CANDIDATES} candidates")
    return reference, out


def do_create_calibration(study: Study, *, name: str, reference: str, candidates: Sequence[str], size: int,
                          seed: int = 0, allocation: str = "equal", models: Sequence[str] = (), domain: str = "",
                          profile_name: str = "", validation_fraction: float = 0.5, note: str = "",
                          cohort: str = "", reference_complete: bool = False, user=None) -> CalibrationStudy:
    """Validate, draw the sample and save the calibration study with its traces. ``reference_complete``: draw
    only traces the reference has labelled completely (every step), so each drawn trace can be compared at
    once (issue 31: 0 of 40 human-labelled traces drawn though 40 exist)."""
    name = (name or "").strip()
    if not name or len(name) > 200:
        raise CalibrationError("name", "give a name of 1 to 200 characters")
    reference, candidates = check_sources(study, reference, candidates)
    if not 1 <= int(size) <= MAX_SAMPLE:
        raise CalibrationError("size", f"must be within 1..{MAX_SAMPLE}")
    if not 0 <= int(seed) <= svc.MAX_SEED:
        raise CalibrationError("seed", f"must be within 0..{svc.MAX_SEED}")
    if allocation not in CalibrationStudy.Allocation.values:
        raise CalibrationError("allocation", "choose equal or proportional")
    if not 0.0 < float(validation_fraction) < 1.0:
        raise CalibrationError("validation_fraction", "must be between 0 and 1 (exclusive)")
    if profile_name:
        try:
            services.resolve_profile(study, profile_name)
        except services.UnknownProfile as exc:
            raise CalibrationError("profile", exc.message) from None
    models = [m for m in dict.fromkeys(models) if m]
    frame = eligible_traces(study, models, domain, cohort)
    if reference_complete and not frame.empty:
        frame = frame[frame["trace_id"].isin(labelled_completely(study, reference))]
        if frame.empty:
            raise CalibrationError("reference_complete", f"no trace that matches the filters has complete labels "
                                                         f"from {reference}; untick this or label some first")
    if frame.empty:
        raise CalibrationError("size", "no trace with steps matches the filters")
    sizes = {str(k): int(v) for k, v in frame.groupby("stratum", sort=True).size().items()}
    available = sum(sizes.values())
    if int(size) > available:
        # Refuse rather than silently draw everything (issue 23: 100,000
        # "equal per stratum" became all 5,276 with strata of 458 to 1,033).
        raise CalibrationError(
            "size", f"asked for {int(size):,} traces, but only {available:,} traces with steps match the filters "
                    f"({len(sizes)} strata of {min(sizes.values()):,} to {max(sizes.values()):,} traces); "
                    f"ask for at most {available:,}")
    sample = stratified_sample(frame, int(size), int(seed), allocation)
    drawn_note = describe_allocation(sizes, allocate(sizes, int(size), allocation), allocation)
    try:
        with transaction.atomic():
            cal = CalibrationStudy.objects.create(
                study=study, name=name, reference=reference, candidates=candidates, profile_name=profile_name,
                seed=int(seed), sample_size=int(size), allocation=allocation,
                filters={"models": models, "domain": domain, "drawn": drawn_note,
                         **({"reference_complete": True} if reference_complete else {}),
                         **({"cohort": str(cohort)} if cohort else {})},
                validation_fraction=float(validation_fraction),
                note=note, created_by=user,
            )
            CalibrationTrace.objects.bulk_create([
                CalibrationTrace(calibration=cal, trace_id=t, stratum=s, position=p)
                for t, s, p in zip(sample["trace_id"].tolist(), sample["stratum"].tolist(),
                                   sample["position"].tolist(), strict=True)
            ], batch_size=2000)
    except IntegrityError:
        raise CalibrationError("name", f"a calibration study named {name!r} exists") from None
    return cal


@transaction.atomic
def do_queue_calibration(calibration: CalibrationStudy, by, annotators: list, k: int = 1) -> int:
    """Put the sample's traces in annotators' queues, ``k`` annotators per
    trace, in sample order (strata interleaved), after everything already
    queued: ``annotation.review.queues.do_assign`` restricted to the sample.
    Returns the number of assignments made."""
    order = list(calibration.items.order_by("position").values_list("trace_id", flat=True))
    try:
        return do_assign(calibration.study, by, annotators, int(k), trace_ids=order)
    except AssignError as exc:
        raise CalibrationError(exc.field, exc.message) from None  # the field once, not in the message too


# ---------------------------------------------------------------------------
# Reading
# ---------------------------------------------------------------------------
def profile_of(calibration: CalibrationStudy, profiles: dict[str, ScoringProfile] | None = None) -> ScoringProfile:
    """The current version of the calibration's profile (the study's default
    when it names none or the profile is gone)."""
    study = calibration.study
    profiles = profiles if profiles is not None else services.ensure_profiles(study)
    if calibration.profile_name and calibration.profile_name in profiles:
        return profiles[calibration.profile_name]
    return services.default_profile(study, profiles)


def composition(calibration: CalibrationStudy) -> list[dict[str, Any]]:
    """Traces per stratum of the sample (one grouped query)."""
    return list(calibration.items.values("stratum").annotate(traces=Count("id")).order_by("stratum"))


def prompt_versions(calibration: CalibrationStudy) -> dict[str, list[dict[str, Any]]]:
    """Per judge candidate: which prompt version produced its current labels
    on the sample traces (one query)."""
    from judges.models import JudgeTraceResult

    names = [c[len(ad.JUDGE_PREFIX):] for c in calibration.candidates if c.startswith(ad.JUDGE_PREFIX)]
    if not names:
        return {}
    rows = (JudgeTraceResult.objects.filter(judge__study=calibration.study, judge__name__in=names,
                                            trace__in=calibration.items.values("trace"))
            .values_list("judge__name", "prompt_version").annotate(n=Count("id")).order_by("judge__name", "prompt_version"))
    out: dict[str, list[dict[str, Any]]] = {}
    for name, version, n in rows:
        out.setdefault(f"{ad.JUDGE_PREFIX}{name}", []).append({"prompt_version": version or "(none)", "traces": n})
    return out


def _coverage(data: ad.AgreementData, names: list[str]) -> dict[str, int]:
    """Per source: sample traces whose labels from it are complete."""
    traces = data.traces()
    return {n: int(complete_traces(traces[["trace_id", "n_steps"]], data.steps(n)).sum()) for n in names}


def calibration_report(calibration: CalibrationStudy) -> dict[str, Any]:
    """Every agreement metric of every candidate against the reference on the
    sample (``agreement.services.agreement``), with the disagreements and
    how many sample traces each source has labelled completely. Cached per
    data version."""
    study = calibration.study
    profile = profile_of(calibration)
    key = svc._key("calibration", study, calibration.pk, calibration.reference, tuple(calibration.candidates),
                   profile.pk, profile.version, calibration.seed)
    value = cache.get(key)
    if value is not None:
        return value
    data = ad.AgreementData.read(study, svc.calibration_scope(calibration))
    rows = []
    for candidate in calibration.candidates:
        try:
            data.check(candidate)
        except ad.UnknownSource as exc:  # a judge deleted since
            rows.append({"candidate": candidate, "metrics": None, "error": exc.message, "disagreements": []})
            continue
        metrics, diff = svc.agreement(study, calibration.reference, candidate, profile, data=data,
                                      seed=calibration.seed, calibration=calibration, with_disagreements=True)
        conf = diff["confidence"].to_numpy(dtype=float)
        rows.append({
            "candidate": candidate, "metrics": metrics, "error": None,
            "disagreements": [[int(t), int(s), r, c, None if np.isnan(x) else float(x)] for t, s, r, c, x in zip(
                diff["trace_id"].tolist(), diff["step"].tolist(), diff["reference_verdict"].tolist(),
                diff["candidate_verdict"].tolist(), conf.tolist(), strict=True)],
        })
    value = {
        "reference": calibration.reference, "profile": profile.name, "profile_version": profile.version,
        "seed": calibration.seed, "traces": int(len(data.traces())),
        "complete": _coverage(data, [calibration.reference] + [r["candidate"] for r in rows if r["error"] is None]),
        "candidates": rows,
    }
    cache.set(key, value, svc.CACHE_SECONDS)
    return value


# ---------------------------------------------------------------------------
# Tuning omega (and w) -- the paper's experiment
# ---------------------------------------------------------------------------
TARGETS = ("process", "rating")


def parse_grid(text: str | None, *, field: str, low: float, high: float) -> list[float] | None:
    """"0, 0.5, 1" or "0:10:0.5" (start:stop:step, stop included) -> list; empty -> None."""
    text = (text or "").strip()
    if not text:
        return None
    try:
        if ":" in text:
            start, stop, step = (float(x) for x in text.split(":"))
            if step <= 0 or stop < start:
                raise ValueError
            values = [round(start + i * step, 10) for i in range(int(np.floor((stop - start) / step + 1e-9)) + 1)]
        else:
            values = [float(x) for x in text.replace(";", ",").split(",") if x.strip()]
    except ValueError:
        raise CalibrationError(field, "give numbers separated by commas, or start:stop:step") from None
    if not values or len(values) > 201:
        raise CalibrationError(field, "give 1 to 201 values")
    if any(not (low <= v <= high) for v in values):
        raise CalibrationError(field, f"values must be within [{low:g}, {high:g}]")
    return values


def tuning(calibration: CalibrationStudy, candidate: str, *, target: str = "process",
           omegas: Sequence[float] | None = None, ws: Sequence[float] | None = None,
           data: ad.AgreementData | None = None) -> dict[str, Any]:
    """``agreement.core.tuning.tune_omega`` for one judge candidate on the sample.

    target ``process``: the reference source's process score P (with a w
    grid: its holistic score); ``rating``: the annotators' mean 0-10
    holistic rating. The judge's hazard is the study-wide one (as in its
    stored scores); the split uses the calibration's seed and validation
    fraction. Ids in the result are the traces' public ``trace_id``.
    """
    if not candidate.startswith(ad.JUDGE_PREFIX):
        raise CalibrationError("candidate", "tuning omega needs a judge candidate (judge:NAME)")
    if target not in TARGETS:
        raise CalibrationError("target", f"choose one of {', '.join(TARGETS)}")
    study = calibration.study
    profile = profile_of(calibration)
    data = data or ad.AgreementData.read(study, svc.calibration_scope(calibration))
    try:
        data.check(candidate)
    except ad.UnknownSource as exc:
        raise CalibrationError("candidate", exc.message) from None
    traces = data.traces()[["trace_id", "n_steps", "l_gold", "answer_correct"]]
    judge_steps = data.steps(candidate)
    core_profile = profile.as_profile()
    hazard = None if core_profile.pinned_hazard is not None else estimate_hazard(
        data.inputs.traces, data.full_steps(candidate))
    value_col = "process" if ws is None else "holistic"
    if target == "rating":
        reference: Any = mean_ratings(data.scoped_ratings())
    else:
        ref_scores, _ = data.scores(calibration.reference, profile)
        reference = ref_scores[["trace_id", "n_steps", "complete", value_col]]
    kwargs: dict[str, Any] = {} if omegas is None else {"omegas": list(omegas)}
    result = tune_omega(traces, judge_steps, reference, ws=None if ws is None else list(ws),
                             profile=core_profile, hazard=hazard, value_col=value_col,
                             validation_fraction=calibration.validation_fraction, seed=calibration.seed, **kwargs)
    public = dict(Trace.objects.filter(pk__in=calibration.items.values("trace")).values_list("pk", "trace_id"))
    result["validation_ids"] = [public.get(pk, pk) for pk in result["validation_ids"]]
    result["test_ids"] = [public.get(pk, pk) for pk in result["test_ids"]]
    result.update({"candidate": candidate, "reference": calibration.reference, "target": target,
                   "profile": profile.name, "profile_version": profile.version, "seed": calibration.seed,
                   "validation_fraction": calibration.validation_fraction})
    return result


def cached_tuning(calibration: CalibrationStudy, candidate: str, *, target: str = "process",
                  omegas: Sequence[float] | None = None, ws: Sequence[float] | None = None) -> dict[str, Any]:
    profile = profile_of(calibration)
    grid = hashlib.sha1(repr((omegas, ws)).encode()).hexdigest()[:12]
    key = svc._key("tuning", calibration.study, calibration.pk, candidate, target, grid, profile.pk, profile.version,
                   calibration.seed, calibration.validation_fraction, calibration.reference)
    value = cache.get(key)
    if value is None:
        value = tuning(calibration, candidate, target=target, omegas=omegas, ws=ws)
        cache.set(key, value, svc.CACHE_SECONDS)
    return value
