"""Fidelity suites (docs/fidelity.md): the axes, seeded variants of a study's problems stored as
problems (Variant links), imported variants linked to their originals, and the golds of both.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

from django.db import transaction

from annotation import access
from annotation.models import Membership, Problem, SkeletonStep, Study
from fidelity.core import gold as G
from fidelity.core import variants as V
from fidelity.importing import IMPORT_KEY
from fidelity.models import Suite, Variant
from reasonlib import selection
from runs.params import check as check_param

AXES = ("perturbation", "counterfactual", "backward", "imported")
AXIS_STRATEGIES = {"perturbation": V.PERTURBATIONS, "counterfactual": V.COUNTERFACTUALS, "backward": (),
                   "imported": ()}
# Which variants a run over the axes asks about.
AXIS_OF_VARIANTS = {"perturbation": "perturbation", "counterfactual": "counterfactual", "imported": "imported"}
DEFAULT_AXES = "perturbation,counterfactual,backward"
VARIANT_TAG = "fidelity-variant"


def check_suite(user, suite_id: int) -> tuple[Suite, Membership]:
    return access.check_object(user, Suite.objects.select_related("study"), suite_id, study_path="study_id",
                               what="fidelity suite")


def parse_axes(text: str | list[str] | None) -> list[str]:
    items = text if isinstance(text, list) else [a.strip() for a in (text or DEFAULT_AXES).split(",") if a.strip()]
    unknown = [a for a in items if a not in AXES]
    if unknown or not items:
        raise ValueError(f"unknown axis {unknown[0] if unknown else '(none)'!r}; choose from {', '.join(AXES)}")
    return [a for a in AXES if a in items]


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


def _gold_skeleton_steps(problem_ids: list[int], field: str) -> dict[int, list[str]]:
    """``field`` of each step of each problem's approved skeleton, else its newest one, in order.
    A skeleton's rank is fixed, so one that is not the best at its first row never becomes it."""
    approved = dict(Problem.objects.filter(pk__in=problem_ids).values_list("pk", "approved_skeleton_id"))
    best: dict[int, tuple[tuple[int, int], int]] = {}  # problem -> ((approved, version), skeleton id)
    steps: dict[int, list[tuple[int, str]]] = defaultdict(list)
    for pid, sk, ver, pos, value in SkeletonStep.objects.filter(skeleton__problem_id__in=problem_ids).values_list(
        "skeleton__problem_id", "skeleton_id", "skeleton__version", "position", field
    ):
        rank = (1 if approved.get(pid) == sk else 0, ver)
        if pid not in best or rank > best[pid][0]:
            best[pid] = (rank, sk)
            steps[pid] = []
        if best[pid][1] == sk:
            steps[pid].append((pos, value))
    return {pid: [v for _p, v in sorted(rows)] for pid, rows in steps.items()}


def gold_checks(problem_ids: list[int]) -> dict[int, list[str | None]]:
    """The calculator chain of each problem: the step checks of its approved skeleton, else its newest one."""
    return {pid: [c or None for c in checks] for pid, checks in _gold_skeleton_steps(problem_ids, "check_expr").items()}


def gold_paths(problem_ids: list[int]) -> dict[int, list[str]]:
    """The gold path τ (spec §1 [I]): the steps of the problem's approved (else newest) skeleton."""
    return _gold_skeleton_steps(problem_ids, "text")


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
