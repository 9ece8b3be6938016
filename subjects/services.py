"""Every operation on subject models and generation runs: the web views, the
API and the management commands call these (docs/generation.md)."""

from __future__ import annotations

import logging
import re
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx2
from django.conf import settings
from django.db import transaction
from django.db.models import Count, Q, QuerySet
from django.utils import timezone

from annotation import access, jobs, scopes, study_summary
from annotation.models import Job, Membership, Problem, Study, Trace
from reasonlib import selection
from reasonlib.answers import normalize_answer
from reasonlib.refusals import Invalid, Refusal
from runs import deadline, engine
from runs.chat_template import ChatTemplateError, TemplateSource, compile_template, template_from_text
from runs.continuation import ProbeResult, ServerUnreachable, probe_model
from runs.engine import ACTIVE, Progress, RunConflict
from runs.outbound import OutboundRefused, check_endpoint, guarded_client, redact_url
from runs.params import check as check_param
from runs.params import check_cohort
from runs.transport import FatalRunError
from subjects import core, prompts
from subjects.models import Generation, GenerationRun, PromptTemplate, SubjectModel
from subjects.runclient import JOB_KIND, KIND

logger = logging.getLogger(__name__)

# Changing one of these can change the completions: a new version (new trace ids, a cold cache).
VERSIONED_FIELDS = ("base_url", "model", "api", "system_prompt", "prompt_template", "temperature", "top_p", "seed",
                    "max_tokens", "stop", "thinking", "thinking_switch", "reasoning_effort", "thinking_budget")
# What a subject model is made of; everything else on the row is bookkeeping.
FIELDS = ("name", "base_url", "model", "api_key_env", "api", "system_prompt", "prompt_template", "temperature",
          "top_p", "seed", "max_tokens", "stop", "n_samples", "concurrency", "rate_limit_per_minute",
          "timeout_seconds", "max_retries", "price_input_per_mtok", "price_output_per_mtok", "continuation",
          "chat_template", "eos_token", "thinking", "thinking_switch", "reasoning_effort", "thinking_budget")
# What a probe's answer depends on: a change makes the recorded continuation mode stale, so it is cleared.
PROBED_FIELDS = ("base_url", "model", "api_key_env", "chat_template", "eos_token")


class Unreachable(Refusal):
    """The base URL did not answer (``GET /models``, or any request of a probe): the server the request
    names is at fault, hence a bad gateway (502), not a bad request."""

    status = 502
    code = "bad_gateway"


class ProbeFailed(Exception):
    """The probe could not be recorded: the server refused it for good (e.g. the
    API key), or the subject model's server settings changed meanwhile."""


# --------------------------------------------------------------------------
# Access


def check_subject(user, subject_id: int) -> tuple[SubjectModel, Membership]:
    return access.check_object(user, SubjectModel.objects.select_related("study", "prompt_template"), subject_id,
                               study_path="study_id", what="subject model")


def check_owner(membership: Membership) -> None:
    access.check_owner(membership, "managing the study's subject models")


def check_generation_run(user, run_id: int) -> tuple[GenerationRun, Membership]:
    return access.check_object(user, GenerationRun.objects.select_related("subject__study", "job", "run"), run_id,
                               study_path="subject__study_id", what="generation run")


# --------------------------------------------------------------------------
# Templates


def ensure_builtin_templates(study: Study) -> None:
    """The study's copies of the built-in templates (version 1), made once."""
    for spec in prompts.builtin_templates():
        PromptTemplate.objects.get_or_create(study=study, name=spec["name"], version=1,
                                             defaults={"kind": spec["kind"], "template": spec["template"],
                                                       "exemplars": spec["exemplars"]})


def find_template(study: Study, name: str, version: int | None = None) -> PromptTemplate:
    """The newest version of the named template (or the given version)."""
    ensure_builtin_templates(study)
    qs = PromptTemplate.objects.filter(study=study, name=name)
    if version is not None:
        qs = qs.filter(version=version)
    template = qs.order_by("-version").first()
    if template is None:
        names = ", ".join(sorted(set(PromptTemplate.objects.filter(study=study).values_list("name", flat=True))))
        raise Invalid(f"no prompt template named {name!r}{f' version {version}' if version else ''} "
                      f"(templates: {names})", field="template")
    return template


