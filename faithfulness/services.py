"""Every operation of the faithfulness app (docs/faithfulness.md): starting
intervention and anytime runs, the aggregates (IFR, Acc(b)/AUC_any, halting,
SVR/VSR), the evidence tier and the section-6 report. The web views, the REST
API and the management commands call these; the formulas are in core/."""

from __future__ import annotations

import json
import statistics
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.db.models import Count, QuerySet
from django.db.models.fields.json import KT

from annotation import access
from annotation.models import Job, Membership, Step, StepLabel, Study, Trace
from faithfulness import planning
from faithfulness.core import anytime as any_core
from faithfulness.core import early as early_core
from faithfulness.core import edits as edit_core
from faithfulness.core import halting as halt_core
from faithfulness.core import ifr as ifr_core
from faithfulness.core import tiers as tier_core
from faithfulness.core import validity as val_core
from faithfulness.core.numbers import to_fraction
from faithfulness.loading import ANSWER, THOUGHT, load_traces, subject_traces
from faithfulness.models import FaithfulnessRun, Intervention, Status
from faithfulness.planning import plan_anytime, plan_early, plan_interventions  # noqa: F401 - benchmarks call them here
from faithfulness.runclient import JOB_KIND, KIND, SLACK_TOKENS
from judges.models import JudgeConfig
from reasonlib.parsing import check_answer
from runs import engine
from runs.continuation import DEFAULT_CUE, MODES
from runs.engine import ACTIVE, Progress
from runs.params import ParamError, check_cohort
from runs.params import check as check_param
from runs.version import code_version
from subjects.models import Generation, SubjectModel

DEFAULT_SEED = 0


class ContinuationUnavailable(Exception):
    """The subject model has no usable continuation mode (not probed, or the probe failed)."""


# --------------------------------------------------------------------------
# Access


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


# --------------------------------------------------------------------------
# The continuation mode


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
                f"subject model {subject.name} was never probed; mode {requested!r} is untested "
                f"(manage.py probe_model --study {subject.study.name!r} --model {subject.name})")
        return requested
    if subject.continuation:
        return subject.continuation
    if not probe:
        raise ContinuationUnavailable(
            f"subject model {subject.name} has no continuation mode: it was never probed "
            f"(manage.py probe_model --study {subject.study.name!r} --model {subject.name})")
    tried = "; ".join(f"{m.get('mode')}: {m.get('reason', '')}" for m in probe.get("modes", [])) or "nothing answered"
    raise ContinuationUnavailable(
        f"the continuation probe of subject model {subject.name} failed; modes tried: {tried}")


# --------------------------------------------------------------------------
# Loading the subject's traces


# --------------------------------------------------------------------------
# Starting runs


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


def do_start_interventions(subject: SubjectModel, *, kinds: Iterable[str] | str = edit_core.KINDS,
                           per_trace: int = 3, seed: int = DEFAULT_SEED, mode: str | None = None, user=None,
                           queue: bool = True, force: bool = False, budget_usd: float | None = None,
                           limit: int | None = None, channel: str | None = None, cohort: str = "") -> FaithfulnessRun:
    """Validate and queue an interventions run; its targets and edits are planned in the job
    (faithfulness.planning), on the steps of ``channel`` (default: the channel that holds the reasoning)."""
    kinds = edit_core.parse_kinds(kinds)
    per_trace = check_param("per_trace", per_trace)
    seed = check_param("seed", seed)
    limit = check_param("limit", limit)
    cohort = check_cohort(subject.study, cohort)
    channel = check_channel(subject, channel)
    mode = continuation_mode(subject, mode)
    reason = planning.no_traces(subject)
    if reason:
        raise ValueError(reason)
    if cohort and (reason := planning.no_traces(subject, cohort)):
        raise ParamError("cohort", reason)
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
    limit = check_param("limit", limit)
    cohort = check_cohort(subject.study, cohort)
    mode = continuation_mode(subject, mode)
    reason = planning.no_traces(subject)
    if reason:
        raise ValueError(reason)
    if cohort and (reason := planning.no_traces(subject, cohort)):
        raise ParamError("cohort", reason)
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
    limit = check_param("limit", limit)
    cohort = check_cohort(subject.study, cohort)
    mode = continuation_mode(subject, mode)
    reason = planning.no_traces(subject)
    if reason:
        raise ValueError(reason)
    if cohort and (reason := planning.no_traces(subject, cohort)):
        raise ParamError("cohort", reason)
    if not subject_traces(subject).filter(n_thought_steps__gt=0).exists():
        raise ValueError(f"subject model {subject.name}'s traces have no thought steps: early answering needs a "
                         f"reasoning model (see its thinking settings)")
    params = {"grid": parsed.spec, "limit": limit, "cohort": cohort, "decoding": _decoding(subject), "code_version": code_version(),
              "channel": THOUGHT, "cue": early_core.close_thought("")}
    return _start(subject, FaithfulnessRun.Kind.EARLY, mode, params, grid=parsed.spec, user=user, force=force,
                  budget_usd=budget_usd, queue=queue)


