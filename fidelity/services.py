"""Every fidelity operation (docs/fidelity.md): suites of seeded variants, runs of a subject
model over a suite, and the report computed from the stored outputs. The web views, the
REST API, the exports and the ``fidelity`` command call these."""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from django.db import transaction

from annotation import access, jobs, scopes
from annotation.models import Job, Membership, Problem, SkeletonStep, Study, Trace
from fidelity import extractor
from fidelity.core import answer as A
from fidelity.core import complexity, explanation, instance_sets, logic, pairs
from fidelity.core import gold as G
from fidelity.core import variants as V
from fidelity.core.text import split_steps, tail_field
from fidelity.importing import IMPORT_KEY, SYMBOLIC_SOURCE
from fidelity.models import FidelityRun, Output, Suite, Variant
from fidelity.runclient import JOB_KIND, KIND
from reasonlib import selection
from runs import engine
from runs.engine import ACTIVE, Progress
from runs.params import check as check_param
from runs.params import check_cohort
from runs.version import code_version
from scoring.core.bootstrap import bootstrap_ci
from subjects.models import SubjectModel
from subjects.services import config_snapshot

AXES = ("perturbation", "counterfactual", "backward", "imported")
AXIS_STRATEGIES = {"perturbation": V.PERTURBATIONS, "counterfactual": V.COUNTERFACTUALS, "backward": (),
                   "imported": ()}
# Which variants a run over the axes asks about.
AXIS_OF_VARIANTS = {"perturbation": "perturbation", "counterfactual": "counterfactual", "imported": "imported"}
DEFAULT_AXES = "perturbation,counterfactual,backward"
VARIANT_TAG = "fidelity-variant"
BOOTSTRAP = {"n_resamples": 1000, "seed": 0, "level": 0.95}


# --------------------------------------------------------------------------
# Access


def check_run(user, run_id: int) -> tuple[FidelityRun, Membership]:
    return access.check_object(user, FidelityRun.objects.select_related("suite__study", "subject", "job", "run"),
                               run_id, study_path="suite__study_id", what="fidelity run")


def check_suite(user, suite_id: int) -> tuple[Suite, Membership]:
    return access.check_object(user, Suite.objects.select_related("study"), suite_id, study_path="study_id",
                               what="fidelity suite")


def parse_axes(text: str | list[str] | None) -> list[str]:
    items = text if isinstance(text, list) else [a.strip() for a in (text or DEFAULT_AXES).split(",") if a.strip()]
    unknown = [a for a in items if a not in AXES]
    if unknown or not items:
        raise ValueError(f"unknown axis {unknown[0] if unknown else '(none)'!r}; choose from {', '.join(AXES)}")
    return [a for a in AXES if a in items]


# --------------------------------------------------------------------------
# Suites and variants


def originals_of(study: Study):
    """The study's own problems: not variants of a suite, not imported variants (GSM-Plus, MenatQA updates)."""
    return Problem.objects.filter(study=study).own()  # the rule FidelityConfig.ready registers


def _squash(text: str) -> str:
    return " ".join((text or "").split()).lower()


@dataclass
class LinkReport:
    linked: int = 0
    unmatched: list[str] = field(default_factory=list)


@transaction.atomic
def link_imports(study: Study) -> LinkReport:
    """Link imported variant problems (``meta.fidelity_import``) to their originals -- by problem id
    (MenatQA) or by the original's statement (GSM-Plus ``seed_question``, whitespace and case
    ignored) -- as Variants of the suite named after the source. Idempotent."""
    pending = list(Problem.objects.filter(study=study, meta__has_key=IMPORT_KEY, fidelity_variant__isnull=True)
                   .order_by("problem_id"))
    out = LinkReport()
    if not pending:
        return out
    by_pid = dict(originals_of(study).values_list("problem_id", "pk"))
    by_text: dict[str, int] = {}
    for pk, statement in originals_of(study).values_list("pk", "statement"):
        by_text.setdefault(_squash(statement), pk)
    suites: dict[str, Suite] = {}
    counters: Counter[tuple[int, int, str]] = Counter()
    made = []
    for p in pending:
        info = p.meta[IMPORT_KEY]
        original = by_pid.get(info.get("original_problem_id", "")) or by_text.get(_squash(info.get("original_statement", "")))
        if original is None:
            out.unmatched.append(p.problem_id)
            continue
        source = str(info.get("source") or "imported")
        if source not in suites:
            suites[source], _ = Suite.objects.get_or_create(
                study=study, name=source, defaults={"generator_version": f"import:{source}", "strategies": []})
        suite = suites[source]
        strategy = str(info.get("strategy") or source)[:50]
        index = Variant.objects.filter(suite=suite, original_id=original, strategy=strategy).count() + counters[
            (suite.pk, original, strategy)]
        counters[(suite.pk, original, strategy)] += 1
        made.append(Variant(suite=suite, original_id=original, problem=p, axis=Variant.Axis.IMPORTED,
                            strategy=strategy, magnitude="", index=index, changes=[], gold=Variant.Gold.GIVEN))
    Variant.objects.bulk_create(made)
    for suite in suites.values():
        suite.strategies = sorted(set(Variant.objects.filter(suite=suite).values_list("strategy", flat=True)))
        suite.originals = Variant.objects.filter(suite=suite).values("original_id").distinct().count()
        suite.save(update_fields=["strategies", "originals"])
    out.linked = len(made)
    return out


