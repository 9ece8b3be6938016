"""Fidelity runs: a subject model over a suite's originals and variants, started, planned in
their job, run inline or cancelled through the run engine (runs/).
"""

from __future__ import annotations

from annotation import access, jobs, scopes
from annotation.models import Job, Membership, Study
from fidelity.core import variants as V
from fidelity.models import FidelityRun, Suite, Variant
from fidelity.runclient import JOB_KIND, KIND
from fidelity.suites import AXIS_OF_VARIANTS, AXIS_STRATEGIES, do_create_suite, originals_of
from reasonlib import selection
from runs import engine
from runs.engine import ACTIVE, Progress
from runs.params import check as check_param
from runs.params import check_cohort
from runs.version import code_version
from subjects.models import SubjectModel
from subjects.services import config_snapshot


def check_run(user, run_id: int) -> tuple[FidelityRun, Membership]:
    return access.check_object(user, FidelityRun.objects.select_related("suite__study", "subject", "job", "run"),
                               run_id, study_path="suite__study_id", what="fidelity run")


def active_runs(subject: SubjectModel):
    return FidelityRun.objects.filter(subject=subject, job__status__in=ACTIVE).select_related("job")


def run_items(suite: Suite, axes: list[str], problems: str = "all", cohort: str = "") -> tuple[list[int], list[int]]:
    """(originals, variants) problem pks of the suite the run asks about; with a saved ``cohort``, only
    the originals that are problems of the cohort's traces (and their variants)."""
    kinds = [AXIS_OF_VARIANTS[a] for a in axes if a in AXIS_OF_VARIANTS]
    variants = Variant.objects.filter(suite=suite, axis__in=kinds).select_related("original")
    ordered = list(originals_of(suite.study).order_by("problem_id").values_list("problem_id", "pk"))
    if "imported" in axes:  # [I] an imported set asks about the originals it has variants of
        linked = set(Variant.objects.filter(suite=suite).values_list("original_id", flat=True))
        ordered = [r for r in ordered if r[1] in linked]
    chosen = set(selection.select(problems, [r[0] for r in ordered]))
    originals = [pk for pid, pk in ordered if pid in chosen]
    in_cohort = scopes.cohort_problems(suite.study, cohort)
    if in_cohort is not None:
        members = set(in_cohort.values_list("problem_id", flat=True))
        originals = [pk for pk in originals if pk in members]
    keep = set(originals)
    return originals, [v.problem_id for v in variants.order_by("original__problem_id", "strategy", "index")
                       if v.original_id in keep]


def _start(suite: Suite, subject: SubjectModel, axes: list[str], *, items: list[int] | None, config: dict,
           params: dict, user, force: bool, budget_usd: float | None, queue: bool) -> FidelityRun:
    """engine.start for a fidelity run: one run per subject model at a time, and its FidelityRun row."""
    def busy() -> str | None:
        active = active_runs(subject).first()
        return active and (f"subject model {subject.name} already has fidelity run {active.pk} in progress "
                           f"(job {active.job_id}); wait for it or cancel it")

    def record(job: Job, run) -> FidelityRun:
        return FidelityRun.objects.create(suite=suite, subject=subject, job=job, run=run, axes=axes,
                                          config_version=subject.version)

    return engine.start(KIND, study_id=suite.study_id, job_kind=JOB_KIND, user=user, busy=busy, record=record,
                        items=items, force=force, budget_usd=budget_usd, config=config, queue=queue, params=params)


def do_start_run(suite: Suite, subject: SubjectModel, *, axes: list[str], problems: str = "all", force: bool = False,
                 budget_usd: float | None = None, user=None, queue: bool = True, cohort: str = "") -> FidelityRun:
    """The job, the engine's run and the FidelityRun; the first chunk queued after commit."""
    if subject.study_id != suite.study_id:
        raise ValueError("the subject model belongs to another study")
    cohort = check_cohort(suite.study, cohort)
    originals, variants = run_items(suite, axes, problems, cohort)

    config = {**config_snapshot(subject), "originals": originals, "axes": axes,
              "backward_prompt_version": 1, "code_version": code_version()}
    return _start(suite, subject, axes, items=originals + variants, config=config, user=user, force=force,
                  budget_usd=budget_usd, queue=queue,
                  params={"suite": suite.name, "subject_model": subject.name, "axes": axes, "problems": problems,
                          "cohort": cohort})


def do_queue_run(study: Study, suite_name: str, subject: SubjectModel, *, axes: list[str], per_problem: int = 1,
                 problems: str = "all", seed: int = 0, force: bool = False, budget_usd: float | None = None,
                 user=None, queue: bool = True, cohort: str = "") -> FidelityRun:
    """A fidelity run as the browser and the API start it: the request validates and queues; the job
    makes the suite's variants and picks the run's items (``plan_run_items``: both read and write a
    whole study, which no request should wait for)."""
    per_problem = check_param("per_problem", per_problem)
    seed = check_param("seed", seed)
    problems = selection.validate(problems)
    cohort = check_cohort(study, cohort)
    if subject.study_id != study.pk:
        raise ValueError("the subject model belongs to another study")
    strategies = [s for a in axes for s in AXIS_STRATEGIES[a]]
    suite, _ = Suite.objects.get_or_create(
        study=study, name=suite_name,
        defaults={"seed": seed, "strategies": strategies, "per_problem": per_problem, "problems_filter": problems,
                  "generator_version": V.VERSION, "created_by": user})

    config = {**config_snapshot(subject), "originals": [], "axes": axes, "backward_prompt_version": 1,
              "code_version": code_version(), "plan": {"per_problem": per_problem, "problems": problems, "seed": seed,
                                                        "cohort": cohort}}
    return _start(suite, subject, axes, items=None, config=config, user=user, force=force, budget_usd=budget_usd,
                  queue=queue,
                  params={"suite": suite.name, "subject_model": subject.name, "axes": axes, "problems": problems,
                          "per_problem": per_problem, "seed": seed, "cohort": cohort})


def plan_run_items(record: FidelityRun) -> list[int]:
    """The planning of a queued fidelity run, in its job: the suite's variants (do_create_suite), then
    the originals and variants the run asks about. The suite's report goes into the job's params."""
    run = record.run
    plan = run.config["plan"]
    made = do_create_suite(record.suite.study, record.suite.name, axes=record.axes, per_problem=plan["per_problem"],
                           problems=plan["problems"], seed=plan["seed"], user=record.job.created_by)
    originals, variants = run_items(made.suite, record.axes, plan["problems"], plan.get("cohort", ""))
    run.config = {**run.config, "originals": originals}
    run.save(update_fields=["config"])
    job = Job.objects.get(pk=record.job_id)
    job.params["suite_report"] = {"variants_created": made.created, "variants_kept": made.existing,
                                  "golds_derived": made.derived, "golds_unknown": made.unknown,
                                  "golds_derived_total": made.derived_total, "golds_unknown_total": made.unknown_total,
                                  "skipped": made.skipped}
    job.save(update_fields=["params"])
    return originals + variants


def run_inline(record: FidelityRun, *, progress: Progress | None = None) -> Job:
    return engine.run_inline(record.run, progress=progress)


def cancel(record: FidelityRun) -> Job:
    return jobs.cancel(record.job)
