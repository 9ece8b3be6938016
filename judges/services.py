"""Named judge operations shared by the web views, the API and the CLI
(docs/judges.md).

``check_*`` authorise and return objects or raise; ``do_*`` change data in a
transaction and queue work only after commit.

A judge run is a Job of kind "judge" with a JudgeRun (the judge, the traces,
the label counts) and a runs.Run of kind "judge" (chunks, leases, calls,
cost): the run engine (runs.engine, docs/runs.md) does the work and calls
judges.runclient for what is particular to judges.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterable
from typing import Any

from django.db import transaction
from django.db.models import Count, Exists, Max, Min, OuterRef, QuerySet, Subquery

from annotation import access, gate, study_summary
from annotation.gate import Source
from annotation.models import Job, Membership, Step, StepLabel, Study, Trace
from judges import protocol
from judges.models import MECHANISTIC, JudgeConfig, JudgeRun, JudgeTraceResult, PromptVersion
from judges.providers.openai_compat import plan_trace_windows
from judges.runclient import KIND, load_inputs
from reasonlib.refusals import Invalid
from runs import engine
from runs.engine import ACTIVE, Progress
from runs.models import ModelCall

log = logging.getLogger(__name__)

# Changing one of these can change a judge's answers: a new version, and a cold cache.
VERSIONED_FIELDS = ("provider", "model", "base_url", "temperature", "max_tokens", "context_tokens", "mode",
                    "output_mode")
FILTER_KEYS = ("model", "domain", "answer_correct", "trace_ids")


# --------------------------------------------------------------------------
# Judges


def ensure_mechanistic(study: Study) -> JudgeConfig:
    """The built-in judge of a study; it becomes the primary judge when the study has none."""
    judge, _ = JudgeConfig.objects.get_or_create(
        study=study, name=MECHANISTIC,
        defaults={"provider": JudgeConfig.Provider.MECHANISTIC, "mode": JudgeConfig.Mode.SKELETON,
                  "prompt_version": "", "concurrency": 1},
    )
    if study.primary_judge_id is None:
        Study.objects.filter(pk=study.pk, primary_judge__isnull=True).update(primary_judge=judge)
        study.primary_judge = judge
    return judge


def check_judge(user, judge_id: int) -> tuple[JudgeConfig, Membership]:
    """The judge and the user's membership in its study (annotation.access decides)."""
    return access.check_object(user, JudgeConfig.objects.select_related("study"), judge_id, study_path="study_id",
                               what="judge")


def check_owner(membership: Membership) -> None:
    access.check_owner(membership, "managing the study's judges")


def next_prompt_label(judge: JudgeConfig) -> str:
    numbers = [int(v) for v in judge.prompts.values_list("version", flat=True) if v.isdigit()]
    return str(max(numbers, default=0) + 1)


@transaction.atomic
def do_save_judge(study: Study, fields: dict[str, Any], *, judge: JudgeConfig | None = None, user=None,
                  prompt_version: str | None = None) -> tuple[JudgeConfig, bool]:
    """Create or update an LLM judge. ``prompt_template`` in ``fields`` makes a
    new prompt version when it differs; ``prompt_version`` names it (or picks an
    existing version when no template is given)."""
    fields = dict(fields)
    template = fields.pop("prompt_template", None)
    created = judge is None
    if judge is None:
        judge = JudgeConfig(study=study, provider=JudgeConfig.Provider.LLM, prompt_version="")
    elif judge.builtin:
        raise Invalid("the built-in mechanistic judge has no settings to change")
    # Compare with the stored row: a ModelForm has already copied its values onto the instance.
    stored = JudgeConfig.objects.get(pk=judge.pk) if not created else judge
    changed = {key for key in VERSIONED_FIELDS if key in fields and getattr(stored, key) != fields[key]}
    if not created and changed:
        judge.version = stored.version + 1
        if changed & {"base_url", "output_mode", "model"}:
            judge.output_mode_resolved = ""  # another server or model may accept other formats
    for key, value in fields.items():
        setattr(judge, key, value)
    judge.clean()  # the operator's key and address policy (ValidationError naming the field)
    judge.save()
    if created:
        first = template if template is not None else protocol.DEFAULT_TEMPLATE
        _new_prompt(judge, first, prompt_version or "1", user=user, note="initial")
    elif template is not None or prompt_version:
        do_save_prompt(judge, template, user=user, version=prompt_version)
    return judge, created


def _new_prompt(judge: JudgeConfig, template: str, label: str, *, user=None, note: str = "") -> PromptVersion:
    prompt = PromptVersion.objects.create(judge=judge, version=label, template=template, note=note, created_by=user)
    judge.prompt_template, judge.prompt_version = template, label
    judge.save(update_fields=["prompt_template", "prompt_version", "updated_at"])
    return prompt


