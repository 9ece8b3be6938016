"""Starting step-importance runs (docs/step-importance.md) through the run engine (runs.engine.start); the
rollouts are planned in the job (anchors.planning)."""

from __future__ import annotations

from typing import Any

from anchors.core.similarity import METHOD, SIMILARITY_THRESHOLD
from anchors.models import ImportanceRun
from anchors.planning import traces_of
from anchors.results import DEFAULT_BOOTSTRAP
from anchors.runclient import JOB_KIND, KIND
from annotation.models import Job
from faithfulness.loading import THOUGHT
from faithfulness.running import _decoding, continuation_mode
from runs import engine
from runs.engine import ACTIVE, Progress
from runs.params import ParamError, check, check_cohort
from runs.version import code_version
from subjects.models import SubjectModel

DEFAULT_SAMPLES = 20
DEFAULT_SEED = 0
MAX_STEPS_LISTED = 10_000


def check_steps(steps: list[int] | None) -> list[int] | None:
    if not steps:
        return None
    if len(steps) > MAX_STEPS_LISTED:
        raise ParamError("steps", f"at most {MAX_STEPS_LISTED:,} steps, got {len(steps):,}")
    for s in steps:
        if isinstance(s, bool) or not isinstance(s, int) or s < 1:
            raise ParamError("steps", f"steps are whole numbers from 1, got {s!r}")
    return sorted(set(steps))


def do_start_importance(subject: SubjectModel, *, samples: int = DEFAULT_SAMPLES, temperature: float | None = None,
                        stride: int = 1, steps: list[int] | None = None, trace_ids: list[str] | None = None,
                        cohort: str = "", limit: int | None = None, seed: int = DEFAULT_SEED, forced: bool = True,
                        mode: str | None = None, user=None, queue: bool = True, force: bool = False,
                        budget_usd: float | None = None) -> ImportanceRun:
    """Validate and queue a step-importance run of ``subject``'s traces (all, the named ``trace_ids``, a
    saved cohort, the first ``limit``): N ``samples`` continuations at ``temperature`` (default: the
    subject model's) from the prefix before and through every ``stride``-th thought step (or the listed
    ``steps``), and a forced answer at each cut unless ``forced`` is off."""
    samples = check("samples_per_prefix", samples, field="samples")
    stride = check("stride", stride)
    seed = check("seed", seed)
    limit = check("limit", limit)
    temperature = check("temperature", temperature)
    steps = check_steps(steps)
    cohort = check_cohort(subject.study, cohort)
    trace_ids = [t for t in (trace_ids or []) if t]
    mode = continuation_mode(subject, mode)
    if not traces_of(subject, trace_ids=trace_ids, cohort=cohort, limit=limit).exists():
        what = " among the named traces" if trace_ids else (" in the cohort" if cohort else "")
        raise ParamError("trace_ids" if trace_ids else ("cohort" if cohort else "model"),
                         f"subject model {subject.name} has no generated traces with thought steps{what} "
                         f"(configuration version {subject.version}); generate with thinking on first")
    params: dict[str, Any] = {
        "samples": samples, "temperature": temperature, "stride": stride, "steps": steps, "trace_ids": trace_ids,
        "cohort": cohort, "limit": limit, "seed": seed, "forced": bool(forced), "channel": THOUGHT,
        "decoding": _decoding(subject), "threshold": SIMILARITY_THRESHOLD, "similarity": METHOD,
        "bootstrap": DEFAULT_BOOTSTRAP, "code_version": code_version()}

    def busy() -> str | None:
        active = ImportanceRun.objects.filter(subject=subject, job__status__in=ACTIVE).first()
        return active and (f"subject model {subject.name} already has step-importance run {active.pk} in progress "
                           f"(job {active.job_id}); wait for it or cancel it")

    def record(job: Job, run) -> ImportanceRun:
        return ImportanceRun.objects.create(job=job, run=run, subject=subject, config_version=subject.version,
                                            mode=mode, params=params)

    return engine.start(
        KIND, study_id=subject.study_id, job_kind=JOB_KIND, user=user, busy=busy, record=record, items=None,
        force=force, budget_usd=budget_usd, queue=queue,
        params={"subject_model": subject.name, "subject_model_id": subject.pk, "mode": mode, **params},
        config={"subject_model": subject.name, "version": subject.version, "mode": mode, **params})


def run_inline(record: ImportanceRun, *, progress: Progress | None = None) -> Job:
    return engine.run_inline(record.run, progress=progress)