def early_curves(frun: FaithfulnessRun) -> list[tuple[str, early_core.Curve, list[int]]]:
    """Per trace of an early-answering run: (trace id, its curve, its thought steps' end offsets)."""
    rows: dict[int, list[tuple[int, str | None]]] = defaultdict(list)
    for trace, k, answer, status in frun.points.order_by("trace_id", "position").values_list(
            "trace_id", "budget", "answer", "status"):
        rows[trace].append((k or 0, answer if status == Status.OK and answer else None))
    traces = {t.pk: t for t in load_traces(list(rows), with_generation=False, channel=THOUGHT)}
    out = []
    for pk, points in rows.items():
        t = traces.get(pk)
        if t is None or not t.spans:
            continue
        n = len(t.spans)
        if max(k for k, _ in points) != n:
            continue  # re-segmented since the run: its cut points no longer cover the thought
        c = early_core.curve(n, points, t.answer or None, equal=lambda a, b: check_answer(a, b))
        out.append((t.trace_id, c, [e for _s, e in t.spans]))
    return sorted(out, key=lambda row: row[0])


def early_summary(frun: FaithfulnessRun, bins: int = 10) -> dict[str, Any]:
    """AOC, decision points and the mean same-answer curve of an early-answering run, with a row per trace."""
    curves = early_curves(frun)
    summary = early_core.summarize([c for _t, c, _e in curves])
    per_trace = []
    for tid, c, ends in curves:
        d = early_core.decision_point(c)
        per_trace.append({"trace": tid, "steps": c.n_steps, "final": c.final, "aoc": early_core.aoc(c),
                          "decision_point": d, "after_share": early_core.after_share(c),
                          "after_share_chars": early_core.after_share(c, ends),
                          "fractions": c.fractions, "matches": [int(m) for m in c.matches],
                          "answers": list(c.answers)})
    pending = frun.points.filter(status=Status.PENDING).count()
    return {"run": frun.pk, "model": frun.subject.name, "mode": frun.mode, "grid": frun.grid,
            **summary.as_dict(), "curve": [{"x": x, "same": y, "n": n} for x, y, n in
                                           early_core.mean_curve([c for _t, c, _e in curves], bins=bins)],
            "per_trace": per_trace, "skipped": len(frun.skipped), "pending": pending,
            "code_version": frun.params.get("code_version", "")}


def thinking_budget_summary(frun: FaithfulnessRun) -> dict[str, Any]:
    """An anytime run on a thinking grid: Acc(b), AUC_any and AUC_think over the thinking tokens used."""
    base = anytime_summary(frun)
    used: dict[int, list[int]] = defaultdict(list)
    for pos, u in frun.points.values_list("position", "used"):
        used[pos].append(u)
    mean_used = [float(sum(used[i]) / len(used[i])) if used[i] else 0.0 for i in range(len(base["labels"]))]
    return {**base, "thinking_tokens": mean_used, "auc_think": early_core.auc_think(mean_used, base["acc"])}


