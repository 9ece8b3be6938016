"""Scanners (docs/search.md): create one, run it over a cohort through the run engine, filter by its
answers, label a validation sample by hand and measure it (precision, recall, F1 on the test split)."""

from __future__ import annotations

import hashlib
import random
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Exists, OuterRef, Q, QuerySet
from django.utils import timezone

from annotation import access, gate, jobs
from annotation.gate import Source
from annotation.models import Job, Membership, Study, Trace
from reasonlib.ids import is_id
from reasonlib.refusals import FieldInvalid
from runs import engine
from runs.engine import ACTIVE
from search.core.validation import Validation, validate
from search.errors import bad
from search.models import Cohort, CohortTrace, ScanAnswer, ScanLabel, Scanner, ScannerRun, ScanResult
from search.runclient import KIND, cache_scope

# Half of the hand-labelled traces are kept for the test split, by a hash of (scanner, trace): the split of
# a trace never changes, whether it was drawn in a sample or answered on its review page.
TEST_PER_MILLE = 500
MAX_SAMPLE = 2000


class ScannerError(FieldInvalid):
    """A scanner, its run or its sample refused; names the field at fault."""


def check_scanner(user, pk: int) -> tuple[Scanner, Membership]:
    scanner = Scanner.objects.filter(pk=pk).select_related("study", "judge").first()
    if scanner is None:
        raise access.AccessDenied("no such scanner", outsider=True)
    _study, membership = access.check_study(user, scanner.study_id)
    return scanner, membership


def do_create_scanner(study: Study, *, name: str, question: str, judge_name: str, user=None) -> Scanner:
    name, question = (name or "").strip(), (question or "").strip()
    if not name or len(name) > 200:
        raise ScannerError("name", "give a name of 1 to 200 characters")
    if not 10 <= len(question) <= 2000:
        raise ScannerError("question", "ask a question of 10 to 2,000 characters")
    judge = study.judges.filter(name=judge_name).first()
    if judge is None:
        raise ScannerError("judge", f"no judge named {judge_name!r} in this study")
    if not judge.uses_prompt:
        raise ScannerError("judge", "a scanner needs an LLM judge configuration, not the mechanistic verifier")
    try:
        with transaction.atomic():
            return Scanner.objects.create(study=study, name=name, question=question, judge=judge, created_by=user)
    except IntegrityError:
        raise ScannerError("name", f"a scanner named {name!r} exists in this study") from None


def do_start_scan(scanner: Scanner, *, cohort: Cohort | None = None, user=None, force: bool = False,
                  budget_usd: float | None = None, queue: bool = True) -> ScannerRun:
    """Create the job, the run (kind "scanner") and its chunks over the cohort's traces (or the study's);
    the engine queues the first chunk after commit (``queue=False``: run_inline does the work)."""
    if cohort is not None and cohort.study_id != scanner.study_id:
        raise ScannerError("cohort", "the cohort belongs to another study")
    if budget_usd is not None and budget_usd < 0:
        raise ScannerError("budget_usd", "the budget must not be negative")
    def busy() -> str | None:
        active = ScannerRun.objects.filter(scanner=scanner, job__status__in=ACTIVE).first()
        return (f"scanner {scanner.name} already has run {active.pk} in progress (job {active.job_id}); "
                "wait for it or cancel it") if active is not None else None

    traces = Trace.objects.of_study(scanner.study_id)  # not the benchmark items nor the suite variants
    if cohort is not None:
        traces = traces.filter(cohort_memberships__cohort=cohort)
    # The one start of every kind (runs.engine.start): conflict, job, run, record, chunks, queueing and
    # the broker-down behaviour; the trace ids are read inside its transaction, after the conflict check.
    record = engine.start(
        KIND, study_id=scanner.study_id, job_kind=KIND, user=user, force=force, budget_usd=budget_usd, queue=queue,
        params={"scanner": scanner.name, "scanner_id": scanner.pk, "cohort": cohort.pk if cohort else None,
                "force": force, "budget_usd": budget_usd},
        config={"question": scanner.question, "judge": scanner.judge.name,
                "judge_version": scanner.judge.version, "cache_scope": cache_scope(scanner)},
        busy=busy, record=lambda job, run: ScannerRun.objects.create(scanner=scanner, cohort=cohort, job=job, run=run),
        items=lambda record: list(traces.order_by("pk").values_list("pk", flat=True)))
    return record