@transaction.atomic
def do_save_prompt(judge: JudgeConfig, template: str | None, *, user=None, note: str = "",
                   version: str | None = None) -> PromptVersion | None:
    """Make ``template`` the judge's prompt as a new version (or switch to the
    existing ``version`` when no template is given). None when nothing changed."""
    if not judge.uses_prompt:
        raise Invalid("the mechanistic judge has no prompt", field="prompt_template")
    if template is not None:
        error = protocol.template_error(template)
        if error:
            raise Invalid(f"the prompt template does not compile: {error}", field="prompt_template")
    existing = judge.prompts.filter(version=version).first() if version else None
    if existing is not None:
        if template is not None and template != existing.template:
            raise Invalid(f"prompt version {version} exists with another template; choose a new version name",
                          field="prompt_version")
        if judge.prompt_version == existing.version:
            return None
        judge.prompt_template, judge.prompt_version = existing.template, existing.version
        judge.save(update_fields=["prompt_template", "prompt_version", "updated_at"])
        return existing
    if template is None:
        raise Invalid(f"judge {judge.name} has no prompt version {version!r}; give a template to create it",
                      field="prompt_version")
    if template == judge.prompt_template and not version:
        return None
    return _new_prompt(judge, template, version or next_prompt_label(judge), user=user, note=note)


def preview_prompt(judge: JudgeConfig, template: str, trace: Trace) -> list[dict[str, str]]:
    """The messages the judge would send for ``trace`` with ``template``."""
    output_mode = judge.output_mode
    if output_mode == JudgeConfig.OutputMode.AUTO:
        output_mode = judge.output_mode_resolved or JudgeConfig.OutputMode.JSON_SCHEMA
    inputs, _ = load_inputs([trace.pk])
    return protocol.messages(template, inputs[0], judge.mode, output_mode)


#: Traces whose prompts the cost estimate renders; the rest are scaled from them.
ESTIMATE_SAMPLE = 200