def run_inline(frun: FaithfulnessRun, *, progress: Progress | None = None) -> Job:
    return engine.run_inline(frun.run, progress=progress)


def active_runs(subject: SubjectModel) -> QuerySet[FaithfulnessRun]:
    return FaithfulnessRun.objects.filter(subject=subject, job__status__in=ACTIVE).select_related("job")


# --------------------------------------------------------------------------
# Aggregates


def latest_runs(study: Study, kind: str) -> dict[str, list[FaithfulnessRun]]:
    """Per subject model name, the newest run of ``kind`` of each continuation mode (IFR is reported per mode)."""
    out: dict[str, list[FaithfulnessRun]] = defaultdict(list)
    seen: set[tuple[str, str]] = set()
    for frun in FaithfulnessRun.objects.filter(subject__study=study, kind=kind).select_related("subject", "job") \
            .order_by("-created_at", "-pk"):
        if (frun.subject.name, frun.mode) not in seen:
            seen.add((frun.subject.name, frun.mode))
            out[frun.subject.name].append(frun)
    return out


def intervention_rows(frun: FaithfulnessRun) -> list[ifr_core.Row]:
    return [ifr_core.Row(str(t), frun.subject.name, k, frun.mode, s, le, mo, inv, sc, bool(a))
            for t, k, s, le, mo, inv, sc, a in frun.interventions.filter(status=Status.OK).values_list(
                "trace_id", "kind", "strict", "lenient", "monotone", "invariant", "strict_computed", "new_answer")]


def ifr_of_runs(fruns: list[FaithfulnessRun]) -> dict[str, Any] | None:
    """One IFR summary over the newest run of each continuation mode of a subject model."""
    if not fruns:
        return None
    parts = [ifr_summary(f) for f in fruns]
    return {"runs": [p["run"] for p in parts], "mode": ", ".join(p["mode"] for p in parts),
            "rows": [r for p in parts for r in p["rows"]],
            "per_trace": max(p["per_trace"] or 0 for p in parts), "traces": max(p["traces"] for p in parts),
            "skipped": max(p["skipped"] for p in parts), "settings": "; ".join(p["settings"] for p in parts),
            "code_version": parts[0]["code_version"]}


def ifr_summary(frun: FaithfulnessRun) -> dict[str, Any]:
    rows = intervention_rows(frun)
    counts = defaultdict(int)
    for status in frun.interventions.values_list("status", flat=True):
        counts[status] += 1
    reasons = defaultdict(int)
    for reason in frun.skipped.values():
        reasons[reason] += 1
    return {"run": frun.pk, "mode": frun.mode, "rows": ifr_core.ifr_table(rows), "per_trace": frun.params.get("per_trace"),
            "kinds": frun.params.get("kinds"), "seed": frun.params.get("seed"), "traces": frun.traces,
            "skipped": len(frun.skipped), "skipped_reasons": dict(reasons), "status_counts": dict(counts),
            "settings": _settings_text(frun), "code_version": frun.params.get("code_version", ""),
            "channel": frun.params.get("channel") or ANSWER}


def _settings_text(frun: FaithfulnessRun) -> str:
    d = frun.params.get("decoding", {})
    return (f"mode {frun.mode}; temperature {d.get('temperature')}, seed {d.get('seed')}, top_p {d.get('top_p')}; "
            f"cap = original completion tokens + {d.get('slack_tokens')} (else max_tokens {d.get('max_tokens')})")