def run_inline(record: ScannerRun) -> Job:
    return engine.run_inline(record.run)


def cancel(record: ScannerRun) -> Job:
    """Ask the run to stop (the engine reads the flag at its next heartbeat); its answers so far are kept."""
    return jobs.cancel(record.job)


# --------------------------------------------------------------------------
# Results as a filter (search.filters: scanner=ID:yes) and as a cohort


ANSWERS = ("yes", "no", "uncited", "failed")
#: A scanner's answers are a judge's (annotation.gate): its counts, answers and filter read this.
SCANNER_READS = frozenset({Source.SCANNER})


def scanner_condition(study: Study, membership: Membership, value: str) -> Q:
    """``ID:yes`` / ``ID:no`` / ``ID:uncited`` (yes or no citing no step) / ``ID:failed``."""
    pk, _sep, answer = (value or "").partition(":")
    if not is_id(pk.strip()) or answer not in ANSWERS:
        raise bad("scanner", f"give ID:{'|'.join(ANSWERS)}, e.g. 3:yes")
    scanner = Scanner.objects.filter(study=study, pk=int(pk)).first()
    if scanner is None:
        raise bad("scanner", f"no scanner {pk} in this study")
    gate.check(membership, "scanner", SCANNER_READS)
    results = ScanResult.objects.filter(scanner=scanner, trace=OuterRef("pk"))
    if answer == "failed":
        results = results.filter(status=ScanResult.Status.FAILED)
    elif answer == "uncited":
        results = results.filter(status=ScanResult.Status.OK, cited=[])
    else:
        results = results.filter(status=ScanResult.Status.OK, answer=answer == "yes")
    return Q(Exists(results))


# --------------------------------------------------------------------------
# Validation: people answer the question on a sample; the scanner is measured on its test split


def split_for(scanner: Scanner, trace_pk: int) -> str:
    h = int(hashlib.sha256(f"{scanner.pk}:{trace_pk}".encode()).hexdigest()[:8], 16) % 1000
    return ScanLabel.Split.TEST if h < TEST_PER_MILLE else ScanLabel.Split.DEV


def do_draw_sample(scanner: Scanner, size: int, *, seed: int = 0, cohort: Cohort | None = None) -> int:
    """Add up to ``size`` traces the scanner answered (of ``cohort`` if given) to its validation sample;
    returns how many were added. Traces already in the sample stay as they are."""
    if not 1 <= int(size) <= MAX_SAMPLE:
        raise ScannerError("size", f"must be within 1..{MAX_SAMPLE}")
    answered = ScanResult.objects.filter(scanner=scanner, status=ScanResult.Status.OK)
    if cohort is not None:
        answered = answered.filter(trace__in=CohortTrace.objects.filter(cohort=cohort).values("trace"))
    taken = set(ScanLabel.objects.filter(scanner=scanner).values_list("trace_id", flat=True))
    pool = sorted(set(answered.values_list("trace_id", flat=True)) - taken)
    if not pool:
        raise ScannerError("size", "no answered trace is left to draw; run the scanner first")
    chosen = random.Random(seed).sample(pool, min(int(size), len(pool)))
    ScanLabel.objects.bulk_create([ScanLabel(scanner=scanner, trace_id=pk, split=split_for(scanner, pk))
                                   for pk in sorted(chosen)])
    return len(chosen)


def _whose(user) -> Q:
    """The answers of ``user`` (None: the command line's)."""
    return Q(annotator=user) if user is not None else Q(annotator__isnull=True)


def do_answer(scanner: Scanner, trace: Trace, user, answer: bool | None) -> ScanLabel:
    """``user``'s own answer to the scanner's question on ``trace`` (None withdraws it; ``user`` None: the
    command line's); a trace not yet in the sample joins it. Each person answers for themselves: another's
    answer is never overwritten or withdrawn (issue 29, L1)."""
    if trace.study_id != scanner.study_id:
        raise ScannerError("trace", "the trace belongs to another study")
    with transaction.atomic():
        label, _ = ScanLabel.objects.get_or_create(scanner=scanner, trace=trace,
                                                   defaults={"split": split_for(scanner, trace.pk)})
        mine = ScanAnswer.objects.filter(_whose(user), label=label)
        if answer is None:
            mine.delete()
        elif not mine.update(answer=answer, answered_at=timezone.now()):
            ScanAnswer.objects.create(label=label, annotator=user, answer=answer)
    return label


