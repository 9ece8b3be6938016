"""Named agreement operations shared by the pages, the API, the exports and
the command line: parse a selection (``select``), measure one candidate
against a reference (``agreement``; cached as ``agreement_report``), and the
inter-annotator view (``annotator_report``).

The arithmetic is ``agreement.core`` (plus the trace-bootstrap
intervals of ``agreement.core.intervals``); this module only reads the
data (``agreement.data``) and states where every number came from.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
from django.core.cache import cache

from agreement import data as ad
from agreement import stored
from agreement.core import intervals as agreement_intervals
from agreement.core.annotators import annotator_agreement, leave_one_out, overlap_sets
from agreement.core.metrics import agreement_metrics, first_error_pairs
from agreement.core.packed_rows import PackedRows
from agreement.core.pairs import paired_steps
from agreement.models import CalibrationStudy, StoredReport
from annotation import access
from annotation.models import Membership, Study
from reasonlib.ids import is_id
from reasonlib.refusals import FieldInvalid
from scoring import services
from scoring.core.labels import final_labels
from scoring.models import ScoringProfile

N_RESAMPLES = 1000
LEVEL = 0.95
DEFAULT_REFERENCE = ad.HUMAN
CACHE_SECONDS = 24 * 3600
#: Largest seed accepted from a request (numpy takes any non-negative int; a bound keeps keys short).
MAX_SEED = 2**32 - 1


class BadSelection(FieldInvalid):
    """A request parameter that names nothing in the study; str() starts with the field."""


# ---------------------------------------------------------------------------
# Who may see what
# ---------------------------------------------------------------------------
def can_view(membership: Membership) -> bool:
    """Agreement pages list other sources' verdicts step by step (the
    disagreements), so they follow blind mode: whoever sees every label of
    the study (owners, adjudicators, everyone in an open study)."""
    return access.sees_everything(membership)


def check_view(membership: Membership) -> None:
    access.check_sees_everything(membership, "agreement")


def can_export(membership: Membership | None) -> bool:
    """Label and agreement exports carry every source's verdicts on every
    trace: owners and adjudicators only, blind or not (docs/exports.md)."""
    return access.can_adjudicate(membership)


# ---------------------------------------------------------------------------
# The selection every page, endpoint and export works on
# ---------------------------------------------------------------------------
@dataclass
class Selection:
    study: Study
    reference: str
    candidate: str
    profile: ScoringProfile
    profiles: dict[str, ScoringProfile]
    menu: list[str]
    calibration: CalibrationStudy | None = None
    seed: int = 0
    extra: dict[str, str] = field(default_factory=dict)

    def params(self, **changes: Any) -> dict[str, str]:
        base = {"reference": self.reference, "candidate": self.candidate, "profile": self.profile.name}
        if self.calibration is not None:
            base["calibration"] = str(self.calibration.pk)
        if self.seed:
            base["seed"] = str(self.seed)
        base.update({k: str(v) for k, v in changes.items() if v is not None})
        return {k: v for k, v in base.items() if v}

    @property
    def scope(self) -> list[int] | None:
        return calibration_scope(self.calibration) if self.calibration is not None else None


def menu_sources(study: Study, judges: dict[str, int] | None = None,
                 annotators: dict[int, str] | None = None) -> list[str]:
    """Every source a comparison can name (judges and annotators of the study)."""
    judges = ad.judge_pks(study) if judges is None else judges
    annotators = ad.annotator_names(study) if annotators is None else annotators
    return ([ad.HUMAN, ad.FINAL, ad.ADJUDICATED] + [f"{ad.JUDGE_PREFIX}{n}" for n in sorted(judges)]
            + [f"{ad.ANNOTATOR_PREFIX}{n}" for n in sorted(annotators.values())])


def default_candidate(study: Study, judges: dict[str, int]) -> str | None:
    """The primary judge, else the first judge by name (every study has ``mechanistic``)."""
    if study.primary_judge_id is not None:
        for name, pk in judges.items():
            if pk == study.primary_judge_id:
                return f"{ad.JUDGE_PREFIX}{name}"
    return f"{ad.JUDGE_PREFIX}{sorted(judges)[0]}" if judges else None


def calibration_scope(calibration: CalibrationStudy) -> list[int]:
    return list(calibration.items.order_by("trace_id").values_list("trace_id", flat=True))


def parse_seed(value) -> int:
    if value in (None, ""):
        return 0
    try:
        seed = int(str(value).strip())
    except ValueError:
        raise BadSelection("seed", f"must be a whole number, got {value!r}") from None
    if not 0 <= seed <= MAX_SEED:
        raise BadSelection("seed", f"must be within 0..{MAX_SEED}")
    return seed


def select(study: Study, params, *, calibration: CalibrationStudy | None = None) -> Selection:
    """Parse reference, candidate, profile, calibration and seed from GET parameters."""
    judges = ad.judge_pks(study)
    annotators = ad.annotator_names(study)
    profiles = services.ensure_profiles(study)
    try:
        reference = ad.check_source(study, params.get("reference") or DEFAULT_REFERENCE, judges=judges,
                                    annotators=annotators)
    except ad.UnknownSource as exc:
        raise BadSelection("reference", exc.message) from None
    raw = params.get("candidate") or default_candidate(study, judges)
    try:
        candidate = ad.check_source(study, raw, judges=judges, annotators=annotators)
    except ad.UnknownSource as exc:
        raise BadSelection("candidate", exc.message) from None
    try:
        profile = services.resolve_profile(study, params.get("profile"), profiles)
    except services.UnknownProfile as exc:
        raise BadSelection("profile", exc.message) from None
    if calibration is None and params.get("calibration"):
        calibration = _calibration(study, params.get("calibration"))
    return Selection(study=study, reference=reference, candidate=candidate, profile=profile, profiles=profiles,
                     menu=menu_sources(study, judges, annotators), calibration=calibration,
                     seed=parse_seed(params.get("seed")))


def _calibration(study: Study, value) -> CalibrationStudy:
    value = str(value).strip()
    qs = CalibrationStudy.objects.filter(study=study)
    found = qs.filter(pk=int(value)).first() if is_id(value) else qs.filter(name=value).first()
    if found is None:
        raise BadSelection("calibration", f"no calibration study {value!r} in this study")
    return found


# ---------------------------------------------------------------------------
# One candidate against a reference
# ---------------------------------------------------------------------------
def _notes(study: Study, reference: str, candidate: str, judges: dict[str, int]) -> list[str]:
    notes = []
    if reference == candidate:
        notes.append("The candidate is the reference: every number compares a source with itself.")
    primary = None
    for name, pk in judges.items():
        if pk == study.primary_judge_id:
            primary = f"{ad.JUDGE_PREFIX}{name}"
    if primary and primary in (reference, candidate) and ad.FINAL in (reference, candidate) and reference != candidate:
        notes.append(f"final falls back to {primary} (the primary judge) on steps without a human or adjudicated "
                     "label, so those steps agree by construction; compare with adjudicated or human instead.")
    if candidate.startswith(ad.ANNOTATOR_PREFIX) and reference in (ad.HUMAN, ad.FINAL, ad.ADJUDICATED):
        notes.append("The human consensus includes this annotator's own labels, which flatters their agreement; "
                     "the Annotators page compares each annotator with the others instead.")
    return notes


def agreement(study: Study, reference: str, candidate: str, profile: ScoringProfile | None = None, *,
              data: ad.AgreementData | None = None, scope=None, seed: int = 0, n_resamples: int = N_RESAMPLES,
              level: float = LEVEL, calibration: CalibrationStudy | None = None,
              with_disagreements: bool = False) -> dict[str, Any]:
    """The metrics object of ``candidate`` against ``reference`` (sources as
    in agreement.data), with where every input came from.

    The keys of ``agreement.core.metrics.agreement_metrics`` (docs/agreement.md names
    them for ``studies/{id}/agreement/``), a ``<metric>_ci`` trace-bootstrap
    interval after every metric the core gives as a point value, and
    provenance first: reference, candidate, profile, profile_version, seed,
    traces_in_scope, calibration, scores (stored or computed, when), notes.
    With ``with_disagreements`` the result is ``(metrics, disagreements
    DataFrame)``.
    """
    profile = profile or services.default_profile(study)
    if data is None:
        if scope is None and calibration is not None:
            scope = calibration_scope(calibration)
        data = ad.AgreementData.read(study, scope)
    ref_steps = data.steps(reference)
    cand_steps = data.steps(candidate, confidence=True)
    ref_scores, ref_origin = data.scores(reference, profile)
    cand_scores, cand_origin = data.scores(candidate, profile)
    # Scores cover completely labelled traces only; first errors are read on
    # every trace in scope (a reference that stops at its earliest error counts).
    all_traces = data.traces()[["trace_id", "n_steps"]]
    metrics = agreement_metrics(
        ref_steps, cand_steps, ref_scores, cand_scores, ratings=data.scoped_ratings(),
        annotator_labels=data.annotator_labels(), traces=all_traces, splits=data.processbench_splits(),
        n_resamples=n_resamples, seed=seed, level=level,
    )
    pairs = paired_steps(ref_steps, cand_steps)
    metrics = agreement_intervals.add_intervals(metrics, pairs,
                                                first_error_pairs(ref_steps, cand_steps, all_traces, all_traces),
                                                n_resamples=n_resamples, seed=seed, level=level)
    out = with_provenance(metrics, study, reference, candidate, profile, seed=seed,
                          traces_in_scope=int(len(data.traces())), calibration=calibration,
                          origins=(ref_origin, cand_origin), judges=data.inputs.judges)
    if with_disagreements:
        diff = pairs.loc[pairs["reference_verdict"].to_numpy() != pairs["candidate_verdict"].to_numpy()]
        return out, diff.reset_index(drop=True)
    return out


def with_provenance(metrics: dict[str, Any], study: Study, reference: str, candidate: str, profile: ScoringProfile,
                    *, seed: int, traces_in_scope: int, calibration: CalibrationStudy | None,
                    origins: tuple[dict[str, Any], dict[str, Any]], judges: dict[str, int]) -> dict[str, Any]:
    """The metrics object of ``agreement`` after where its inputs came from (agreement.streamed too);
    ``judges``: the study's, name -> pk (the notes name the primary one)."""
    return {
        "reference": reference,
        "candidate": candidate,
        "profile": profile.name,
        "profile_version": profile.version,
        "seed": seed,
        "traces_in_scope": traces_in_scope,
        "calibration": {"id": calibration.pk, "name": calibration.name} if calibration is not None else None,
        "scores": {"reference": origins[0], "candidate": origins[1]},
        "notes": _notes(study, reference, candidate, judges),
        **metrics,
    }