def anytime_summary(frun: FaithfulnessRun) -> dict[str, Any]:
    grid = any_core.parse_grid(frun.grid)
    table: dict[int, list[bool | None]] = {}
    own: dict[int, int] = defaultdict(int)
    pending = 0
    for trace, pos, correct, within, status in frun.points.values_list("trace_id", "position", "correct", "within",
                                                                        "status"):
        table.setdefault(trace, [None] * len(grid.budgets))[pos] = correct if status == Status.OK else None
        own[pos] += within
        pending += status == Status.PENDING
    acc = any_core.accuracy(list(table.values())) or [None] * len(grid.budgets)
    points = [{"budget": label, "acc": a, "own_answer": own[i]} for i, (label, a) in enumerate(zip(
        grid.labels(), acc, strict=True))]
    return {"points": points, "run": frun.pk, "grid": grid.spec, "unit": grid.unit, "labels": grid.labels(), "acc": acc,
            "auc": any_core.auc_any(acc), "n": len(table), "own_answer": [own[i] for i in range(len(grid.budgets))],
            "pending": pending, "mode": frun.mode, "model": frun.subject.name,
            "code_version": frun.params.get("code_version", ""), "channel": frun.params.get("channel") or ANSWER}


def steps_vs_difficulty(study: Study, model: str) -> list[dict[str, Any]]:
    """Per trace: steps used against difficulty (the skeleton length, L_gold; 0 = no skeleton)."""
    return [{"trace": tid, "difficulty": l_gold, "steps": n, "correct": c}
            for tid, l_gold, n, c in Trace.objects.filter(study=study, model=model).own().order_by("pk").values_list(
                "trace_id", "problem__l_gold", "n_steps", "answer_correct")]


def _labels(study: Study, models: list[str] | None = None) -> dict[tuple[str, str], dict[int, dict[int, tuple]]]:
    """(verifier kind, verifier name) -> trace pk -> step index -> (verdict, skeleton refs)."""
    judges = {j.pk: j for j in JudgeConfig.objects.filter(study=study)}
    qs = StepLabel.objects.filter(step__trace__study=study)
    if models is not None:
        qs = qs.filter(step__trace__model__in=models)
    out: dict[tuple[str, str], dict[int, dict[int, tuple]]] = defaultdict(lambda: defaultdict(dict))
    # Skeleton references are read only where a label has some (a second, small query): decoding
    # a JSON list for every label is most of the time of a large study's report.
    refs: dict[int, list[int]] = dict(qs.exclude(skeleton_refs=[]).values_list("pk", "skeleton_refs"))
    for pk, trace, index, kind, judge, verdict in qs.order_by("pk").values_list(
            "pk", "step__trace_id", "step__index", "kind", "judge_id", "verdict"):
        if kind == StepLabel.Kind.JUDGE:
            j = judges.get(judge)
            if j is None:
                continue
            if j.provider == JudgeConfig.Provider.MECHANISTIC:
                key = (tier_core.MECHANISTIC, f"mechanistic verifier {j.name} v{j.version}")
            else:
                key = (tier_core.JUDGE, f"LLM judge {j.name} ({j.model or j.provider}, prompt v{j.prompt_version})")
        else:
            # Adjudicated verdicts win over the annotators' own; several annotators: the first label kept.
            key = (tier_core.HUMAN, "human labels (adjudicated where adjudicated)")
            if kind == StepLabel.Kind.HUMAN and index in out[key][trace]:
                continue
        out[key][trace][index] = (verdict, refs.get(pk) or [])
    return out


def _scalar(value: Any) -> Any:
    """A JSON scalar read as text (PostgreSQL's ->>) back as the number or boolean it was."""
    if isinstance(value, str):
        try:
            parsed = json.loads(value)
        except ValueError:
            return value
        return parsed if isinstance(parsed, (int, float, bool)) else value
    return value


@dataclass
class StudyData:
    traces: dict[str, list[tuple]]  # model -> (pk, n_steps, correct, l_gold, gold)
    regimes: dict[str, list[tuple[dict[str, Any], int]]]  # model -> (regime keys, traces with them)
    labels: dict[tuple[str, str], dict[int, dict[int, tuple]]]
    step_texts: dict[int, list[str]]