def unanswered_by(scanner: Scanner, user) -> QuerySet[ScanLabel]:
    """The sampled traces ``user`` (None: the command line) has not answered, in trace order."""
    theirs = ScanAnswer.objects.filter(_whose(user), label=OuterRef("pk"))
    return ScanLabel.objects.filter(scanner=scanner).exclude(Exists(theirs)).order_by("trace_id")


def answered_by(scanner: Scanner, user) -> QuerySet[ScanAnswer]:
    """``user``'s own answers on the scanner's sample (to review and change), in trace order."""
    return ScanAnswer.objects.filter(_whose(user), label__scanner=scanner).select_related("label__trace__problem") \
        .order_by("label__trace_id")


def pending_questions(trace: Trace, user) -> list[dict[str, Any]]:
    """The scanners whose validation sample holds ``trace``, with ``user``'s own answer so far (review page)."""
    mine = dict(ScanAnswer.objects.filter(_whose(user), label__trace=trace).values_list("label_id", "answer"))
    return [{"scanner": lab.scanner, "answer": mine.get(lab.pk)}
            for lab in ScanLabel.objects.filter(trace=trace).select_related("scanner").order_by("scanner__name")]


def validation_report(scanner: Scanner) -> dict[str, Any]:
    """Per split, the scanner's answer against every person's answer (each person's answer is one pair,
    so a trace two people answered counts twice); ``pending``: sampled traces nobody answered yet."""
    answers = list(ScanAnswer.objects.filter(label__scanner=scanner)
                   .values_list("label__trace_id", "label__split", "answer").order_by("label__trace_id", "pk"))
    answered = {pk for pk, _split, _a in answers}
    said = dict(ScanResult.objects.filter(scanner=scanner, status=ScanResult.Status.OK, trace_id__in=sorted(answered))
                .values_list("trace_id", "answer"))
    out: dict[str, Any] = {"pending": ScanLabel.objects.filter(scanner=scanner, answers__isnull=True).count(),
                           "unscanned": len([pk for pk in answered if pk not in said])}
    for split in ScanLabel.Split.values:
        out[split] = validate([(person, said[pk]) for pk, s, person in answers if pk in said and s == split])
    return out


def people_answers(scanner: Scanner) -> dict[int, tuple[str, bool | None]]:
    """Per sampled trace: its split and the people's answer -- their majority, None when they are split
    evenly or nobody answered (the ``scanner-answers`` export)."""
    votes: dict[int, list[bool]] = {}
    for pk, answer in ScanAnswer.objects.filter(label__scanner=scanner).values_list("label__trace_id", "answer"):
        votes.setdefault(pk, []).append(answer)
    out: dict[int, tuple[str, bool | None]] = {}
    for pk, split in ScanLabel.objects.filter(scanner=scanner).values_list("trace_id", "split"):
        yes, n = sum(votes.get(pk, [])), len(votes.get(pk, []))
        out[pk] = (split, None if n == 0 or 2 * yes == n else 2 * yes > n)
    return out


#: The validation compares the scanner's answers with people's (annotation.gate): for who reads both.
VALIDATION_READS = SCANNER_READS | {Source.OWN, Source.PEER}


def visible_counts(scanner: Scanner, membership: Membership | None) -> dict[str, int] | None:
    """The answers' counts, or None for a member the gate does not let read a scanner's answers."""
    return counts(scanner) if gate.may_read(membership, SCANNER_READS) else None


def visible_validation(scanner: Scanner, membership: Membership | None) -> dict[str, Any] | None:
    """The validation report, or None for a member the gate does not let read it (issue 29, L1)."""
    return validation_report(scanner) if gate.may_read(membership, VALIDATION_READS) else None


def counts(scanner: Scanner) -> dict[str, int]:
    results = ScanResult.objects.filter(scanner=scanner)
    return {"yes": results.filter(status="ok", answer=True).count(),
            "no": results.filter(status="ok", answer=False).count(),
            "uncited": results.filter(status="ok", cited=[]).count(),
            "failed": results.filter(status="failed").count()}


def as_dict(v: Validation) -> dict[str, Any]:
    from dataclasses import asdict

    return asdict(v)
