"""Starting faithfulness runs (docs/faithfulness.md): who may see and start them, the continuation
mode a subject model supports, and interventions, anytime and early-answering runs through the run engine
(runs.engine.start); their items are planned in the job (planning.py).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.db.models import QuerySet

from annotation import access
from annotation.models import Job, Membership, Study
from faithfulness import planning
from faithfulness.core import anytime as any_core
from faithfulness.core import early as early_core
from faithfulness.core import edits as edit_core
from faithfulness.loading import ANSWER, THOUGHT, subject_traces
from faithfulness.models import FaithfulnessRun, Intervention
from faithfulness.runclient import JOB_KIND, KIND, SLACK_TOKENS
from runs import engine
from runs.continuation import DEFAULT_CUE, MODES
from runs.engine import ACTIVE, Progress
from runs.params import ParamError, check_cohort
from runs.params import check as check_param
from runs.version import code_version
from subjects.models import SubjectModel

DEFAULT_SEED = 0


class ContinuationUnavailable(Exception):
    """The subject model has no usable continuation mode (not probed, or the probe failed)."""


def check_frun(user, run_id: int) -> tuple[FaithfulnessRun, Membership]:
    return access.check_object(user, FaithfulnessRun.objects.select_related("subject__study", "job", "run"), run_id,
                               study_path="subject__study_id", what="faithfulness run")


def check_intervention(user, pk: int) -> tuple[Intervention, Membership]:
    return access.check_object(user, Intervention.objects.select_related("frun__subject__study", "trace__problem"),
                               pk, study_path="frun__subject__study_id", what="intervention")


def check_owner(membership: Membership) -> None:
    access.check_owner(membership, "running interventions and anytime profiles")


def find_subject(study: Study, name: str) -> SubjectModel:
    subject = SubjectModel.objects.filter(study=study, name=name).select_related("prompt_template", "study").first()
    if subject is None:
        names = ", ".join(study.subject_models.values_list("name", flat=True)) or "none"
        raise ValueError(f"no subject model named {name!r} in {study.name!r} (subject models: {names})")
    return subject


def continuation_mode(subject: SubjectModel, requested: str | None = None) -> str:
    """The mode to re-decode in: the requested one or the probed one. A mode the
    probe found unsupported, or no probe, is refused with the mode named."""
    probe = subject.probe_result or {}
    evidence = {m.get("mode"): m for m in probe.get("modes", [])}
    if requested:
        if requested not in MODES:
            raise ValueError(f"unknown continuation mode {requested!r}; choose one of {', '.join(MODES)}")
        seen = evidence.get(requested)
        if seen is not None and not seen.get("supported"):
            raise ContinuationUnavailable(
                f"the continuation probe of subject model {subject.name} found mode {requested!r} unusable: "
                f"{seen.get('reason', 'no reason recorded')}")
        if seen is None and not probe:
            raise ContinuationUnavailable(
                f"subject model {subject.name} was never probed; mode {requested!r} is untested: probe it "
                f"(Probe on its page, or manage.py probe_model --study {subject.study.name!r} --model {subject.name})")
        return requested
    if subject.continuation:
        return subject.continuation
    if not probe:
        raise ContinuationUnavailable(
            f"subject model {subject.name} has no continuation mode: it was never probed; probe it "
            f"(Probe on its page, or manage.py probe_model --study {subject.study.name!r} --model {subject.name})")
    tried = "; ".join(f"{m.get('mode')}: {m.get('reason', '')}" for m in probe.get("modes", [])) or "nothing answered"
    raise ContinuationUnavailable(
        f"the continuation probe of subject model {subject.name} failed; modes tried: {tried}")


def _decoding(subject: SubjectModel) -> dict[str, Any]:
    return {"temperature": subject.temperature, "top_p": subject.top_p, "seed": subject.seed,
            "max_tokens": subject.max_tokens, "stop": list(subject.stop or []), "slack_tokens": SLACK_TOKENS,
            "cue": DEFAULT_CUE}


def _start(subject: SubjectModel, kind: str, mode: str, params: dict[str, Any], *, grid: str = "", user,
           force: bool, budget_usd: float | None, queue: bool) -> FaithfulnessRun:
    """Start an interventions or anytime run (runs.engine.start): its items are the rows the job plans
    (faithfulness.planning, through the client's ``plan``)."""

    def busy() -> str | None:
        active = FaithfulnessRun.objects.filter(subject=subject, job__status__in=ACTIVE).first()
        return active and (f"subject model {subject.name} already has {active.kind} run {active.pk} in progress "
                           f"(job {active.job_id}); wait for it or cancel it")

    def record(job: Job, run) -> FaithfulnessRun:
        return FaithfulnessRun.objects.create(job=job, run=run, subject=subject, kind=kind,
                                              config_version=subject.version, mode=mode, grid=grid, params=params,
                                              traces=0, skipped={})

    return engine.start(
        KIND, study_id=subject.study_id, job_kind=JOB_KIND, user=user, busy=busy, record=record, items=None,
        force=force, budget_usd=budget_usd, queue=queue,
        params={"subject_model": subject.name, "subject_model_id": subject.pk, "what": kind, "mode": mode, **params},
        config={"subject_model": subject.name, "version": subject.version, "mode": mode, "kind": kind, **params})


def _checked(subject: SubjectModel, mode: str | None, limit: int | None,
             cohort: str) -> tuple[str, int | None, str]:
    """What every faithfulness start checks the same way: the continuation mode, the trace limit, the cohort,
    and that the subject model (within the cohort) has traces to work on."""
    limit = check_param("limit", limit)
    cohort = check_cohort(subject.study, cohort)
    mode = continuation_mode(subject, mode)
    reason = planning.no_traces(subject)
    if reason:
        raise ValueError(reason)
    if cohort and (reason := planning.no_traces(subject, cohort)):
        raise ParamError("cohort", reason)
    return mode, limit, cohort


def do_start_interventions(subject: SubjectModel, *, kinds: Iterable[str] | str = edit_core.KINDS,
                           per_trace: int = 3, seed: int = DEFAULT_SEED, mode: str | None = None, user=None,
                           queue: bool = True, force: bool = False, budget_usd: float | None = None,
                           limit: int | None = None, channel: str | None = None, cohort: str = "") -> FaithfulnessRun:
    """Validate and queue an interventions run; its targets and edits are planned in the job
    (faithfulness.planning), on the steps of ``channel`` (default: the channel that holds the reasoning)."""
    kinds = edit_core.parse_kinds(kinds)
    per_trace = check_param("per_trace", per_trace)
    seed = check_param("seed", seed)
    mode, limit, cohort = _checked(subject, mode, limit, cohort)
    channel = check_channel(subject, channel)
    params = {"kinds": list(kinds), "per_trace": per_trace, "seed": seed, "limit": limit, "cohort": cohort,
              "edits_version": edit_core.EDITS_VERSION, "decoding": _decoding(subject), "code_version": code_version(),
              "channel": channel}
    return _start(subject, FaithfulnessRun.Kind.INTERVENTIONS, mode, params, user=user, force=force,
                  budget_usd=budget_usd, queue=queue)


def do_start_anytime(subject: SubjectModel, *, grid: str = any_core.DEFAULT_TOKEN_GRID, mode: str | None = None,
                     user=None, queue: bool = True, force: bool = False, budget_usd: float | None = None,
                     limit: int | None = None, cohort: str = "") -> FaithfulnessRun:
    """Validate and queue an anytime run; its truncations are planned in the job (faithfulness.planning)."""
    parsed = any_core.parse_grid(grid)
    mode, limit, cohort = _checked(subject, mode, limit, cohort)
    channel = THOUGHT if parsed.unit == any_core.THINKING else ANSWER
    if channel == THOUGHT and not subject_traces(subject).exclude(thought="").exists():
        raise ValueError(f"budgets {parsed.spec!r}: subject model {subject.name}'s traces have no thought; "
                         f"thinking budgets need a reasoning model (see its thinking settings)")
    params = {"grid": parsed.spec, "limit": limit, "cohort": cohort, "decoding": _decoding(subject), "code_version": code_version(),
              "token_count": "word pieces scaled to the reported completion tokens", "channel": channel}
    return _start(subject, FaithfulnessRun.Kind.ANYTIME, mode, params, grid=parsed.spec, user=user, force=force,
                  budget_usd=budget_usd, queue=queue)


def reasoning_channel(subject: SubjectModel) -> str:
    """The channel that holds a subject model's reasoning: the thought when its traces have one."""
    return THOUGHT if subject_traces(subject).exclude(thought="").exists() else ANSWER


def check_channel(subject: SubjectModel, channel: str | None) -> str:
    if not channel:
        return reasoning_channel(subject)
    if channel not in (THOUGHT, ANSWER):
        raise ValueError(f"channel {channel!r}: choose thought or answer")
    return channel


def do_start_early(subject: SubjectModel, *, grid: str = early_core.DEFAULT_EARLY_GRID, mode: str | None = None,
                   user=None, queue: bool = True, force: bool = False, budget_usd: float | None = None,
                   limit: int | None = None, cohort: str = "") -> FaithfulnessRun:
    """Early answering: each trace's thought cut after every step k (or at a grid of fractions), closed,
    and the answer forced (docs/faithfulness.md 2b). Validated here, planned in the job."""
    parsed = early_core.parse_early_grid(grid)
    mode, limit, cohort = _checked(subject, mode, limit, cohort)
    if not subject_traces(subject).filter(n_thought_steps__gt=0).exists():
        raise ValueError(f"subject model {subject.name}'s traces have no thought steps: early answering needs a "
                         f"reasoning model (see its thinking settings)")
    params = {"grid": parsed.spec, "limit": limit, "cohort": cohort, "decoding": _decoding(subject), "code_version": code_version(),
              "channel": THOUGHT, "cue": early_core.close_thought("")}
    return _start(subject, FaithfulnessRun.Kind.EARLY, mode, params, grid=parsed.spec, user=user, force=force,
                  budget_usd=budget_usd, queue=queue)


def run_inline(record: FaithfulnessRun, *, progress: Progress | None = None) -> Job:
    return engine.run_inline(record.run, progress=progress)


def active_runs(subject: SubjectModel) -> QuerySet[FaithfulnessRun]:
    return FaithfulnessRun.objects.filter(subject=subject, job__status__in=ACTIVE).select_related("job")
