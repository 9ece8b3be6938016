"""Skeleton authoring: versions, approval, and the live check of a step's
``check`` expression.

A skeleton version is never edited: saving makes version ``n + 1`` (a
draft), approving a version points the problem at it and sets ``L_gold``.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass

from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from annotation import access, signals
from annotation.models import Membership, Problem, Skeleton, SkeletonStep, Study
from reasonlib.arithmetic import chain_claims, check_value, unlatex
from reasonlib.refusals import Invalid

# The paper's guidance: a skeleton lists the few assertions every correct
# solution must establish.
GUIDE_MIN, GUIDE_MAX = 2, 10
HARD_MAX = 30
TEXT_MAX = 2000
CHANGE_NOTE_MAX = 2000  # a version's "what changed and why"
CHECK_MAX = 500


class SkeletonError(Invalid):
    """Bad skeleton input; ``errors`` are (field, message) pairs."""

    def __init__(self, errors: list[tuple[str, str]]):
        super().__init__(errors=errors)


@dataclass(frozen=True)
class CheckResult:
    ok: bool
    message: str
    value: str | None = None  # the number the mechanistic judge will look for


def validate_check(expr: str | None) -> CheckResult:
    """Is ``expr`` a usable check? Exact arithmetic first (what the mechanistic
    judge evaluates), then sympy's LaTeX parser for a reason when it is not."""
    expr = (expr or "").strip()
    if not expr:
        return CheckResult(True, "no check (optional)")
    if len(expr) > CHECK_MAX:
        return CheckResult(False, f"too long ({len(expr)} characters; at most {CHECK_MAX})")
    if "=" not in expr:
        return CheckResult(False, "a check is an equation such as 16-3-4=9")
    inner = expr[2:-2] if expr.startswith("<<") and expr.endswith(">>") else expr
    sides = [side.strip() for side in inner.split("=")]
    if any(not side for side in sides):
        return CheckResult(False, "one side of the equation is empty")
    if all(check_value(side) is not None for side in sides):
        # Read as the judge reads a check's value: a bare equation chain.
        false = [c for c in chain_claims(unlatex(inner), "check") if not c.ok]
        if false:
            c = false[0]
            shown = _fmt(c.value) if c.value is not None else "undefined"
            return CheckResult(False, f"{c.lhs} is {shown}, not {c.rhs}")
        value = check_value(expr)
        return CheckResult(True, f"ok: the mechanistic judge looks for {_fmt(value)}", _fmt(value))
    # Not plain arithmetic: let sympy (through the LaTeX grammar, which never
    # evaluates code) say what it makes of each side.
    try:
        from latex2sympy2_extended import latex2sympy

        parsed = [latex2sympy(side) for side in sides]
    except Exception as exc:  # noqa: BLE001 - the parser's message is the answer
        lines = str(exc).strip().splitlines()
        reason = lines[0] if lines else type(exc).__name__
        if len(lines) >= 3 and "^" in lines[-1]:
            where = lines[-2][lines[-1].index("^"):][:20]
            reason += f' at "{where}"' if where.strip() else f' after "{lines[-2].strip()[-20:]}" (incomplete)'
        return CheckResult(False, "sympy cannot parse it: " + reason)
    if any(str(side) in ("zoo", "nan", "oo", "-oo") for side in parsed):
        return CheckResult(False, "a side is undefined (division by zero?)")
    symbols = sorted({str(sym) for side in parsed for sym in getattr(side, "free_symbols", ())})
    shown = " = ".join(map(str, parsed))
    if symbols:
        return CheckResult(False, f"sympy reads it as {shown}, with unknowns {', '.join(symbols)}; "
                                  "a check must compute a number")
    return CheckResult(False, f"sympy reads it as {shown}, which the mechanistic judge cannot evaluate exactly")


def _fmt(value) -> str:
    if value.denominator == 1:
        return str(value.numerator)
    d = value.denominator
    for p in (2, 5):
        while d % p == 0:
            d //= p
    if d == 1:  # a terminating decimal: show it exactly
        return f"{float(value):.15g}"
    return f"{value.numerator}/{value.denominator} ≈ {float(value):.6g}"