class TemplateInvalid(Invalid):
    """A prompt template (or its preview) refused, naming the field at fault."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message, field=field)


def validate_template(name: str | None, template: str, exemplars: Any, *, system: bool = False) -> list[dict]:
    """The exemplars, checked; TemplateInvalid names the field (name, template,
    exemplars). A template is rendered by Django's template engine in a sandbox
    (subjects.prompts), never evaluated as code."""
    if name is not None:
        if not name or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", name) or len(name) > 100:
            raise TemplateInvalid("name", "use 1-100 letters, digits, '_', '.' and '-' (starting with a letter or "
                                          "digit)")
    if not template.strip():
        raise TemplateInvalid("template", "the template is empty")
    error = prompts.template_error(template)
    if error:
        raise TemplateInvalid("template", f"the template does not compile: {error}")
    if not system and not prompts.names_the_problem(template):
        raise TemplateInvalid("template", "the template never puts the problem in the prompt: use {{ problem }}")
    exemplars = exemplars or []
    if not isinstance(exemplars, list) or not all(
        isinstance(e, dict) and isinstance(e.get("question"), str) and isinstance(e.get("answer"), str)
        for e in exemplars
    ):
        raise TemplateInvalid("exemplars", 'exemplars must be a list of {"question": text, "answer": text}')
    return exemplars


@transaction.atomic
def do_save_template(study: Study, name: str, template: str, *, exemplars: list[dict] | None = None,
                     system: bool | None = None) -> PromptTemplate:
    """A new version of the named template (version 1 for a new name); an
    unchanged one is returned as it is. Raises TemplateInvalid (a ValueError) naming the field.
    ``system``: a diagnostic's system prompt (kind "system"); None keeps the kind of the newest version,
    so the editor and ``add_template`` can save new versions of those too."""
    ensure_builtin_templates(study)
    newest = (PromptTemplate.objects.select_for_update().filter(study=study, name=name).order_by("-version").first())
    if system is None:
        system = newest is not None and newest.kind == PromptTemplate.Kind.SYSTEM
    exemplars = validate_template(name, template, exemplars, system=system)
    if newest is not None and newest.template == template and newest.exemplars == exemplars:
        return newest
    kind = (PromptTemplate.Kind.SYSTEM if system
            else PromptTemplate.Kind.K_SHOT if exemplars else PromptTemplate.Kind.ZERO_SHOT)
    return PromptTemplate.objects.create(study=study, name=name, version=(newest.version + 1) if newest else 1,
                                         kind=kind, template=template, exemplars=exemplars)


@dataclass(frozen=True)
class Preview:
    problem_id: str
    text: str  # the prompt's user text as a subject model would send it


SAMPLE_PROBLEM = ("(no problem in the study yet)",
                  "Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May. "
                  "How many clips did Natalia sell altogether in April and May?")


def preview_template(study: Study, template: str, exemplars: Any = None, *, problem_id: str | None = None) -> Preview:
    """The template rendered on one problem of the study (``problem_id``, or
    the first one; a sample problem when the study has none), exactly as a
    generation run renders it. Nothing is saved and no model is called."""
    exemplars = validate_template(None, template, exemplars)
    problems = Problem.objects.filter(study=study)
    if problem_id:
        problem = problems.filter(problem_id=problem_id).values_list("problem_id", "statement").first()
        if problem is None:
            raise TemplateInvalid("problem_id", f"no problem {problem_id!r} in this study")
    else:
        problem = problems.order_by("pk").values_list("problem_id", "statement").first() or SAMPLE_PROBLEM
    try:
        text = prompts.render(template, problem=problem[1], problem_id=problem[0], exemplars=exemplars)
    except Exception as exc:  # an error of the user's template while rendering (e.g. a filter's argument)
        raise TemplateInvalid("template", f"the template does not render: {type(exc).__name__}: {exc}") from None
    return Preview(problem[0], text)


def template_versions(study: Study) -> dict[str, list[PromptTemplate]]:
    """Every template of the study by name, newest version first (one query)."""
    ensure_builtin_templates(study)
    out: dict[str, list[PromptTemplate]] = defaultdict(list)
    for t in PromptTemplate.objects.filter(study=study).order_by("name", "-version"):
        out[t.name].append(t)
    return dict(out)


def check_template(user, template_id: int) -> tuple[PromptTemplate, Membership]:
    return access.check_object(user, PromptTemplate.objects.select_related("study"), template_id,
                               study_path="study_id", what="prompt template")


# --------------------------------------------------------------------------
# Subject models


def check_reachable(base_url: str, *, timeout: float = 10.0) -> None:
    """One cheap request, ``GET {base_url}/models``, within ``timeout`` seconds in all; raises Unreachable
    naming the URL when the server does not answer (any HTTP answer counts: a server that wants a key
    still exists). For the operator's command line only (add_model): the web and the API check a server
    with a probe job after saving (do_check_after_save)."""
    # Through the address policy (runs.outbound), and one message for every failure: which error it was
    # (refused, timed out, reset) would tell a user which ports are open on the hosts the policy allows.
    url = base_url.rstrip("/") + "/models"
    try:
        check_endpoint(base_url, "")
        with guarded_client(timeout) as client, deadline.total(timeout):  # redirects included
            client.get(url)
    except OutboundRefused:
        raise  # a refusal naming base_url (the family of reasonlib.refusals)
    except httpx2.HTTPError:
        raise Unreachable(f"no model server answered at {redact_url(base_url)} (GET /models); save without the "
                          "check to keep it anyway") from None


@transaction.atomic
def do_save_subject(study: Study, fields: dict[str, Any], *, subject: SubjectModel | None = None) -> tuple[SubjectModel, bool]:
    """Create or update a subject model; its version goes up when a field of
    VERSIONED_FIELDS changes. ``prompt_template`` defaults to the built-in zero-shot one."""
    unknown = set(fields) - set(FIELDS)
    if unknown:
        raise Invalid(f"unknown field(s): {', '.join(sorted(unknown))}")
    created = subject is None
    if subject is None:
        subject = SubjectModel(study=study)
        if fields.get("prompt_template") is None:
            fields = {**fields, "prompt_template": find_template(study, prompts.ZERO_SHOT)}
    else:
        stored = SubjectModel.objects.get(pk=subject.pk)
        # A completions-API model's prompt is rendered by its chat template: the template is then versioned too.
        completions = SubjectModel.Api.COMPLETIONS in (stored.api, fields.get("api"))
        versioned = VERSIONED_FIELDS + (("chat_template", "eos_token") if completions else ())
        if any(key in fields and getattr(stored, key) != fields[key] for key in versioned):
            subject.version = stored.version + 1
        if "continuation" not in fields and any(
            key in fields and getattr(stored, key) != fields[key] for key in PROBED_FIELDS
        ):
            # Another server, model or template: the probe's answer no longer describes it.
            subject.continuation, subject.probe_result = SubjectModel.Continuation.UNKNOWN, {}
    if fields.get("chat_template", "").strip():
        try:
            compile_template(fields["chat_template"])
        except ChatTemplateError as exc:
            raise Invalid(str(exc), field="chat_template") from None
    template = fields.get("prompt_template")
    if template is not None and template.study_id != study.pk:
        raise Invalid("the prompt template belongs to another study", field="template")
    for key, value in fields.items():
        setattr(subject, key, value)
    subject.full_clean(exclude=["study", "prompt_template"], validate_unique=False)
    if SubjectModel.objects.filter(study=study, name=subject.name).exclude(pk=subject.pk).exists():
        raise Invalid(f"a subject model named {subject.name!r} exists in this study", field="name")
    subject.save()
    return subject, created


def chat_template_from_file(path: Path) -> TemplateSource:
    """The chat template of a Jinja file or a tokenizer_config.json (with its
    EOS token); ValueError naming the file when it is missing, unreadable or
    does not compile."""
    if not path.is_file():
        raise ValueError(f"{path}: no such file")
    try:
        source = template_from_text(path.read_text(encoding="utf-8"))
        compile_template(source.template)
    except (ChatTemplateError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: {exc}") from None
    return source


def do_probe_subject_model(subject: SubjectModel) -> ProbeResult:
    """Probe the subject model's server for the continuation modes it supports
    (runs.continuation.probe_model: three cheap greedy requests) and record the
    strongest as its ``continuation``, with the evidence in ``probe_result``.
    Raises Unreachable (naming the URL) or ProbeFailed and changes nothing."""
    try:
        # Outside the transaction: up to three HTTP requests, never holding a database transaction open.
        result = probe_model(subject.server())
    except ServerUnreachable as exc:
        raise Unreachable(str(exc)) from None
    except FatalRunError as exc:
        raise ProbeFailed(f"the server at {subject.base_url} refused the probe: {exc}") from None
    with transaction.atomic():
        fresh = SubjectModel.objects.select_for_update().get(pk=subject.pk)
        if any(getattr(fresh, key) != getattr(subject, key) for key in PROBED_FIELDS):
            raise ProbeFailed(f"subject model {subject.name} changed while it was probed; probe it again")
        fresh.continuation = result.chosen or SubjectModel.Continuation.UNKNOWN
        fresh.probe_result = {**result.to_dict(), "probed_at": timezone.now().isoformat(),
                              "config_version": fresh.version}
        fresh.save(update_fields=["continuation", "probe_result", "updated_at"])
    subject.continuation, subject.probe_result = fresh.continuation, fresh.probe_result
    return result


PROBE_JOB_KIND = "probe"  # Job.kind of a probe in the background (the web button, the API)
PROBE_TASK = "subjects.tasks.probe_subject_model"
PROBE_REQUESTS = 3  # one per continuation mode: the job's total


def active_probe(subject: SubjectModel) -> Job | None:
    return (Job.objects.filter(study_id=subject.study_id, kind=PROBE_JOB_KIND, status__in=ACTIVE,
                               params__subject_model_id=subject.pk).order_by("-created_at").first())


def latest_probe_job(subject: SubjectModel) -> Job | None:
    return (Job.objects.filter(study_id=subject.study_id, kind=PROBE_JOB_KIND, params__subject_model_id=subject.pk)
            .order_by("-created_at", "-pk").first())


@transaction.atomic
def do_start_probe(subject: SubjectModel, *, user=None) -> Job:
    """A Job that probes the subject model in a worker (runs.continuation.probe_model
    through do_probe_subject_model), queued by name once this transaction commits.
    One at a time per subject model: a second while one is active is a RunConflict."""
    SubjectModel.objects.select_for_update().filter(pk=subject.pk).first()  # two clicks: one job
    active = active_probe(subject)
    if active is not None:
        raise RunConflict(f"subject model {subject.name} is being probed already (job {active.pk})")
    job = Job.objects.create(study_id=subject.study_id, kind=PROBE_JOB_KIND, created_by=user, total=PROBE_REQUESTS,
                             params={"subject_model": subject.name, "subject_model_id": subject.pk,
                                     "config_version": subject.version})
    transaction.on_commit(lambda: _queue_probe(job.pk))
    return job


def do_check_after_save(subject: SubjectModel, *, user=None) -> Job | None:
    """The save-time check of a subject model's server: a probe job (do_start_probe) contacts the server
    in a worker; the web process, the API and the save itself never do. A check that connected while
    the owner waited would tell by its time alone a closed port from a silent one and from a model
    server, on every host the address policy allows (issue 29, L4). Returns the probe's job (the one
    already running, if any), or None when the task queue is down (that job ended failed at once)."""
    from kombu.exceptions import OperationalError as BrokerError

    try:
        return do_start_probe(subject, user=user)
    except RunConflict:
        return active_probe(subject)
    except BrokerError:
        return None


def _queue_probe(job_id: int) -> None:
    """Queue the probe; with the task queue down it ends failed at once (as every run does), then the
    broker's error goes on to the caller (503)."""
    from kombu.exceptions import OperationalError as BrokerError

    try:
        jobs.queue_task(PROBE_TASK, job_id)
    except BrokerError:
        jobs.finish(job_id, status=Job.Status.FAILED, error=jobs.BROKER_DOWN)
        raise