def disagreement_rows(diff: pd.DataFrame) -> list[list]:
    """The disagreeing steps as the stored report holds them (``agreement.core.packed_rows.PackedRows``: trace pk, step, verdicts,
    confidence or None), for pair_report; agreement.streamed packs them chunk by chunk instead."""
    packed = PackedRows()
    packed.add(diff)
    return list(packed)


#: What the Annotators report measures each annotator against.
ANNOTATORS_REFERENCE = "adjudicated label, else the consensus of the other annotators"


def annotator_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each annotator's leave-one-out row under its source name (the Annotators report, whole or streamed)."""
    return [{"annotator": row["annotator"], "source": f"{ad.ANNOTATOR_PREFIX}{row['annotator']}", **row}
            for row in rows]


def _key(kind: str, study: Study, *parts: Any) -> str:
    scope = parts[0] if parts else ""
    version = ad.data_version(study, str(scope))
    digest = hashlib.sha1("\x1f".join([version, *map(repr, parts)]).encode()).hexdigest()
    return f"agreement:{kind}:{study.pk}:{digest}"


def stored_pair_key(sel: Selection) -> str:
    return stored.pair_key(sel.reference, sel.candidate, sel.profile.pk, sel.profile.version, sel.seed)


def pair_report(sel: Selection, data: ad.AgreementData | None = None) -> dict[str, Any]:
    """``agreement`` of a selection plus its disagreements (trace pk, step, verdicts, confidence)."""
    data = data or ad.AgreementData.read(sel.study, sel.scope)
    metrics, diff = agreement(sel.study, sel.reference, sel.candidate, sel.profile, data=data, seed=sel.seed,
                              calibration=sel.calibration, with_disagreements=True)
    return {"metrics": metrics, "disagreements": disagreement_rows(diff)}