def gold_checks(problem_ids: list[int]) -> dict[int, list[str | None]]:
    """The calculator chain of each problem: the step checks of its approved skeleton, else its newest one."""
    approved = dict(Problem.objects.filter(pk__in=problem_ids).values_list("pk", "approved_skeleton_id"))
    best: dict[int, tuple[int, int]] = {}  # problem -> (rank, skeleton id)
    steps: dict[int, list[tuple[int, str]]] = defaultdict(list)
    for pid, sk, ver, pos, check in SkeletonStep.objects.filter(skeleton__problem_id__in=problem_ids).values_list(
        "skeleton__problem_id", "skeleton_id", "skeleton__version", "position", "check_expr"
    ):
        rank = (1 if approved.get(pid) == sk else 0, ver)
        if pid not in best or rank > best[pid][0]:
            best[pid] = (rank, sk)
            steps[pid] = []
        if best[pid][1] == sk:
            steps[pid].append((pos, check))
    return {pid: [c or None for _p, c in sorted(v)] for pid, v in steps.items()}


def gold_paths(problem_ids: list[int]) -> dict[int, list[str]]:
    """The gold path τ (spec §1 [I]): the steps of the problem's approved (else newest) skeleton."""
    approved = dict(Problem.objects.filter(pk__in=problem_ids).values_list("pk", "approved_skeleton_id"))
    best: dict[int, tuple[tuple[int, int], int]] = {}
    steps: dict[int, list[tuple[int, str]]] = defaultdict(list)
    for pid, sk, ver, pos, text in SkeletonStep.objects.filter(skeleton__problem_id__in=problem_ids).values_list(
        "skeleton__problem_id", "skeleton_id", "skeleton__version", "position", "text"
    ):
        rank = (1 if approved.get(pid) == sk else 0, ver)
        if pid not in best or rank > best[pid][0]:
            best[pid] = (rank, sk)
            steps[pid] = []
        if best[pid][1] == sk:
            steps[pid].append((pos, text))
    return {pid: [t for _p, t in sorted(v)] for pid, v in steps.items()}


@dataclass
class SuiteReport:
    suite: Suite
    created: int
    existing: int
    skipped: dict[str, int] = field(default_factory=dict)
    derived: int = 0  # made by this call
    unknown: int = 0
    derived_total: int = 0  # in the whole suite
    unknown_total: int = 0


def variant_problem_id(original: str, suite: str, strategy: str, index: int) -> str:
    return f"{original}~{suite}~{strategy}~{index}"