def run_probe_job(job_id: int) -> None:
    """The probe job's work (the Celery task calls this): probe, record, and
    finish the job with the evidence as its result, or failed with the reason.
    A job already finished (a re-delivered task) is left alone."""
    if not jobs.claim(job_id):
        return
    job = Job.objects.get(pk=job_id)
    subject = SubjectModel.objects.filter(pk=job.params.get("subject_model_id")).select_related("study").first()
    if subject is None:
        jobs.finish(job_id, status=Job.Status.FAILED, error="the subject model was deleted")
        return
    jobs.report_progress(job_id, 0, PROBE_REQUESTS)
    try:
        result = do_probe_subject_model(subject)
    except (Unreachable, ProbeFailed) as exc:
        jobs.finish(job_id, status=Job.Status.FAILED, error=f"nothing recorded: {exc}", if_running=True)
        return
    except Exception:
        # Whatever the server sent, the job ends (never "running" for ever); the detail goes to the log.
        logger.exception("probe job %s failed", job_id)
        jobs.finish(job_id, status=Job.Status.FAILED, if_running=True,
                    error="nothing recorded: the probe failed on an unexpected answer of the server")
        return
    data = result.to_dict()
    jobs.finish(job_id, status=Job.Status.SUCCEEDED, done=PROBE_REQUESTS, if_running=True,
                result={"chosen": data.get("chosen"), "supported": data.get("supported"),
                        "continuation": subject.continuation, "config_version": subject.version})