def agreement_report_status(sel: Selection) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The report of a selection and, when it is the one the score job stored (agreement.stored), when it
    was computed and whether the data changed since; other selections are computed and cached per data
    version (docs/agreement.md)."""
    if sel.calibration is None:
        row = stored.read(sel.study, StoredReport.Kind.PAIR, stored_pair_key(sel))
        if row is not None:
            return {**row.data, "disagreements": stored.Rows(row)}, stored.status(row)
    cal = sel.calibration.pk if sel.calibration is not None else None
    key = _key("pair", sel.study, cal, sel.reference, sel.candidate, sel.profile.pk, sel.profile.version, sel.seed)
    value = cache.get(key)
    if value is None:
        value = pair_report(sel)
        cache.set(key, value, CACHE_SECONDS)
    return value, None


def agreement_report(sel: Selection) -> dict[str, Any]:
    return agreement_report_status(sel)[0]


# ---------------------------------------------------------------------------
# Among annotators
# ---------------------------------------------------------------------------
def undefined_subset(block: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in block.items() if k != "undefined"} | {"undefined": block.get("undefined", {})}


def annotator_report(study: Study, *, scope=None, data: ad.AgreementData | None = None,
                     n_resamples: int = N_RESAMPLES, seed: int = 0) -> dict[str, Any]:
    """Agreement among the annotators of a study (complete reviews):

    * ``overall`` and ``by_domain``: Krippendorff's alpha, Fleiss' kappa and
      pairwise Cohen's kappa (``agreement.core.annotators.annotator_agreement``);
    * ``overlap``: which annotators finished the same traces, as sets;
    * ``annotators``: each annotator against the **adjudicated label, else
      the consensus of the other annotators** (leave-one-out, so nobody
      agrees with themselves): step agreement with intervals, first-error
      agreement, and how often each side calls a step invalid; lowest kappa
      first -- who needs calibration.
    """
    data = data or ad.AgreementData.read(study, scope)
    labels = data.annotator_labels()
    traces = data.traces()
    out: dict[str, Any] = {"traces_in_scope": int(len(traces)), "seed": seed, "n_resamples": n_resamples}
    out["overall"] = undefined_subset(annotator_agreement(labels))
    domains = traces.set_index("trace_id")["domain"]
    by_domain = []
    lab_domain = labels["trace_id"].map(domains).fillna("").astype(str).to_numpy()
    for d in sorted(set(lab_domain.tolist())):
        block = annotator_agreement(labels.loc[lab_domain == d])
        by_domain.append({"domain": d, **undefined_subset(block)})
    out["by_domain"] = by_domain

    out["overlap"] = overlap_sets(labels, traces.set_index("trace_id")["n_steps"])

    raw = data.scoped(data.inputs.labels.loc[data.inputs.labels["src"].to_numpy() > 0,
                                              ["trace_id", "step", "src", "verdict", "skeleton_refs"]])
    adjudicated = data.scoped(final_labels(ad.sources.adjudicated_steps(data.inputs.labels), None, None)) \
        if (data.inputs.labels["src"].to_numpy() == 0).any() else None
    out["annotators"] = annotator_rows(leave_one_out(raw, adjudicated, traces, data.annotators,
                                                     n_resamples=n_resamples, seed=seed))
    out["reference"] = ANNOTATORS_REFERENCE
    return out


def annotator_report_status(study: Study, calibration: CalibrationStudy | None = None
                            ) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """annotator_report of the study (as the score job stored it, with its status) or of a calibration
    sample (cached per data version)."""
    if calibration is None:
        row = stored.read(study, StoredReport.Kind.ANNOTATORS, stored.ANNOTATORS_KEY)
        if row is not None:
            return row.data, stored.status(row)
    cal = calibration.pk if calibration is not None else None
    key = _key("annotators", study, cal)
    value = cache.get(key)
    if value is None:
        value = annotator_report(study, scope=calibration_scope(calibration) if calibration is not None else None)
        cache.set(key, value, CACHE_SECONDS)
    return value, None


def cached_annotator_report(study: Study, calibration: CalibrationStudy | None = None) -> dict[str, Any]:
    return annotator_report_status(study, calibration)[0]