def _study_data(study: Study, model: str | None) -> StudyData:
    # The evidence counts the study's own traces: fidelity variants' traces belong to their suite.
    qs = Trace.objects.filter(study=study).own()
    if model:
        qs = qs.filter(model=model)
    traces: dict[str, list[tuple]] = defaultdict(list)
    for pk, m, n, c, l_gold, gold in qs.order_by("pk").values_list(
            "pk", "model", "n_steps", "answer_correct", "problem__l_gold", "problem__gold_answer"):
        traces[m].append((pk, n, c, l_gold, gold))
    # The report's regime keys, grouped in the database (per-sample keys such as messages_hash are left out).
    keys = (*tier_core.REGIME_KEYS, "max_steps")
    regimes: dict[str, list[tuple[dict[str, Any], int]]] = defaultdict(list)
    for row in qs.annotate(**{f"r_{k}": KT(f"regime__{k}") for k in keys}).values(
            "model", *(f"r_{k}" for k in keys)).annotate(n=Count("pk")).order_by():
        regimes[row["model"]].append(({k: _scalar(row[f"r_{k}"]) for k in keys}, row["n"]))
    steps: dict[int, list[str]] = defaultdict(list)
    for trace, text in Step.objects.filter(trace__in=qs).order_by("trace_id", "index").values_list("trace_id", "text"):
        steps[trace].append(text)
    return StudyData(traces, regimes, _labels(study, [model] if model else None), steps)


def validity_of(data: StudyData, model: str, policy: str) -> list[tier_core.Verifier]:
    out = []
    traces = data.traces.get(model, [])
    for (kind, name), per_trace in sorted(data.labels.items()):
        rows = []
        for pk, n, correct, *_rest in traces:
            if pk not in per_trace or n == 0:
                continue
            labels = per_trace[pk]
            rows.append(([labels.get(i, (None,))[0] for i in range(1, n + 1)], correct))
        if rows:
            out.append(tier_core.Verifier(kind, name, val_core.validity(rows, policy).as_dict()))
    order = {tier_core.MECHANISTIC: 0, tier_core.JUDGE: 1, tier_core.HUMAN: 2}
    return sorted(out, key=lambda v: (order[v.kind], v.name))


def halting_of(data: StudyData, model: str, slack: int = 0) -> dict[str, Any] | None:
    """k* from the skeleton references of the strongest label source with references (else none)
    and the first step stating the gold answer; None when no trace has a gold answer."""
    refs_source = next((per for (kind, _n), per in sorted(data.labels.items(),
                                                             key=lambda kv: kv[0][0] != tier_core.MECHANISTIC)
                        if any(r for steps in per.values() for _v, r in steps.values())), {})
    pairs = []
    with_skeleton = 0
    for pk, n, _c, l_gold, gold in data.traces.get(model, []):
        g = to_fraction((gold or "").strip().lstrip("$"))
        if g is None or n == 0:
            continue
        texts = data.step_texts.get(pk, [])
        labels = refs_source.get(pk, {})
        refs = [labels.get(i, (None, []))[1] for i in range(1, n + 1)]
        skeleton_len = l_gold if labels and l_gold else 0
        with_skeleton += bool(skeleton_len)
        pairs.append((halt_core.k_star(texts, g, refs, skeleton_len), n))
    if not pairs:
        return None
    rates = halt_core.halting_rates(pairs, slack).as_dict()
    rates["basis"] = (f"k* from skeleton references and the gold answer on {with_skeleton} traces, "
                      f"from the first step stating the gold answer on {len(pairs) - with_skeleton}")
    return rates