def config_snapshot(subject: SubjectModel) -> dict[str, Any]:
    """What a run uses: the configuration and the template as they were when it started."""
    t = subject.prompt_template
    return {
        "name": subject.name, "version": subject.version, "base_url": redact_url(subject.base_url), "model": subject.model,
        "api": subject.api, "system_prompt": subject.system_prompt, "template_name": t.name,
        "template_version": t.version, "template": t.template, "exemplars": t.exemplars,
        "temperature": subject.temperature, "top_p": subject.top_p, "seed": subject.seed,
        "max_tokens": subject.max_tokens, "stop": list(subject.stop or []), "concurrency": subject.concurrency,
        "rate_limit_per_minute": subject.rate_limit_per_minute, "max_retries": subject.max_retries,
        "timeout_seconds": subject.timeout_seconds, "price_input_per_mtok": subject.price_input_per_mtok,
        "price_output_per_mtok": subject.price_output_per_mtok,
        "chat_template": subject.chat_template, "eos_token": subject.eos_token,
        "thinking": subject.thinking, "thinking_switch": subject.thinking_switch,
        "reasoning_effort": subject.reasoning_effort, "thinking_budget": subject.thinking_budget,
    }


# --------------------------------------------------------------------------
# Generation runs


PROBLEM_FILTERS = f"{selection.SYNTAX} (within all problems), or missing"