def clean_steps(steps: list[dict]) -> list[dict]:
    """Validate the steps of a new version: ``[{"text", "check"}]`` in order."""
    errors: list[tuple[str, str]] = []
    out = []
    for i, step in enumerate(steps, start=1):
        text = (step.get("text") or "").strip()
        check = (step.get("check") or "").strip()
        if not text:
            errors.append((f"steps[{i}].text", "an assertion needs text"))
            continue
        if len(text) > TEXT_MAX:
            errors.append((f"steps[{i}].text", f"at most {TEXT_MAX} characters"))
        if check:
            result = validate_check(check)
            if not result.ok:
                errors.append((f"steps[{i}].check", result.message))
        out.append({"text": text, "check": check})
    if not out and not errors:
        errors.append(("steps", "a skeleton needs at least one assertion"))
    if len(out) > HARD_MAX:
        errors.append(("steps", f"at most {HARD_MAX} assertions (the guidance is {GUIDE_MIN}-{GUIDE_MAX})"))
    if errors:
        raise SkeletonError(errors)
    return out


def guidance_warning(n: int) -> str:
    if n < GUIDE_MIN:
        return f"only {n} assertion{'s' if n != 1 else ''}: a skeleton usually needs {GUIDE_MIN}-{GUIDE_MAX}"
    if n > GUIDE_MAX:
        return f"{n} assertions: keep only the necessary ones ({GUIDE_MIN}-{GUIDE_MAX})"
    return ""


def can_approve(membership: Membership) -> bool:
    return access.can_adjudicate(membership)


@transaction.atomic
def do_save_skeleton(problem: Problem, user, steps: list[dict], *, note: str = "", approve: bool = False) -> Skeleton:
    """A new version from ``steps``; approved at once when ``approve``.

    Locks the problem row so two authors saving at once get versions n+1
    and n+2 rather than a unique-constraint error.
    """
    cleaned = clean_steps(steps)
    Problem.objects.select_for_update().filter(pk=problem.pk).first()
    last = problem.skeletons.aggregate(v=Max("version"))["v"] or 0
    skeleton = Skeleton.objects.create(
        problem=problem, version=last + 1, status=Skeleton.Status.DRAFT, created_by=user, note=note.strip()[:CHANGE_NOTE_MAX]
    )
    SkeletonStep.objects.bulk_create(
        [SkeletonStep(skeleton=skeleton, position=k, text=s["text"], check_expr=s["check"])
         for k, s in enumerate(cleaned, start=1)]
    )
    if approve:
        do_approve_skeleton(skeleton, user)
    return skeleton


@transaction.atomic
def do_approve_skeleton(skeleton: Skeleton, user) -> Skeleton:
    """Make ``skeleton`` the problem's approved skeleton and set L_gold; scores follow."""
    n = skeleton.steps.count()
    now = timezone.now()
    Skeleton.objects.filter(pk=skeleton.pk).update(status=Skeleton.Status.APPROVED, approved_by=user, approved_at=now)
    skeleton.status, skeleton.approved_by, skeleton.approved_at = Skeleton.Status.APPROVED, user, now
    Problem.objects.filter(pk=skeleton.problem_id).update(approved_skeleton=skeleton, l_gold=n)
    problem = skeleton.problem
    problem.approved_skeleton, problem.l_gold = skeleton, n
    study = Study.objects.get(pk=problem.study_id)
    transaction.on_commit(lambda: signals.data_changed.send(sender=Study, study=study, reason="skeleton"))
    return skeleton


def _lines(steps) -> list[str]:
    return [f"{s.position}. {s.text}" + (f"   [check: {s.check_expr}]" if s.check_expr else "") for s in steps]


@dataclass
class VersionView:
    skeleton: Skeleton
    steps: list[SkeletonStep]
    diff: list[tuple[str, str]]  # (kind, line): kind is "add", "del" or "same"
    is_current: bool


def history(problem: Problem) -> list[VersionView]:
    """Every version, newest first, each with its diff against the one before."""
    skeletons = list(
        problem.skeletons.select_related("created_by", "approved_by").prefetch_related("steps").order_by("version")
    )
    out: list[VersionView] = []
    previous: list[str] = []
    for sk in skeletons:
        steps = sorted(sk.steps.all(), key=lambda s: s.position)
        lines = _lines(steps)
        diff = []
        for line in difflib.ndiff(previous, lines):
            tag, body = line[:2], line[2:]
            if tag == "+ ":
                diff.append(("add", body))
            elif tag == "- ":
                diff.append(("del", body))
            elif tag == "  ":
                diff.append(("same", body))
        out.append(VersionView(sk, steps, diff, sk.pk == problem.approved_skeleton_id))
        previous = lines
    out.reverse()
    return out