@transaction.atomic
def do_create_suite(study: Study, name: str, *, axes: list[str], per_problem: int = 1, problems: str = "all",
                    seed: int = 0, user=None) -> SuiteReport:
    """Create (or extend) the named suite: for every selected original and every strategy of the
    axes, ``per_problem`` seeded variants, each a Problem linked by a Variant. Counterfactual
    golds are derived through the calculator chain where possible. A problem with nothing to
    modify is skipped with the reason (counted). Existing variants are kept as they are."""
    per_problem = check_param("per_problem", per_problem)
    seed = check_param("seed", seed)
    strategies = [s for a in axes for s in AXIS_STRATEGIES[a]]
    suite, _ = Suite.objects.get_or_create(
        study=study, name=name,
        defaults={"seed": seed, "strategies": strategies, "per_problem": per_problem, "problems_filter": problems,
                  "generator_version": V.VERSION, "created_by": user})
    ordered = list(originals_of(study).order_by("problem_id").values_list("problem_id", "pk", "statement",
                                                                          "gold_answer", "domain"))
    chosen = set(selection.select(problems, [r[0] for r in ordered]))
    rows = [r for r in ordered if r[0] in chosen]
    have = set(Variant.objects.filter(suite=suite).values_list("original_id", "strategy", "index"))
    checks = gold_checks([r[1] for r in rows]) if any(s in V.COUNTERFACTUALS for s in strategies) else {}
    entities = V.entities_of([r[2] for r in ordered])
    report = SuiteReport(suite, 0, 0)
    skipped: Counter[str] = Counter()  # skips are deterministic: counted afresh over this selection
    new_problems: list[Problem] = []
    new_variants: list[dict[str, Any]] = []
    for pid, pk, statement, gold, domain in rows:
        for strategy in strategies:
            for k in range(per_problem):
                if (pk, strategy, k) in have:
                    report.existing += 1
                    continue
                v = V.make_variant(statement, strategy, V.seed_for(suite.seed, pid, strategy, k), entities)
                if isinstance(v, V.Skip):
                    skipped[f"{strategy}: {v.reason}"] += 1
                    continue
                axis = Variant.Axis.COUNTERFACTUAL if strategy in V.COUNTERFACTUALS else Variant.Axis.PERTURBATION
                new_gold, status, reason = gold, Variant.Gold.SAME, ""
                if axis == Variant.Axis.COUNTERFACTUAL:
                    d = G.derive(v.substitutions, gold, checks=checks.get(pk, []))
                    if d.derived:
                        new_gold, status = d.answer, Variant.Gold.DERIVED
                        report.derived += 1
                    else:
                        new_gold, status, reason = "", Variant.Gold.UNKNOWN, d.reason
                        report.unknown += 1
                vid = variant_problem_id(pid, suite.name, strategy, k)
                new_problems.append(Problem(
                    study=study, problem_id=vid, statement=v.text, gold_answer=new_gold or "", domain=domain,
                    tags=[VARIANT_TAG, strategy],
                    meta={"fidelity": {"suite": suite.name, "original": pid, "strategy": strategy,
                                       "magnitude": v.magnitude, "gold": status}}))
                new_variants.append({"original_id": pk, "axis": axis, "strategy": strategy, "magnitude": v.magnitude,
                                     "index": k, "changes": [c.to_dict() for c in v.changes], "gold": status,
                                     "gold_reason": reason[:300]})
    # A problem id already taken (a suite deleted while its variant problems stayed) is not made twice.
    taken = set()
    for start in range(0, len(new_problems), 500):
        taken |= set(Problem.objects.filter(study=study, problem_id__in=[
            p.problem_id for p in new_problems[start:start + 500]]).values_list("problem_id", flat=True))
    kept = [(p, f) for p, f in zip(new_problems, new_variants, strict=True) if p.problem_id not in taken]
    new_problems, new_variants = [p for p, _ in kept], [f for _, f in kept]
    Problem.objects.bulk_create(new_problems, batch_size=1000)
    made = {p.problem_id: p.pk for p in new_problems}
    Variant.objects.bulk_create([Variant(suite=suite, problem_id=made[p.problem_id], **fields)
                                 for p, fields in zip(new_problems, new_variants, strict=True)], batch_size=1000)
    report.created = len(new_problems)
    suite.skipped = {k: max(int((suite.skipped or {}).get(k, 0)), skipped.get(k, 0))
                     for k in set(suite.skipped or {}) | set(skipped)}
    suite.originals = len(rows) if not suite.originals else max(suite.originals, len(rows))
    order = {name: i for i, name in enumerate(V.STRATEGIES)}  # imported suites hold the dataset's own names
    suite.strategies = sorted(set(suite.strategies) | set(strategies), key=lambda x: (order.get(x, len(order)), x))
    suite.save(update_fields=["skipped", "originals", "strategies"])
    report.skipped = dict(skipped)
    totals = Counter(Variant.objects.filter(suite=suite, axis=Variant.Axis.COUNTERFACTUAL).values_list("gold", flat=True))
    report.derived_total, report.unknown_total = totals[Variant.Gold.DERIVED], totals[Variant.Gold.UNKNOWN]
    return report


# --------------------------------------------------------------------------
# Runs


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