def split_problems(value: str | None) -> tuple[str, str]:
    """(scope, filter) of a generation run's ``problems``: all, missing, or a filter within all problems."""
    return selection.scope_and_filter(value, tuple(GenerationRun.Scope.values))


def problems_in_scope(subject: SubjectModel, scope: str, samples: int, problem_filter: str = "",
                      cohort: str = "") -> list[int]:
    """The problem pks of a run: the ``scope`` (all, or those missing some of their K samples), then the
    filter over the study's problems in problem-id order, then -- with a saved ``cohort`` -- only the
    problems of the cohort's traces."""
    # The study's own problems: fidelity variants are generated by their suite's runs.
    problems = Problem.objects.filter(study_id=subject.study_id).own()
    if scope == GenerationRun.Scope.MISSING:
        complete = (Generation.objects.filter(subject=subject, config_version=subject.version, sample__lt=samples)
                    .values("problem_id").annotate(n=Count("pk")).filter(n__gte=samples).values("problem_id"))
        problems = problems.exclude(pk__in=complete)
    elif scope != GenerationRun.Scope.ALL:
        raise ValueError(f"problems: unknown selection {scope!r}; choose all, missing or a filter ({selection.SYNTAX})")
    if problem_filter:
        # Counted among the study's own problems too: "first:5" is never five suite variants or benchmark items.
        ordered = list(Problem.objects.filter(study_id=subject.study_id).own().order_by("problem_id")
                       .values_list("problem_id", flat=True))
        problems = problems.filter(problem_id__in=selection.select(problem_filter, ordered))
    in_cohort = scopes.cohort_problems(subject.study, cohort)
    if in_cohort is not None:
        problems = problems.filter(pk__in=in_cohort)
    return list(problems.order_by("pk").values_list("pk", flat=True))