def estimate_run(judge: JudgeConfig, traces: QuerySet[Trace]) -> dict[str, Any] | None:
    """What a run of an LLM judge over ``traces`` will ask for, before it
    starts: requests (a long trace judged in windows costs one per window),
    prompt tokens (characters / 4 of the rendered messages), completion tokens
    at most (the requests' max_tokens) and the cost at the judge's prices.
    Renders the prompts of up to ESTIMATE_SAMPLE traces spread over the
    selection and scales to all of them (``exact`` says whether it had to)."""
    if not judge.uses_prompt:
        return None
    pks = list(traces.order_by("pk").values_list("pk", flat=True))
    if not pks:
        return {"traces": 0, "requests": 0, "windowed_traces": 0, "prompt_tokens": 0, "completion_tokens_max": 0,
                "cost_usd_max": 0.0, "exact": True}
    step = max(1, len(pks) // ESTIMATE_SAMPLE)
    sample = pks[::step][:ESTIMATE_SAMPLE]
    inputs, _ = load_inputs(sample)
    output_mode = judge.output_mode_resolved or judge.output_mode
    if output_mode == JudgeConfig.OutputMode.AUTO:
        output_mode = JudgeConfig.OutputMode.JSON_SCHEMA
    requests = prompt = completion = windowed = 0
    for trace in inputs:
        if not trace.steps:
            continue
        wins = plan_trace_windows(judge, trace)
        windowed += len(wins) > 1
        for w in wins:
            part = dataclasses.replace(trace, steps=trace.steps[w.start - 1:w.end])
            chars = sum(len(m["content"]) for m in protocol.messages(judge.prompt_template, part, judge.mode,
                                                                     output_mode))
            requests += 1
            prompt += -(-chars // 4)
            completion += protocol.effective_max_tokens(judge.max_tokens, w.n_steps)
    scale = len(pks) / max(1, len(inputs))
    out = {"traces": len(pks), "requests": round(requests * scale), "windowed_traces": round(windowed * scale),
           "prompt_tokens": round(prompt * scale), "completion_tokens_max": round(completion * scale),
           "exact": len(inputs) == len(pks)}
    out["cost_usd_max"] = judge.price(out["prompt_tokens"], out["completion_tokens_max"])
    return out


# --------------------------------------------------------------------------
# Starting runs


def traces_in_scope(judge: JudgeConfig, scope: str = "all", filters: dict | None = None) -> QuerySet[Trace]:
    qs = Trace.objects.of_study(judge.study_id)  # "all traces": the study's own, not benchmark items
    results = JudgeTraceResult.objects.filter(judge=judge, trace=OuterRef("pk"))
    if scope == JudgeRun.Scope.UNLABELLED:
        qs = qs.filter(~Exists(results.filter(status=JudgeTraceResult.Status.OK)))
    elif scope == JudgeRun.Scope.FAILED:
        qs = qs.filter(Exists(results.filter(status=JudgeTraceResult.Status.FAILED)))
    elif scope != JudgeRun.Scope.ALL:
        raise ValueError(f"unknown trace selection {scope!r}; choose one of {', '.join(JudgeRun.Scope.values)}")
    filters = filters or {}
    unknown = set(filters) - set(FILTER_KEYS)
    if unknown:
        raise ValueError(f"unknown filter {sorted(unknown)[0]!r}; choose from {', '.join(FILTER_KEYS)}")
    if filters.get("model"):
        qs = qs.filter(model=filters["model"])
    if filters.get("domain"):
        qs = qs.filter(problem__domain=filters["domain"])
    if filters.get("answer_correct") is not None:
        qs = qs.filter(answer_correct=filters["answer_correct"])
    if filters.get("trace_ids"):
        qs = qs.filter(trace_id__in=list(filters["trace_ids"]))
    return qs.order_by("pk")


def _config_snapshot(judge: JudgeConfig, traces: QuerySet[Trace]) -> dict[str, Any]:
    keys = ("name", "provider", "model", "base_url", "api_key_env", "temperature", "max_tokens", "context_tokens", "mode",
            "output_mode", "output_mode_resolved", "prompt_version", "concurrency", "rate_limit_per_minute", "max_retries",
            "timeout_seconds", "price_input_per_mtok", "price_output_per_mtok", "version")
    snapshot = {key: getattr(judge, key) for key in keys}
    if judge.uses_prompt:
        snapshot["max_tokens_effective"] = effective_max_tokens_range(judge, traces)
    return snapshot


def effective_max_tokens_range(judge: JudgeConfig, traces: QuerySet[Trace]) -> list[int] | None:
    """[lowest, highest] max_tokens the run's requests ask for: the judge's own
    value, or derived from the fewest and most steps among ``traces`` (one query)."""
    if judge.max_tokens:
        return [judge.max_tokens, judge.max_tokens]
    span = traces.order_by().annotate(n=Count("steps")).aggregate(lo=Min("n"), hi=Max("n"))
    if span["lo"] is None:
        return None
    return [protocol.derived_max_tokens(span["lo"]), protocol.derived_max_tokens(span["hi"])]


def do_start_run(judge: JudgeConfig, *, scope: str = "all", filters: dict | None = None, force: bool = False,
                 budget_usd: float | None = None, user=None, queue: bool = True) -> JudgeRun:
    """Start a judge run over the traces in ``scope`` (runs.engine.start)."""
    filters = {k: v for k, v in (filters or {}).items() if v not in (None, "", [])}
    selected = traces_in_scope(judge, scope, filters)

    def busy() -> str | None:
        active = JudgeRun.objects.filter(judge=judge, job__status__in=ACTIVE).first()
        return active and (f"judge {judge.name} already has run {active.pk} in progress (job {active.job_id}); "
                           "wait for it or cancel it")

    def record(job: Job, run) -> JudgeRun:
        return JudgeRun.objects.create(job=job, run=run, judge=judge, scope=scope, filters=filters,
                                       judge_version=judge.version,
                                       prompt_version=judge.prompt_version if judge.uses_prompt else "")

    return engine.start(
        KIND, study_id=judge.study_id, job_kind=Job.Kind.JUDGE, user=user, busy=busy, record=record,
        items=lambda _row: list(selected.values_list("pk", flat=True)), force=force, budget_usd=budget_usd,
        config=_config_snapshot(judge, selected), queue=queue,
        params={"judge": judge.name, "judge_id": judge.pk, "traces": scope, "filters": filters, "force": force,
                "budget_usd": budget_usd})


def run_inline(record: JudgeRun, *, progress: Progress | None = None) -> Job:
    """Process every chunk of the run in this process (CLI, demo, eager mode)."""
    return engine.run_inline(record.run, progress=progress)


# --------------------------------------------------------------------------
# Reading


def failed_calls(record: JudgeRun) -> QuerySet[ModelCall]:
    """The run's calls that earned no valid answer -- HTTP errors, timeouts,
    malformed answers, refused response formats -- oldest first."""
    return ModelCall.objects.filter(run_id=record.run_id).exclude(outcome=ModelCall.Outcome.OK).order_by("at", "pk")


def with_trace_ids(calls: Iterable[ModelCall]) -> list[ModelCall]:
    """The calls with ``trace_ref`` set to their trace's id (None once the trace
    is deleted); one query for the lot (a call's item is a trace pk)."""
    calls = list(calls)
    ids = dict(Trace.objects.filter(pk__in={c.item for c in calls}).values_list("pk", "trace_id"))
    for call in calls:
        call.trace_ref = ids.get(call.item)
    return calls


def disagreements(study: Study, judge: JudgeConfig) -> QuerySet[Step]:
    """Steps of ``study`` where ``judge`` gave a verdict that differs from at
    least one annotator's, annotated with ``judge_verdict``; for the
    adjudication queue (``.count()`` for the number)."""
    judge_labels = StepLabel.objects.filter(step=OuterRef("pk"), kind=StepLabel.Kind.JUDGE, judge=judge)
    # From the judge's labels to the steps (a semi-join over labels), not from every step of the
    # study to its labels (correlated subqueries per step: seconds at a million steps).
    differing = StepLabel.objects.filter(kind=StepLabel.Kind.JUDGE, judge=judge).filter(
        Exists(StepLabel.objects.filter(step=OuterRef("step"), kind=StepLabel.Kind.HUMAN)
               .exclude(verdict=OuterRef("verdict")))
    ).values("step")
    return (
        Step.objects.filter(trace__study=study, pk__in=differing)
        .annotate(judge_verdict=Subquery(judge_labels.values("verdict")[:1]))
        .order_by("trace_id", "index")
    )


def disagreement_counts(study: Study) -> dict[int, int]:
    """{judge id: steps where it disagrees with an annotator} in one query."""
    return {int(judge): n for judge, (_labels, n) in study_summary.judge_counts(study).items() if n}


#: A judge's disagreements compare its verdicts with the annotators' (annotation.gate): a blinded annotator's
#: own save moved the count (issue 29, M6), so it is shown only to who reads every one of these.
DISAGREEMENT_READS = frozenset({Source.OWN, Source.PEER, Source.JUDGE})


def visible_disagreement_count(judge: JudgeConfig, membership: Membership | None) -> int | None:
    """:func:`disagreement_count`, or None for a member the gate does not let read it."""
    return disagreement_count(judge) if gate.may_read(membership, DISAGREEMENT_READS) else None


def disagreement_count(judge: JudgeConfig) -> int:
    """Steps where ``judge`` disagrees with an annotator: stored by the score job when current
    (annotation.study_summary), else counted."""
    stored = study_summary.stored_judge_counts(judge.study)
    if stored is not None:
        return stored.get(judge.pk, (0, 0))[1]
    return disagreements(judge.study, judge).count()


def judge_list(study: Study) -> list[JudgeConfig]:
    """The study's judges with label and failure counts and their newest run, in a fixed number of queries.
    The label and disagreement counts group every judge label: stored by the score job when current."""
    newest = JudgeRun.objects.filter(judge=OuterRef("pk")).order_by("-created_at", "-pk")
    stored = study_summary.stored_judge_counts(study)
    judges = JudgeConfig.objects.filter(study=study)
    if stored is None:
        judges = judges.annotate(
            n_labels=Subquery(StepLabel.objects.filter(kind=StepLabel.Kind.JUDGE, judge=OuterRef("pk")).order_by()
                              .values("judge").annotate(n=Count("pk")).values("n")[:1]))
    judges = list(
        judges.annotate(
            n_failed=Subquery(JudgeTraceResult.objects.filter(judge=OuterRef("pk"), status="failed").order_by()
                              .values("judge").annotate(n=Count("pk")).values("n")[:1]),
            last_run_id=Subquery(newest.values("pk")[:1]),
        )
        .order_by("name")
    )
    runs = {r.pk: r for r in JudgeRun.objects.filter(pk__in=[j.last_run_id for j in judges if j.last_run_id])
            .select_related("job", "run")}
    counts = disagreement_counts(study) if stored is None else {pk: n for pk, (_l, n) in stored.items()}
    for judge in judges:
        judge.last_run = runs.get(judge.last_run_id)
        judge.n_disagreements = counts.get(judge.pk, 0)
        judge.n_labels = (judge.n_labels if stored is None else stored.get(judge.pk, (0, 0))[0]) or 0
        judge.n_failed = judge.n_failed or 0
    return judges


def active_runs(judges: Iterable[JudgeConfig]) -> QuerySet[JudgeRun]:
    return JudgeRun.objects.filter(judge__in=list(judges), job__status__in=ACTIVE).select_related("job", "judge")