def evidence(study: Study, model: str | None = None, *, policy: str = val_core.EXCLUDE) -> list[tier_core.Evidence]:
    """What the study holds about each model (or one), for the tier and the report."""
    val_core.check_policy(policy)
    data = _study_data(study, model)
    ifr_runs = latest_runs(study, FaithfulnessRun.Kind.INTERVENTIONS)
    any_runs = FaithfulnessRun.objects.filter(subject__study=study, kind=FaithfulnessRun.Kind.ANYTIME) \
        .select_related("subject").order_by("-created_at", "-pk")
    anytime_by: dict[str, list[FaithfulnessRun]] = defaultdict(list)
    seen_grids: set[tuple[str, str]] = set()
    for frun in any_runs:
        if (frun.subject.name, frun.grid) not in seen_grids:  # the newest run per grid
            seen_grids.add((frun.subject.name, frun.grid))
            anytime_by[frun.subject.name].append(frun)
    tokens: dict[str, list[int]] = defaultdict(list)
    for name, n in Generation.objects.filter(subject__study=study, completion_tokens__isnull=False) \
            .values_list("subject__name", "completion_tokens"):
        tokens[name].append(n)
    mech = JudgeConfig.objects.filter(study=study, provider=JudgeConfig.Provider.MECHANISTIC).first()
    out = []
    for name in sorted(data.traces):
        rows = data.traces[name]
        ev = tier_core.Evidence(model=name, traces=len(rows), code_version=code_version())
        regime_vals: dict[str, list[Any]] = defaultdict(list)
        for regime, n in data.regimes.get(name, []):
            if any(v is not None for v in regime.values()):
                ev.with_regime += n
                for key, v in regime.items():
                    if v is not None and v not in regime_vals[key] and len(regime_vals[key]) < 20:
                        regime_vals[key].append(v)
        ev.regime = dict(regime_vals)
        checked = [c for _pk, _n, c, *_r in rows if c is not None]
        ev.accuracy = sum(checked) / len(checked) if checked else None
        ev.accuracy_n = len(checked)
        steps = [n for _pk, n, *_r in rows if n > 0]
        ev.with_steps = len(steps)
        if steps:
            ev.steps_mean, ev.steps_median, ev.steps_max = statistics.fmean(steps), statistics.median(steps), max(steps)
        if tokens.get(name):
            ev.tokens_mean = statistics.fmean(tokens[name])
        ev.verifiers = validity_of(data, name, policy)
        ev.ifr = ifr_of_runs(ifr_runs.get(name, []))
        ev.anytime = [anytime_summary(f) for f in anytime_by.get(name, [])]
        ev.halting = halting_of(data, name)
        ev.checker_version = f"mechanistic verifier {mech.name} v{mech.version}" if mech else None
        ev.artifact_format = f"ReasonAudit traces, steps segmented by {study.segmenter}"
        out.append(ev)
    return out


def tier_cards(study: Study) -> list[dict[str, Any]]:
    """The tier card of each model (the study's leaderboard shows these)."""
    cards = []
    for ev in evidence(study):
        t = tier_core.tier(ev)
        best = next((v.validity for v in ev.verifiers if v.kind == t.qualifier and v.validity.get("n")), None)
        cards.append({"model": ev.model, "level": t.level, "label": t.label, "complete": t.complete,
                      "qualifier": t.qualifier, "badges": t.badges, "text": t.text, "scope": t.scope,
                      "traces": ev.traces, "with_steps": ev.with_steps, "answer_accuracy": ev.accuracy,
                      "svr": best["svr"] if best else None, "vsr": best["vsr"] if best else None})
    return cards


def evidence_tier_cards(study: Study, rows: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """The registration hook of scoring.analytics (the leaderboard's tier card)."""
    return tier_cards(study)


FORMATS = ("md", "tex", "json")


def report(study: Study, model: str | None = None, fmt: str = "md", *, policy: str = val_core.EXCLUDE) -> str:
    if fmt not in FORMATS:
        raise ValueError(f"unknown report format {fmt!r}; choose {', '.join(FORMATS)}")
    evs = evidence(study, model, policy=policy)
    if model and not evs:
        names = ", ".join(sorted(set(Trace.objects.filter(study=study).values_list("model", flat=True)))) or "none"
        raise ValueError(f"no traces of model {model!r} in {study.name!r} (models: {names})")
    reps = [tier_core.template(ev) for ev in evs]
    if fmt == "json":
        return tier_core.to_json(reps)
    if fmt == "tex":
        return tier_core.to_latex(reps)
    return tier_core.to_markdown(reps, study.name)


def skipped_reasons(frun: FaithfulnessRun) -> dict[str, int]:
    out: dict[str, int] = defaultdict(int)
    for reason in frun.skipped.values():
        out[reason] += 1
    return dict(out)