def do_start_generation(subject: SubjectModel, *, scope: str = "all", samples: int | None = None, force: bool = False,
                        budget_usd: float | None = None, user=None, queue: bool = True,
                        cohort: str = "") -> GenerationRun:
    """Start a generation run over the problems ``scope`` names (all, missing or a problem filter;
    runs.engine.start), within the problems of a saved ``cohort``'s traces when one is given."""
    scope, problem_filter = split_problems(scope)
    cohort = check_cohort(subject.study, cohort)
    samples = check_param("samples", samples or subject.n_samples)

    def busy() -> str | None:
        active = GenerationRun.objects.filter(subject=subject, job__status__in=ACTIVE).first()
        return active and (f"subject model {subject.name} already has run {active.pk} in progress "
                           f"(job {active.job_id}); wait for it or cancel it")

    def record(job: Job, run) -> GenerationRun:
        return GenerationRun.objects.create(job=job, run=run, subject=subject, scope=scope, samples=samples,
                                            problem_filter=problem_filter, config_version=subject.version)

    # Lanes: chunks worked on at once by several worker processes (RUN_PARALLEL_CHUNKS), each with
    # its share of the concurrency, so the run's CPU work (parsing, storing traces) is shared too.
    lanes = min(int(getattr(settings, "RUN_PARALLEL_CHUNKS", 1)), subject.concurrency)
    return engine.start(
        KIND, study_id=subject.study_id, job_kind=JOB_KIND, user=user, busy=busy, record=record,
        items=lambda _row: problems_in_scope(subject, scope, samples, problem_filter, cohort), force=force, budget_usd=budget_usd,
        config=config_snapshot(subject), lanes=lanes, queue=queue,
        params={"subject_model": subject.name, "subject_model_id": subject.pk, "problems": scope,
                "problem_filter": problem_filter, "cohort": cohort, "samples": samples, "force": force, "budget_usd": budget_usd})


def run_inline(record: GenerationRun, *, progress: Progress | None = None) -> Job:
    return engine.run_inline(record.run, progress=progress)


def active_runs(subject: SubjectModel) -> QuerySet[GenerationRun]:
    return GenerationRun.objects.filter(subject=subject, job__status__in=ACTIVE).select_related("job")


# --------------------------------------------------------------------------
# Aggregates


@dataclass(frozen=True)
class ModelRow:
    """One line of the study's model table: a subject model's configuration
    version (generated) or an imported model (``subject`` None)."""

    model: str
    subject: SubjectModel | None
    config_version: int | None
    traces: int
    accuracy: float | None
    aggregate: core.Aggregate | None = None
    mean_completion_tokens: float | None = None
    cost_usd: float = 0.0
    truncated: int = 0