def do_start_run(suite: Suite, subject: SubjectModel, *, axes: list[str], problems: str = "all", force: bool = False,
                 budget_usd: float | None = None, user=None, queue: bool = True, cohort: str = "") -> FidelityRun:
    """The job, the engine's run and the FidelityRun; the first chunk queued after commit."""
    if subject.study_id != suite.study_id:
        raise ValueError("the subject model belongs to another study")
    cohort = check_cohort(suite.study, cohort)
    originals, variants = run_items(suite, axes, problems, cohort)

    def busy() -> str | None:
        active = active_runs(subject).first()
        return active and (f"subject model {subject.name} already has fidelity run {active.pk} in progress "
                           f"(job {active.job_id}); wait for it or cancel it")

    def record(job: Job, run) -> FidelityRun:
        return FidelityRun.objects.create(suite=suite, subject=subject, job=job, run=run, axes=axes,
                                          config_version=subject.version)

    config = {**config_snapshot(subject), "originals": originals, "axes": axes,
              "backward_prompt_version": 1, "code_version": code_version()}
    return engine.start(
        KIND, study_id=suite.study_id, job_kind=JOB_KIND, user=user, busy=busy, record=record,
        items=originals + variants, force=force, budget_usd=budget_usd, config=config, queue=queue,
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

    def busy() -> str | None:
        active = active_runs(subject).first()
        return active and (f"subject model {subject.name} already has fidelity run {active.pk} in progress "
                           f"(job {active.job_id}); wait for it or cancel it")

    def record(job: Job, run) -> FidelityRun:
        return FidelityRun.objects.create(suite=suite, subject=subject, job=job, run=run, axes=axes,
                                          config_version=subject.version)

    config = {**config_snapshot(subject), "originals": [], "axes": axes, "backward_prompt_version": 1,
              "code_version": code_version(), "plan": {"per_problem": per_problem, "problems": problems, "seed": seed,
                                                        "cohort": cohort}}
    return engine.start(
        KIND, study_id=study.pk, job_kind=JOB_KIND, user=user, busy=busy, record=record, items=None,
        force=force, budget_usd=budget_usd, config=config, queue=queue,
        params={"suite": suite.name, "subject_model": subject.name, "axes": axes, "problems": problems,
                "per_problem": per_problem, "seed": seed, "cohort": cohort})


def plan_run_items(fid_run: FidelityRun) -> list[int]:
    """The planning of a queued fidelity run, in its job: the suite's variants (do_create_suite), then
    the originals and variants the run asks about. The suite's report goes into the job's params."""
    run = fid_run.run
    plan = run.config["plan"]
    made = do_create_suite(fid_run.suite.study, fid_run.suite.name, axes=fid_run.axes, per_problem=plan["per_problem"],
                           problems=plan["problems"], seed=plan["seed"], user=fid_run.job.created_by)
    originals, variants = run_items(made.suite, fid_run.axes, plan["problems"], plan.get("cohort", ""))
    run.config = {**run.config, "originals": originals}
    run.save(update_fields=["config"])
    job = Job.objects.get(pk=fid_run.job_id)
    job.params["suite_report"] = {"variants_created": made.created, "variants_kept": made.existing,
                                  "golds_derived": made.derived, "golds_unknown": made.unknown,
                                  "skipped": made.skipped}
    job.save(update_fields=["params"])
    return originals + variants


def run_inline(fid_run: FidelityRun, *, progress: Progress | None = None) -> Job:
    return engine.run_inline(fid_run.run, progress=progress)


def cancel(fid_run: FidelityRun) -> Job:
    return jobs.cancel(fid_run.job)


# --------------------------------------------------------------------------
# The report


@dataclass
class ItemView:
    """One original with its forward/backward outputs and its variants' outputs."""

    problem: Problem
    hops: complexity.Hops
    forward: Output | None
    backward: Output | None
    variants: list[tuple[Variant, Output | None]]
    metrics: dict[str, Any]


def _output(o: Output | None, gold: str | None, gold_steps: tuple[str, ...]) -> pairs.Output | None:
    if o is None:
        return None
    ans = o.trace.answer if o.trace_id and o.trace else None
    return pairs.Output(o.text, ans or None, tuple(split_steps(o.text)), gold or None, gold_steps)


def _ci(values: list[float]) -> list[float] | None:
    ci = bootstrap_ci(values, n_resamples=BOOTSTRAP["n_resamples"], seed=BOOTSTRAP["seed"], level=BOOTSTRAP["level"])
    return [ci[0], ci[1]] if ci else None


def _summary(values: list[float]) -> dict[str, Any]:
    return {"n": len(values), "mean": (sum(values) / len(values)) if values else None, "ci": _ci(values)}


ITEM_METRICS = ("em", "f1", "bleu", "cot_em", "step_sim", "faithfulness", "plausibility", "plausibility_clipped",
                "hallucination", "confidence", "consistency", "t_hat", "t_hat_backward", "forward_steps",
                "backward_steps", "hop_graded")


def item_metrics(question: str, gold: str, gold_steps: tuple[str, ...], fwd: pairs.Output,
                 bwd_text: str | None, hops: complexity.Hops, llm_forms: list | None = None) -> dict[str, Any]:
    """Every per-item metric of spec §3, §4, §6, §7 for one original (``llm_forms``: the LLM
    extractor's forms of the forward steps; the heuristic's otherwise)."""
    f = explanation.faithfulness(question, fwd.text, fwd.answer, fwd.steps)
    p = explanation.plausibility(question, fwd.text)
    forms = llm_forms if llm_forms is not None else logic.extract_all(fwd.steps)
    t = logic.transitivity(forms)
    m: dict[str, Any] = {
        "em": A.exact_match(fwd.answer, gold), "f1": A.f1(fwd.answer, gold), "bleu": A.bleu(fwd.answer, gold),
        "cot_em": A.cot_em(fwd.steps, gold_steps) if gold_steps else None,
        "step_sim": A.step_similarity(fwd.steps, gold_steps) if gold_steps else None,
        "faithfulness": f.score, "plausibility": p.score, "plausibility_clipped": p.clipped,
        "hallucination": int(explanation.hallucinated(f.score, p.score)),
        "confidence": explanation.confidence(fwd.answer, fwd.steps, fwd.text),
        "t_hat": t.adjusted, "too_short": t.too_short, "forward_steps": len(fwd.steps),
        "hop_graded": hops.graded, "faithfulness_parts": f.to_dict(), "plausibility_parts": p.to_dict(),
        "forms": [x.to_dict() for x in forms], "graph": logic.graph(forms).to_dict(),
        "consistency": None, "t_hat_backward": None, "backward_steps": None, "backward_question": None,
    }
    if bwd_text is not None:
        bsteps = split_steps(bwd_text)
        m["consistency"] = logic.consistency(fwd.steps, bsteps)
        m["t_hat_backward"] = logic.transitivity(logic.extract_all(bsteps)).adjusted
        m["backward_steps"] = len(bsteps)
        m["backward_question"] = tail_field(bwd_text, "question")
    return m


@dataclass
class Report:
    fid_run: FidelityRun
    items: list[ItemView]
    overall: dict[str, dict[str, Any]]
    by_hops: dict[str, dict[str, dict[str, Any]]]
    perturbation: list[pairs.PerturbationRow]
    counterfactual: pairs.CounterfactualTable | None
    cf_pairs: list[tuple[Variant, pairs.CounterfactualPair]]
    summary: dict[str, Any]
    provenance: dict[str, Any]


def report(fid_run: FidelityRun) -> Report:
    """Everything the report page, the API and the exports show, from the stored outputs."""
    suite = fid_run.suite
    outputs = {(o.problem_id, o.role): o for o in Output.objects.filter(fid_run=fid_run).select_related("trace")}
    originals = list(fid_run.run.config.get("originals", []))
    problems = {p.pk: p for p in Problem.objects.filter(pk__in=originals)}
    variants = list(Variant.objects.filter(suite=suite, original_id__in=originals)
                    .select_related("problem").order_by("original__problem_id", "strategy", "index"))
    paths = gold_paths(originals)
    by_original: dict[int, list[Variant]] = defaultdict(list)
    for v in variants:
        by_original[v.original_id].append(v)
    items: list[ItemView] = []
    form_sources: Counter[str] = Counter()
    pert_pairs: dict[str, list[tuple[pairs.Output, pairs.Output]]] = defaultdict(list)
    cf: list[tuple[Variant, pairs.CounterfactualPair]] = []
    for pk in originals:
        p = problems.get(pk)
        if p is None:
            continue
        # MenatQA keeps the bare question in meta (the statement carries the context too).
        hops = complexity.hops((p.meta or {}).get("question") or p.statement, (p.meta or {}).get("time_scope"))
        gsteps = tuple(paths.get(pk, []))
        fo, bo = outputs.get((pk, Output.Role.FORWARD)), outputs.get((pk, Output.Role.BACKWARD))
        base = _output(fo, p.gold_answer, gsteps)
        llm, source = extractor.forms_of(fo, len(base.steps)) if base else (None, "")
        if source:
            form_sources[source] += 1
        metrics = item_metrics(p.statement, p.gold_answer, gsteps, base, bo.text if bo else None, hops,
                               llm) if base else {}
        vlist = []
        for v in by_original.get(pk, []):
            vo = outputs.get((v.problem_id, Output.Role.FORWARD))
            vlist.append((v, vo))
            var = _output(vo, v.problem.gold_answer, gsteps)
            if base is None or var is None:
                continue
            if v.axis == Variant.Axis.PERTURBATION:
                pert_pairs[v.strategy].append((base, var))
            elif v.axis == Variant.Axis.COUNTERFACTUAL:
                new_values = [V.number_value(c["new"]) for c in v.changes]
                cf.append((v, pairs.counterfactual_pair(
                    base, var, new_values, strategy=v.strategy, magnitude=v.magnitude, complexity=hops.category,
                    gold_known=v.gold == Variant.Gold.DERIVED)))
        items.append(ItemView(p, hops, fo, bo, vlist, metrics))
    scored = [i for i in items if i.metrics]
    overall = {k: _summary([i.metrics[k] for i in scored if i.metrics.get(k) is not None]) for k in ITEM_METRICS}
    by_hops: dict[str, dict[str, dict[str, Any]]] = {}
    for cat in complexity.CATEGORIES:
        group = [i for i in scored if i.hops.category == cat]
        if group:
            by_hops[cat] = {k: _summary([i.metrics[k] for i in group if i.metrics.get(k) is not None])
                            for k in ITEM_METRICS}
    rows = pairs.rank(pairs.perturbation_row(V.LABELS[s], ps) for s, ps in pert_pairs.items())
    table = pairs.counterfactual_table([c for _v, c in cf]) if cf else None
    cons, that = overall["consistency"]["mean"], overall["t_hat"]["mean"]
    derived = sum(1 for v in variants if v.gold == Variant.Gold.DERIVED)
    unknown = sum(1 for v in variants if v.gold == Variant.Gold.UNKNOWN)
    summary = {
        "consistency": cons, "transitivity": that, "overall_reasoning": logic.overall_reasoning(cons, that),
        "robustness_mean": (sum(r.robustness for r in rows) / len(rows)) if rows else None,
        "cp_value": table.overall.cp_value if table else None, "cp_diff": table.overall.cp_diff if table else None,
        "ra": table.overall.ra if table else None, "aa": table.overall.aa if table else None,
        "sc": table.overall.sc if table else None, "pairs": table.overall.n if table else 0,
        "golds_derived": derived, "golds_unknown": unknown,
        "forward_steps_mean": overall["forward_steps"]["mean"], "backward_steps_mean": overall["backward_steps"]["mean"],
        "hallucination_rate": overall["hallucination"]["mean"], "faithfulness_mean": overall["faithfulness"]["mean"],
        "plausibility_mean": overall["plausibility"]["mean"],
    }
    cfg = fid_run.run.config
    provenance = {
        "subject_model": fid_run.subject.name, "subject_model_version": fid_run.config_version,
        "model": cfg.get("model"), "temperature": cfg.get("temperature"), "seed": cfg.get("seed"),
        "max_tokens": cfg.get("max_tokens"), "prompt_template": f"{cfg.get('template_name')} v{cfg.get('template_version')}",
        "backward_prompt_version": cfg.get("backward_prompt_version"), "suite": suite.name, "suite_seed": suite.seed,
        "generator_version": suite.generator_version, "code_version": cfg.get("code_version") or code_version(),
        "semantic_similarity": pairs.SEMSIM_METHOD,
        "logical_forms": "; ".join([f"{n} by {name}" for name, n in form_sources.items()]
                                   + [f"{len([i for i in items if i.metrics]) - sum(form_sources.values())} by the "
                                      f"heuristic (fidelity.core.logic)"]),
        "bootstrap": BOOTSTRAP,
    }
    return Report(fid_run, items, overall, by_hops, rows, table, cf, summary, provenance)


def runs_of_suite(suite: Suite):
    return FidelityRun.objects.filter(suite=suite).select_related("subject", "job", "run").order_by("subject__name", "pk")


def trace_numbers(text: str) -> set[Fraction]:
    return pairs.numbers_in(text)


# --------------------------------------------------------------------------
# Plain data for the API and the exports

ROW_COLUMNS = ["run", "suite", "subject_model", "subject_model_version", "role", "problem_id", "original_id", "axis",
               "strategy", "magnitude", "hop_category", "hop_graded", "gold", "gold_status", "answer", "em", "f1",
               "bleu", "cot_em", "step_sim", "faithfulness", "plausibility", "hallucination", "confidence",
               "consistency", "t_hat", "forward_steps", "backward_steps", "cp_value", "cp_diff", "ra", "aa",
               "aa_strict", "sc", "changes", "question", "text"]


def _answer(o: Output | None) -> str | None:
    return (o.trace.answer or None) if o is not None and o.trace_id and o.trace else None


def item_rows(rep: Report) -> list[dict[str, Any]]:
    """One row per original (its metrics) and one per variant (its pair indicators)."""
    fr = rep.fid_run
    head = {"run": fr.pk, "suite": fr.suite.name, "subject_model": fr.subject.name,
            "subject_model_version": fr.config_version}
    cf = {v.pk: c for v, c in rep.cf_pairs}
    rows: list[dict[str, Any]] = []
    for i in rep.items:
        m = i.metrics
        rows.append({**head, "role": "original", "problem_id": i.problem.problem_id, "original_id": i.problem.problem_id,
                     "axis": "", "strategy": "", "magnitude": "", "hop_category": i.hops.category,
                     "hop_graded": i.hops.graded, "gold": i.problem.gold_answer, "gold_status": "given",
                     "answer": _answer(i.forward), **{k: m.get(k) for k in (
                         "em", "f1", "bleu", "cot_em", "step_sim", "faithfulness", "plausibility", "hallucination",
                         "confidence", "consistency", "t_hat", "forward_steps", "backward_steps")},
                     "changes": [], "question": i.problem.statement, "text": i.forward.text if i.forward else None})
        for v, out in i.variants:
            c = cf.get(v.pk)
            rows.append({**head, "role": "variant", "problem_id": v.problem.problem_id,
                         "original_id": i.problem.problem_id, "axis": v.axis, "strategy": v.strategy,
                         "magnitude": v.magnitude, "hop_category": i.hops.category, "hop_graded": i.hops.graded,
                         "gold": v.problem.gold_answer or None, "gold_status": v.gold, "answer": _answer(out),
                         "em": A.exact_match(_answer(out), v.problem.gold_answer) if v.problem.gold_answer else None,
                         "cp_value": c.cp_value if c else None, "cp_diff": c.cp_diff if c else None,
                         "ra": c.ra if c else None, "aa": c.aa if c else None, "aa_strict": c.aa_strict if c else None,
                         "sc": c.sc if c else None, "changes": v.changes, "question": v.problem.statement,
                         "text": out.text if out else None})
    return rows


def report_data(rep: Report) -> dict[str, Any]:
    """The report as JSON-ready data (REST)."""
    t = rep.counterfactual
    return {
        "run": rep.fid_run.pk, "suite": rep.fid_run.suite.name, "subject_model": rep.fid_run.subject.name,
        "status": rep.fid_run.job.status, "axes": rep.fid_run.axes, "summary": rep.summary,
        "perturbation": [r.to_dict() for r in rep.perturbation],
        "counterfactual": None if t is None else {
            "overall": t.overall.to_dict(), "by_strategy": [r.to_dict() for r in t.by_strategy],
            "by_magnitude": [r.to_dict() for r in t.by_magnitude],
            "by_complexity": [r.to_dict() for r in t.by_complexity]},
        "overall": rep.overall, "by_hops": rep.by_hops, "provenance": rep.provenance,
    }


# --------------------------------------------------------------------------
# Performance drop rate (GSM-Plus style), on imported or generated traces


def pdr(study: Study, model: str, *, suite: Suite | None = None) -> list[pairs.PdrRow]:
    """Per perturbation type (the variant's strategy): accuracy on the seeds and on the variants of
    ``model``'s traces, PDR = 1 - acc(variant)/acc(original), and the seed-vs-variant confusion
    table. A pair counts when both problems have a trace of the model (the first of each problem
    by id; any source: imported or generated); a trace is correct when its answer was checked right."""
    variants = Variant.objects.filter(suite__study=study)
    if suite is not None:
        variants = variants.filter(suite=suite)
    links = list(variants.values_list("original_id", "problem_id", "strategy"))
    wanted = {pk for o, v, _s in links for pk in (o, v)}
    correct: dict[int, bool] = {}
    # [I] accuracy counts a trace without an extracted answer (answer_correct unknown) as not correct.
    for problem, ok in (Trace.objects.filter(study=study, model=model, problem_id__in=wanted)
                        .order_by("problem_id", "trace_id").values_list("problem_id", "answer_correct")):
        correct.setdefault(problem, ok is True)
    return pairs.pdr_rows((s, correct[o], correct[v]) for o, v, s in links if o in correct and v in correct)


# --------------------------------------------------------------------------
# Imported traces alone (spec §12: what needs no new generation)


def imported_rows(study: Study, model: str = "", limit: int | None = None) -> list[dict[str, Any]]:
    """Per-trace metrics of the study's traces (of ``model``, or every model) with no run at all:
    hops, EM/F1/BLEU, CoT-EM and step similarity against the skeleton, F, P, hallucination,
    confidence and T̂ of the forward trace. No consistency (it needs a backward trace)."""
    traces = Trace.objects.filter(study=study).select_related("problem").order_by("model", "problem__problem_id", "pk")
    if model:
        traces = traces.filter(model=model)
    if limit:
        traces = traces[:limit]
    traces = list(traces)
    paths = gold_paths(sorted({t.problem_id for t in traces}))
    rows = []
    for t in traces:
        p = t.problem
        hops = complexity.hops((p.meta or {}).get("question") or p.statement, (p.meta or {}).get("time_scope"))
        gsteps = tuple(paths.get(p.pk, []))
        out = pairs.Output(t.raw, t.answer or None, tuple(split_steps(t.raw)), p.gold_answer or None, gsteps)
        m = item_metrics(p.statement, p.gold_answer, gsteps, out, None, hops)
        rows.append({"run": None, "suite": "", "subject_model": t.model, "subject_model_version": None,
                     "role": "imported", "problem_id": p.problem_id, "original_id": p.problem_id, "axis": "",
                     "strategy": "", "magnitude": "", "hop_category": hops.category, "hop_graded": hops.graded,
                     "gold": p.gold_answer, "gold_status": "given", "answer": t.answer or None,
                     **{k: m.get(k) for k in ("em", "f1", "bleu", "cot_em", "step_sim", "faithfulness", "plausibility",
                                              "hallucination", "confidence", "consistency", "t_hat", "forward_steps",
                                              "backward_steps")},
                     "changes": [], "question": p.statement, "text": t.raw})
    return rows


# --------------------------------------------------------------------------
# GSM-Symbolic: accuracy as a distribution over instance sets


def _symbolic_problems(study: Study) -> dict[int, dict[str, Any]]:
    """pk -> ``meta.fidelity_import`` of the study's imported GSM-Symbolic problems."""
    return {pk: meta[IMPORT_KEY] for pk, meta in Problem.objects.filter(
        study=study, meta__has_key=IMPORT_KEY).values_list("pk", "meta")
        if (meta or {}).get(IMPORT_KEY, {}).get("source") == SYMBOLIC_SOURCE}


def symbolic_models(study: Study) -> list[str]:
    """The models with a trace of an imported GSM-Symbolic problem."""
    return sorted(set(Trace.objects.filter(study=study, problem_id__in=list(_symbolic_problems(study)))
                      .values_list("model", flat=True)))


def symbolic_accuracy(study: Study, model: str) -> dict[str, instance_sets.Distribution]:
    """Per GSM-Symbolic variant (symbolic, p1, p2): the distribution of ``model``'s accuracy over the
    instance sets (fidelity.core.instance_sets), from the first trace of each imported instance (by
    trace id; a trace without a checked answer counts as wrong, as in ``pdr``)."""
    problems = _symbolic_problems(study)
    first: dict[int, bool] = {}
    for problem, ok in (Trace.objects.filter(study=study, model=model, problem_id__in=list(problems))
                        .order_by("problem_id", "trace_id").values_list("problem_id", "answer_correct")):
        first.setdefault(problem, ok is True)
    by_variant: dict[str, list[tuple[str, int, bool]]] = defaultdict(list)
    for pk, ok in first.items():
        info = problems[pk]
        by_variant[str(info.get("strategy"))].append((str(info.get("template")), int(info.get("instance", 0)), ok))
    return {v: instance_sets.distribution(rows) for v, rows in sorted(by_variant.items())}