def model_table(study: Study) -> list[ModelRow]:
    """Accuracy, pass@k, maj@k, mean tokens and cost per (subject model, config
    version) -- never mixing two versions -- next to the accuracy of the
    models whose traces were imported. A fixed number of queries."""
    subjects = {s.pk: s for s in SubjectModel.objects.filter(study=study).select_related("prompt_template")}
    samples: dict[tuple[int, int], dict[int, list[tuple[int, core.Sample]]]] = defaultdict(lambda: defaultdict(list))
    tokens: dict[tuple[int, int], list[int]] = defaultdict(list)
    cost: dict[tuple[int, int], float] = defaultdict(float)
    truncated: dict[tuple[int, int], int] = defaultdict(int)
    generated = Generated()
    # Each distinct answer normalized once (normalize_answer is pure): the answers of many samples repeat, and
    # normalizing every sample's was half the page's time at 120,000 generations.
    normalized: dict[str, str] = {}
    for subject_id, version, problem, sample, answer, correct, ct, usd, trunc, model, created in (
        # Generations of the study's own problems: a benchmark's or a suite's are reported on their pages.
        Generation.objects.of_study(study).values_list(
            "subject_id", "config_version", "problem_id", "sample", "trace__answer", "trace__answer_correct",
            "completion_tokens", "cost_usd", "truncated", "trace__model", "created_at")
    ):
        generated.add(model, correct, created)
        key = (subject_id, version)
        if answer and answer not in normalized:
            normalized[answer] = normalize_answer(answer)
        samples[key][problem].append((sample, core.Sample(normalized[answer] if answer else "", correct)))
        if ct is not None:
            tokens[key].append(ct)
        cost[key] += usd
        truncated[key] += trunc
    rows: list[ModelRow] = []
    for (subject_id, version), per_problem in sorted(samples.items(), key=lambda kv: (subjects[kv[0][0]].name, kv[0][1])):
        subject = subjects[subject_id]
        ordered = [[s for _i, s in sorted(v, key=lambda x: x[0])] for v in per_problem.values()]
        agg = core.aggregate(ordered, subject.n_samples)
        toks = tokens[(subject_id, version)]
        rows.append(ModelRow(subject.name, subject, version, agg.samples, agg.accuracy, agg,
                             sum(toks) / len(toks) if toks else None, cost[(subject_id, version)],
                             truncated[(subject_id, version)]))
    for model, n, checked, correct in _imported_by_model(study, generated):
        rows.append(ModelRow(model, None, None, n, correct / checked if checked else None))
    return rows


@dataclass
class Generated:
    """The generated traces per model of the trace (traces, answers checked, correct) and the latest generation's
    time: what the stored table by model holds beyond the imported traces."""

    by_model: dict[str, list[int]] = field(default_factory=lambda: defaultdict(lambda: [0, 0, 0]))
    latest: datetime | None = None

    def add(self, model: str, correct: bool | None, created: datetime) -> None:
        row = self.by_model[model]
        row[0] += 1
        row[1] += correct is not None
        row[2] += bool(correct)
        self.latest = created if self.latest is None or created > self.latest else self.latest


def _imported_by_model(study: Study, generated: Generated) -> list[tuple[str, int, int, int]]:
    """(model, traces, answers checked, answers correct) of the study's own traces that no subject model generated:
    the stored table by model (annotation.study_summary, written by the score job) less the generated traces,
    instead of grouping every trace of the study (1.6 s at 1M traces). Without generations the stored table
    itself, stale or not (the page says so). With generations only while it is current, no generation run is
    under way and none was generated after it: a run writes traces before the change that ends it marks the
    table stale, so the table less the generations could count a trace twice; else grouped from the traces."""
    stored = study_summary.stored(study)
    models = stored.counts["by_model"]["models"] if stored is not None else None
    if models is not None and all("checked" in row for row in models):  # else stored before answers checked were
        if generated.latest is None:
            return [(row["model"], row["traces"], row["checked"], row["correct"]) for row in models]
        if (not stored.stale and generated.latest <= stored.computed_at
                and not GenerationRun.objects.filter(subject__study=study, job__status__in=ACTIVE).exists()):
            out = []
            for row in models:
                n, checked, correct = generated.by_model.get(row["model"], (0, 0, 0))
                if row["traces"] > n:
                    out.append((row["model"], row["traces"] - n, row["checked"] - checked, row["correct"] - correct))
            return out
    imported = (Trace.objects.of_study(study).filter(generation__isnull=True).values("model")
                .annotate(n=Count("pk"), checked=Count("pk", filter=Q(answer_correct__isnull=False)),
                          correct=Count("pk", filter=Q(answer_correct=True))).order_by("model"))
    return [(r["model"], r["n"], r["checked"], r["correct"]) for r in imported]

