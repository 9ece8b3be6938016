"""The one import path: CLI, API upload (as a Celery job) and web upload all
call ``import_stream``.

It streams the file (flat memory), validates every record, and writes in
batches inside one transaction. Without ``skip_invalid`` a single bad line
rolls everything back -- but validation goes on to the end so the report names
every bad line, not just the first.
"""

from __future__ import annotations

import gc
import hashlib
import logging
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager
from dataclasses import asdict, dataclass, field
from typing import IO, Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connection, transaction
from django.utils import timezone

from annotation.bulk import insert_rows, new_pks, rows_by_key
from annotation.importing import adapters
from annotation.importing.records import ProblemIn, RecordError, TextLimits, TraceIn, validate
from annotation.models import (
    LabelHistory,
    Membership,
    Problem,
    Skeleton,
    SkeletonStep,
    Step,
    StepLabel,
    Study,
    Trace,
    TraceReview,
)
from reasonlib import answers, segmentation, thinking

log = logging.getLogger(__name__)

StepRow = tuple[str, int | None, int | None]

BATCH_TRACES = 2000
# Also a batch's steps: 2,000 traces with 200-paragraph thoughts would hold 400,000 steps (and their
# texts twice) in memory, so memory would grow with the length of thoughts, not stay flat.
BATCH_STEPS = 50_000
ANSWER_CHECK_MEMO = 20_000
IMPORT_GC_THRESHOLD = 50_000  # allocations between young collections during an import (_startup_objects_frozen)  # (answer, gold) verdicts remembered during one import
Progress = Callable[[int, int], None]  # (bytes read, total bytes)


@dataclass
class ImportReport:
    read: int = 0
    problems_created: int = 0
    traces_created: int = 0
    steps_created: int = 0
    labels_created: int = 0
    labels_updated: int = 0
    unchanged: int = 0
    rejected: list[dict[str, Any]] = field(default_factory=list)
    committed: bool = False

    def reject(self, line: int, reason: str) -> None:
        self.rejected.append({"line": line, "reason": reason})

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def steps_hash(texts: list[str]) -> str:
    return hashlib.sha256("\x1e".join(texts).encode()).hexdigest()


@dataclass(slots=True)
class _PendingTrace:
    line: int
    record: TraceIn
    trace_id: str
    # (text, start, end) of the thought's steps then the answer's: offsets into the thought, resp. the
    # raw text (None where a given step was not found)
    steps: list[StepRow]
    n_thought: int
    answer: str
    thought: str
    truncated: bool
    thought_meta: dict[str, Any] | None  # meta["thought"]: what the parser found (None: nothing to say)
    hash: str


@dataclass(slots=True)
class _KnownProblem:
    pk: int | None  # None until the batch holding it is written
    statement_hash: str
    gold_answer: str
    has_skeleton: bool


# What higher apps wrap around an import's writes, registered from their AppConfig.ready (annotation may not
# import them, docs/architecture.md): search keeps its SQLite index of the imported steps and problems by one
# statement each at the end instead of a trigger run per row (search.backends.indexed_after). Each is entered
# inside the import's transaction and left before it commits; an exception inside rolls back what it did.
ImportWrapper = Callable[[], AbstractContextManager[object]]
_IMPORT_WRAPPERS: list[ImportWrapper] = []


def register_import_wrapper(wrapper: ImportWrapper) -> None:
    if wrapper not in _IMPORT_WRAPPERS:
        _IMPORT_WRAPPERS.append(wrapper)


# The meta of a record without any: one shared object that is never mutated,
# so insert_rows adapts it once per batch.
NO_META: dict[str, Any] = {}


def record_meta(rec: ProblemIn | TraceIn) -> dict[str, Any]:
    """A record's ``meta`` with its unknown keys merged in (they are kept, not rejected)."""
    if not rec.meta and not rec.model_extra:
        return NO_META
    return {**rec.meta, **rec.extras()}


def _text_hash(text: str) -> str:
    return hashlib.sha1(text.encode()).hexdigest()


def reported_thought_tokens(rec: TraceIn) -> int | None:
    """The thought's token count as the server reported it in the record's ``usage`` (top level or in
    ``meta``): ``completion_tokens_details.reasoning_tokens`` (chat completions) or
    ``output_tokens_details.reasoning_tokens`` (responses API); None when it did not say."""
    extra = rec.model_extra
    if not rec.meta and not extra:
        return None  # most records: nothing to look in
    for holder in (extra or {}, rec.meta):
        usage = holder.get("usage")
        if not isinstance(usage, dict):
            continue
        for details in ("completion_tokens_details", "output_tokens_details"):
            value = (usage.get(details) or {}).get("reasoning_tokens") if isinstance(usage.get(details), dict) else None
            if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
                return value
    return None


def _given_steps(text: str, given: list[str], field_name: str) -> list[StepRow]:
    """Steps given in the record (not segmented): stripped, none empty, located in ``text``."""
    texts = [s.strip() for s in given]
    for k, t in enumerate(texts, start=1):
        if not t:
            raise RecordError(f'"{field_name}": step {k} is empty')
    return _locate(text, texts)


def _locate(raw: str, texts: list[str]) -> list[StepRow]:
    """Offsets of given steps inside raw, searched in order; None where not found."""
    out: list[StepRow] = []
    if not raw:
        return [(text, None, None) for text in texts]
    find, pos = raw.find, 0
    for text in texts:
        at = find(text, pos)
        if at < 0:
            out.append((text, None, None))
        else:
            pos = at + len(text)
            out.append((text, at, pos))
    return out


class _Writer:
    def __init__(self, study: Study, report: ImportReport, actor=None, *, skip_invalid: bool = False,
                 thought_segmenter: str | None = None) -> None:
        self.study = study
        # An import may cut its thoughts otherwise than the study's setting (import_traces --thought-segmenter).
        self.thought_segmenter = thought_segmenter or study.thought_segmenter
        segmentation.segment("", self.thought_segmenter)  # an unknown segmenter fails here, not per trace
        self.report = report
        self.actor = actor
        self.skip_invalid = skip_invalid
        self.writing = True
        self.problems: dict[str, _KnownProblem] = {}
        for pid, pk, statement, gold, has_skel in (
            Problem.objects.filter(study=study)
            .values_list("problem_id", "pk", "statement", "gold_answer", "skeletons")
            .distinct()
            .iterator()
        ):
            known = self.problems.get(pid)
            if known:
                known.has_skeleton = known.has_skeleton or has_skel is not None
            else:
                self.problems[pid] = _KnownProblem(pk, _text_hash(statement), gold, has_skel is not None)
        self.new_problems: list[tuple[int, ProblemIn]] = []
        self.skeletons_for_existing: list[tuple[int, ProblemIn]] = []
        self.traces: list[_PendingTrace] = []
        self.pending_steps = 0  # steps of self.traces
        self.orphans: list[_PendingTrace] = []  # traces whose problem has not appeared yet
        self.users: dict[str, Any] = {}
        self.answer_checks: dict[tuple[str, str], bool | None] = {}

    # -- records ------------------------------------------------------------

    def add(self, line: int, record: ProblemIn | TraceIn) -> None:
        if isinstance(record, ProblemIn):
            self._add_problem(line, record)
        else:
            self._add_trace(line, record)

    def _add_problem(self, line: int, rec: ProblemIn) -> None:
        known = self.problems.get(rec.problem_id)
        if known is not None:
            if known.statement_hash != _text_hash(rec.statement):
                raise RecordError(f'problem_id "{rec.problem_id}" already exists with a different statement')
            if rec.skeleton and not known.has_skeleton and known.pk is not None:
                known.has_skeleton = True
                self.skeletons_for_existing.append((line, rec))
            else:
                self.report.unchanged += 1
            return
        self.problems[rec.problem_id] = _KnownProblem(None, _text_hash(rec.statement), rec.gold_answer, bool(rec.skeleton))
        self.new_problems.append((line, rec))

    def _add_trace(self, line: int, rec: TraceIn) -> None:
        split = thinking.split_thinking(
            rec.raw,
            reasoning_field=rec.thought,
            reasoning_blocks=[thinking.ReasoningBlock(b.text, b.redacted, b.summary) for b in rec.thought_blocks or ()],
            think_end=rec.think_end_token,
            opened=rec.prompt_opens_thought,
            cut=rec.meta.get("finish_reason") == "length" or bool(rec.meta.get("truncated")),
        )
        if rec.thought_steps is not None:
            thought_steps = _given_steps(split.thought, rec.thought_steps, "thought_steps")
        elif split.thought:
            # A Segment is a (text, start, end) named tuple: a step row as it is.
            thought_steps = thinking.segment_thought(split, self.thought_segmenter)
        else:
            thought_steps = []
        if rec.steps is not None:
            # Located in the answer's view of raw, so a given step is never found inside the thought.
            steps = _given_steps(split.answer_view, rec.steps, "steps")
            answer = rec.answer
            if answer is None and split.answer.strip():
                answer = answers.extract_answer(split.answer_view)
        else:
            segments, found = thinking.segment_answer(rec.raw, split, self.study.segmenter)
            steps = segments
            answer = rec.answer if rec.answer is not None else found
        n = len(thought_steps) + len(steps)
        seen: set[tuple[str, int]] = set()
        for lab in rec.labels:
            if lab.step > n:
                raise RecordError(f"label for step {lab.step}, but the trace has {n} step{'s' if n != 1 else ''}")
            if (lab.annotator, lab.step) in seen:
                raise RecordError(f'two labels from "{lab.annotator}" for step {lab.step}')
            seen.add((lab.annotator, lab.step))
        h = thinking.channel_steps_hash([t[0] for t in thought_steps], [t[0] for t in steps])
        trace_id = rec.trace_id or f"{rec.problem_id}/{rec.model}/{h[:16]}"
        thinking_on = rec.regime.get("thinking") == "on"
        thought_meta = None
        if split.form != "none" or split.flags or thinking_on:
            thought_meta = split.meta()
            if thinking_on and not split.thought:
                thought_meta["missing"] = True  # thinking was asked for and the model returned no thought
        # Only what the row needs is kept until the batch is written (not the split's copies of raw).
        pending = _PendingTrace(line, rec, trace_id, thought_steps + steps, len(thought_steps), answer or "",
                                split.thought, split.truncated, thought_meta, h)
        if rec.problem_id in self.problems:
            self.traces.append(pending)
            self.pending_steps += len(pending.steps)
        else:
            self.orphans.append(pending)

    def reject(self, line: int, reason: str) -> None:
        self.report.reject(line, reason)
        if not self.skip_invalid:
            # Nothing will be kept: stop writing, keep validating.
            self.writing = False

    # -- writing ------------------------------------------------------------

    def full(self) -> bool:
        return (len(self.traces) >= BATCH_TRACES or len(self.new_problems) >= BATCH_TRACES
                or self.pending_steps >= BATCH_STEPS)

    def flush(self) -> None:
        if not self.writing:
            self.new_problems.clear()
            self.skeletons_for_existing.clear()
            # Writes nothing now, but still reports trace_id conflicts.
            self._write_traces()
            return
        self._write_problems()
        self._write_traces()

    def finish(self) -> None:
        for pending in self.orphans:
            if pending.record.problem_id in self.problems:
                self.traces.append(pending)
            else:
                self.reject(pending.line, f'problem "{pending.record.problem_id}" is neither in the file nor in the study')
        self.orphans.clear()
        self.flush()

    def _write_problems(self) -> None:
        now = timezone.now()
        with_skeleton = [rec for _, rec in self.new_problems if rec.skeleton] + [
            rec for _, rec in self.skeletons_for_existing
        ]
        # The skeletons' keys first: a new problem's row names its approved skeleton and that skeleton's length
        # as it is written, with no UPDATE of the rows afterwards (whose plan scanned every problem so far).
        skeleton_pks = dict(zip((rec.problem_id for rec in with_skeleton), new_pks(Skeleton, len(with_skeleton)),
                                strict=True))
        if self.new_problems:
            pks = new_pks(Problem, len(self.new_problems))
            rows = []
            for pk, (_, rec) in zip(pks, self.new_problems, strict=True):
                self.problems[rec.problem_id].pk = pk
                approved = bool(rec.skeleton) and rec.skeleton_status == "approved"
                rows.append((pk, self.study.pk, rec.problem_id, rec.statement, rec.gold_answer, rec.domain, rec.tags,
                             record_meta(rec), len(rec.skeleton or []) if approved else 0,
                             skeleton_pks[rec.problem_id] if approved else None, now))
            insert_rows(
                Problem,
                ["id", "study", "problem_id", "statement", "gold_answer", "domain", "tags", "meta", "l_gold",
                 "approved_skeleton", "created_at"],
                rows,
            )
            self.report.problems_created += len(pks)
        self._write_skeletons(with_skeleton, skeleton_pks, now)
        self._link_approved_skeletons([rec for _, rec in self.skeletons_for_existing], skeleton_pks)
        self.new_problems.clear()
        self.skeletons_for_existing.clear()

    def _write_skeletons(self, recs: list[ProblemIn], skeleton_pks: dict[str, int], now) -> None:
        if not recs:
            return
        insert_rows(
            Skeleton,
            ["id", "problem", "version", "status", "created_at", "approved_at", "note"],
            [
                (skeleton_pks[rec.problem_id], self.problems[rec.problem_id].pk, 1, rec.skeleton_status, now,
                 now if rec.skeleton_status == "approved" else None, "imported")
                for rec in recs
            ],
        )
        insert_rows(
            SkeletonStep,
            ["skeleton", "position", "text", "check_expr"],
            [
                (skeleton_pks[rec.problem_id], k, step.text, step.check or "")
                for rec in recs
                for k, step in enumerate(rec.skeleton or [], start=1)
            ],
        )

    def _link_approved_skeletons(self, recs: list[ProblemIn], skeleton_pks: dict[str, int]) -> None:
        """Problems of the study that had no skeleton and get one from the file: the version-1 skeleton
        just written is their newest approved one, and its length is known here: one statement instead
        of an UPDATE with two correlated subqueries per row."""
        qn = connection.ops.quote_name
        approved = [
            (skeleton_pks[rec.problem_id], len(rec.skeleton or []), self.problems[rec.problem_id].pk)
            for rec in recs
            if rec.skeleton_status == "approved"
        ]
        if not approved:
            return
        meta = Problem._meta
        name, pk = qn(meta.db_table), qn(meta.pk.column)
        skel, l_gold = qn(meta.get_field("approved_skeleton").column), qn(meta.get_field("l_gold").column)
        with connection.cursor() as cursor:
            if connection.vendor == "postgresql":
                # One statement over arrays: an executemany is one client-side
                # bound statement per row with Django's psycopg cursors.
                skeletons, lengths, problems = (list(col) for col in zip(*approved, strict=True))
                cursor.execute(
                    f"UPDATE {name} SET {skel} = v.skeleton, {l_gold} = v.n FROM "
                    f"unnest(%s::bigint[], %s::integer[], %s::bigint[]) AS v(skeleton, n, id) WHERE {name}.{pk} = v.id",
                    [skeletons, lengths, problems],
                )
            else:
                cursor.executemany(f"UPDATE {name} SET {skel} = %s, {l_gold} = %s WHERE {pk} = %s", approved)

    def _user(self, username: str):
        user = self.users.get(username)
        if user is None:
            User = get_user_model()
            user = User.objects.filter(username=username).first()
            if user is None:
                # Imported annotators are label sources, not people who sign in.
                user = User(username=username, is_active=False)
                user.set_unusable_password()
                user.save()
            Membership.objects.get_or_create(study=self.study, user=user, defaults={"role": Membership.Role.ANNOTATOR})
            self.users[username] = user
        return user

    def _write_traces(self) -> None:
        if not self.traces:
            return
        batch, self.traces = self.traces, []
        self.pending_steps = 0
        existing = {
            tid: (pk, h)
            for tid, pk, h in rows_by_key(
                Trace, "trace_id", [p.trace_id for p in batch], ["pk", "steps_hash"], study=self.study.pk
            )
        }
        new: list[_PendingTrace] = []
        in_batch: dict[str, str] = {}
        relabel: list[tuple[int, _PendingTrace]] = []
        # A trace repeated in the same batch (an export gives a second annotator's rating that way):
        # its labels go on the trace once the batch has written it.
        repeated: list[_PendingTrace] = []
        for p in batch:
            prior = existing.get(p.trace_id) or ((None, in_batch[p.trace_id]) if p.trace_id in in_batch else None)
            if prior is not None:
                if prior[1] != p.hash:
                    self.reject(p.line, f'trace_id "{p.trace_id}" was imported before with different steps')
                    continue
                self.report.unchanged += 1
                if p.record.labels:
                    if prior[0] is not None:
                        relabel.append((prior[0], p))
                    else:
                        repeated.append(p)
                continue
            in_batch[p.trace_id] = p.hash
            new.append(p)
        if not self.writing:
            return
        now = timezone.now()
        # Keys handed out before the rows are written (annotation.bulk.new_pks): no look-up of the new
        # traces, steps and labels afterwards, whose plans grew with everything imported before.
        trace_pks = dict(zip((p.trace_id for p in new), new_pks(Trace, len(new)), strict=True))
        insert_rows(Trace, ["id", *_TRACE_FIELDS], [(trace_pks[p.trace_id], *self._trace_row(p, now)) for p in new])
        thought, answer = str(Step.Channel.THOUGHT), str(Step.Channel.ANSWER)
        step_pks = iter(new_pks(Step, sum(len(p.steps) for p in new)))
        rows = [
            (next(step_pks), trace_pk, k, thought if k <= p.n_thought else answer, text, start, end)
            for p in new
            for trace_pk in (trace_pks[p.trace_id],)
            for k, (text, start, end) in enumerate(p.steps, start=1)
        ]
        insert_rows(Step, ["id", "trace", "index", "channel", "text", "start", "end"], rows)
        self.report.traces_created += len(new)
        self.report.steps_created += len(rows)
        labelled = [(trace_pks[p.trace_id], p) for p in new if p.record.labels]
        if labelled:
            labelled_pks = set(trace_pks[p.trace_id] for _, p in labelled)
            self._write_new_labels(labelled, {(row[1], row[2]): row[0] for row in rows if row[1] in labelled_pks})
        relabel += [(trace_pks[p.trace_id], p) for p in repeated]
        for trace_pk, p in relabel:
            self._upsert_labels(trace_pk, p)

    def _check_answer(self, answer: str, gold: str) -> bool | None:
        """``answers.check_answer``, remembered per (answer, gold): the models
        of a problem often agree, and a LaTeX answer costs a symbolic parse.
        The memo is emptied when full so memory stays flat on any file."""
        key = (answer, gold)
        if key in self.answer_checks:
            return self.answer_checks[key]
        if len(self.answer_checks) >= ANSWER_CHECK_MEMO:
            self.answer_checks.clear()
        verdict = self.answer_checks[key] = answers.check_answer(answer, gold, timeout=settings.ANSWER_CHECK_TIMEOUT)
        return verdict

    def _trace_row(self, p: _PendingTrace, now) -> tuple:
        rec = p.record
        known = self.problems[rec.problem_id]
        auto = None
        # The automatic check runs even when the file brings its own verdict
        # (which wins): the review page shows both, and a reviewer who hands a
        # trace back to the automatic verdict needs it (issue 23: the demo read
        # "Automatic check: undecided" with answer 18 and gold 18). Numbers
        # take the exact fast path; the memo keeps symbolic answers cheap.
        if known.gold_answer.strip() and p.answer.strip():
            auto = self._check_answer(p.answer, known.gold_answer)
        if rec.answer_correct is not None:
            correct, origin = rec.answer_correct, Trace.AnswerOrigin.IMPORTED
        elif auto is not None:
            correct, origin = auto, Trace.AnswerOrigin.AUTOMATIC
        else:
            correct, origin = None, Trace.AnswerOrigin.NONE
        n = len(p.steps)
        raw = rec.raw if rec.raw is not None else "\n".join(s[0] for s in p.steps[p.n_thought:])
        meta = record_meta(rec)
        if p.thought_meta is not None:
            meta = {**meta, "thought": p.thought_meta}
        # Order as _TRACE_FIELDS.
        regime = rec.regime
        if "thought_tokens" not in regime and (tokens := reported_thought_tokens(rec)) is not None:
            regime = {**regime, "thought_tokens": tokens}
        return (self.study.pk, known.pk, rec.model, p.trace_id, raw, p.thought, p.answer, correct, str(origin),
                auto, n, p.n_thought, p.truncated, n == 0, p.hash, False, meta, now, regime)

    def _write_new_labels(self, labelled: list[tuple[int, _PendingTrace]], step_pks: dict[tuple[int, int], int]) -> None:
        """Labels, reviews and history of new traces, as raw inserts like the
        traces themselves (the ORM's bulk_create cost most of a labelled import)."""
        labels: list[tuple] = []
        snapshots: list[tuple[int, str, dict[str, Any]]] = []  # (step pk, annotator, label_snapshot)
        reviews: list[tuple] = []
        now = timezone.now()
        human = str(StepLabel.Kind.HUMAN)
        for trace_pk, p in labelled:
            counts: dict[str, int] = {}
            marks: dict[str, dict[int, str]] = {}
            for lab in p.record.labels:
                marks.setdefault(lab.annotator, {})[lab.step] = lab.verdict
                user = self._user(lab.annotator)
                step_pk = step_pks[(trace_pk, lab.step)]
                # Order as _LABEL_FIELDS; version 1 is the model's default.
                labels.append(
                    (step_pk, human, user.pk, None, lab.verdict, lab.skeleton_refs, lab.confidence, lab.note, 1, now, now)
                )
                snapshots.append((step_pk, lab.annotator, {
                    "verdict": lab.verdict, "skeleton_refs": list(lab.skeleton_refs or []),
                    "confidence": lab.confidence, "reason": lab.note,
                }))
                counts[lab.annotator] = counts.get(lab.annotator, 0) + 1
            first = p.record.labels[0].annotator
            for name in counts:
                # Order as _REVIEW_FIELDS; flag, skipped and updated_via are the model's defaults.
                reviews.append((trace_pk, self.users[name].pk, 1, review_complete(marks[name], len(p.steps),
                                                                              p.record.labels_to_first_error),
                                p.record.rating if name == first else None, "", False, now, ""))
        label_pks = new_pks(StepLabel, len(labels))
        insert_rows(StepLabel, ["id", *_LABEL_FIELDS], [(pk, *row) for pk, row in zip(label_pks, labels, strict=True)])
        insert_rows(TraceReview, _REVIEW_FIELDS, reviews)
        actor = self.actor.pk if self.actor is not None else None
        insert_rows(
            LabelHistory,
            ["step", "label", "kind", "source_name", "actor", "at", "before", "after", "via"],
            [
                (step_pk, label_pk, human, name, actor, now, None, after, "import")
                for label_pk, (step_pk, name, after) in zip(label_pks, snapshots, strict=True)
            ],
        )
        self.report.labels_created += len(labels)

    def _upsert_labels(self, trace_pk: int, p: _PendingTrace) -> None:
        """A re-imported trace: add labels that are new, update those that changed."""
        steps = {s.index: s for s in Step.objects.filter(trace_id=trace_pk)}
        changed: dict[str, bool] = {}
        for lab in p.record.labels:
            user = self._user(lab.annotator)
            changed.setdefault(lab.annotator, False)
            after = {"verdict": lab.verdict, "skeleton_refs": lab.skeleton_refs, "confidence": lab.confidence, "reason": lab.note}
            label = StepLabel.objects.filter(step=steps[lab.step], kind=StepLabel.Kind.HUMAN, annotator=user).first()
            if label is not None and label_snapshot(label) == after:
                continue
            changed[lab.annotator] = True
            before = label_snapshot(label) if label else None
            if label is None:
                label = StepLabel(step=steps[lab.step], kind=StepLabel.Kind.HUMAN, annotator=user)
                self.report.labels_created += 1
            else:
                label.version += 1
                label.updated_at = timezone.now()
                self.report.labels_updated += 1
            label.verdict, label.skeleton_refs, label.confidence, label.reason = (
                lab.verdict,
                lab.skeleton_refs,
                lab.confidence,
                lab.note,
            )
            label.save()
            LabelHistory.objects.create(
                step=label.step, label=label, kind=label.kind, source_name=user.username, actor=self.actor,
                before=before, after=after, via="import",
            )
        # Keep each annotator's review in step with their labels, as a first import does.
        first = p.record.labels[0].annotator
        for name, was_changed in changed.items():
            user = self.users[name]
            marks = dict(StepLabel.objects.filter(step__trace_id=trace_pk, kind=StepLabel.Kind.HUMAN, annotator=user)
                         .values_list("step__index", "verdict"))
            review, created = TraceReview.objects.get_or_create(trace_id=trace_pk, annotator=user, defaults={"version": 0})
            complete = review_complete(marks, len(steps), p.record.labels_to_first_error)
            rating = p.record.rating if name == first and p.record.rating is not None else review.rating
            if created or was_changed or review.complete != complete or review.rating != rating:
                review.complete, review.rating = complete, rating
                review.version += 1
                review.updated_at = timezone.now()
                review.save()


_LABEL_FIELDS = [
    "step", "kind", "annotator", "judge", "verdict", "skeleton_refs", "confidence", "reason", "version", "created_at",
    "updated_at",
]
def review_complete(verdicts: dict[int, str], n_steps: int, to_first_error: bool = False) -> bool:
    """Is an imported review complete? When every step is labelled; and, for
    a trace whose labels follow a first-error protocol (``to_first_error``:
    ProcessBench, where nothing after the earliest error is judged), also
    when the labels run without a gap from step 1 to an invalid step and
    stop there. Such a trace's first error is determined (docs/agreement.md);
    its process score still needs every step (scoring's ``complete_traces``)."""
    if len(verdicts) == n_steps and all(1 <= k <= n_steps for k in verdicts):
        return True
    if not to_first_error:
        return False
    k = len(verdicts)
    return k >= 1 and set(verdicts) == set(range(1, k + 1)) and verdicts[k] == "invalid" \
        and all(verdicts[i] != "invalid" for i in range(1, k))


_REVIEW_FIELDS = ["trace", "annotator", "version", "complete", "rating", "flag", "skipped", "updated_at", "updated_via"]
_TRACE_FIELDS = [
    "study", "problem", "model", "trace_id", "raw", "thought", "answer", "answer_correct", "answer_origin",
    "auto_answer_correct", "n_steps", "n_thought_steps", "thought_truncated", "empty", "steps_hash", "flagged", "meta",
    "created_at", "regime",
]


def write_records(study: Study, records: Iterable[ProblemIn | TraceIn], *, actor=None) -> ImportReport:
    """Records made by code (generation runs) through the import's own writer:
    the same segmentation, answer extraction and check, and the same
    idempotence on ``trace_id``, as a file. A record that cannot be kept is
    reported in ``rejected`` (its 1-based position as the line); the others
    are written. Call inside a transaction."""
    report = ImportReport()
    writer = _Writer(study, report, actor, skip_invalid=True)
    for n, record in enumerate(records, start=1):
        report.read += 1
        try:
            writer.add(n, record)
        except RecordError as exc:
            writer.reject(n, str(exc))
    writer.finish()
    report.committed = True
    return report


def label_snapshot(label: StepLabel | None) -> dict[str, Any] | None:
    if label is None:
        return None
    return {
        "verdict": label.verdict,
        "skeleton_refs": list(label.skeleton_refs or []),
        "confidence": label.confidence,
        "reason": label.reason,
    }


@contextmanager
def _startup_objects_frozen() -> Iterator[None]:
    """Keep the cyclic garbage collector off the objects that existed before
    the import (Django, the project's modules: several hundred thousand).

    An import allocates millions of short-lived containers and keeps a few
    thousand pending records at a time; each full collection that this
    triggers would walk the whole start-up heap again, about a fifth of the
    import's CPU time on the GSM8K benchmark. Objects created during the
    import are collected as usual, and ``unfreeze`` hands the frozen ones
    back to the collector afterwards, so nothing is kept longer than the
    import. (Process-wide: a second import running in another thread at the
    same moment is merely no faster once the first one ends.)"""
    gc.freeze()
    # A young collection every 50,000 allocations instead of 700: an import's objects die by reference count
    # (records, rows, batches), so the frequent young collections found nothing to free and cost about a
    # tenth of the GSM8K import's CPU. Cyclic garbage, if any, is still collected, a little later.
    thresholds = gc.get_threshold()
    gc.set_threshold(IMPORT_GC_THRESHOLD, *thresholds[1:])
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)
        gc.unfreeze()


def _size(stream: IO[bytes]) -> int:
    pos = stream.tell()
    stream.seek(0, 2)
    size = stream.tell()
    stream.seek(pos)
    return size


def import_stream(
    study: Study,
    stream: IO[bytes],
    fmt: str = "reasonaudit",
    *,
    skip_invalid: bool = False,
    actor=None,
    progress: Progress | None = None,
    thought_segmenter: str | None = None,
) -> ImportReport:
    """Import a seekable binary stream into ``study``; see the module docstring. ``thought_segmenter``
    cuts this import's thoughts (default: the study's ``thought_segmenter``)."""
    report = ImportReport()
    if fmt not in adapters.FORMATS:
        report.reject(0, f"unknown format {fmt!r}; choose one of {', '.join(adapters.FORMATS)}")
        return report
    size = _size(stream)
    limit = settings.IMPORT_MAX_BYTES
    if size > limit:
        report.reject(0, f"the file is {size:,} bytes, over the import limit of {limit:,} bytes")
        return report
    if size == 0:
        report.reject(0, "the file is empty")
        return report

    with _startup_objects_frozen(), transaction.atomic():
        # The registered wrappers (the search index) close before the rollback below is asked for, so a
        # savepoint of theirs does not take that rollback as its own: it stays the whole import's.
        with ExitStack() as wrappers:
            for wrapper in _IMPORT_WRAPPERS:
                wrappers.enter_context(wrapper())
            writer = _Writer(study, report, actor, skip_invalid=skip_invalid, thought_segmenter=thought_segmenter)
            limits = TextLimits(settings.IMPORT_MAX_STATEMENT_CHARS, settings.IMPORT_MAX_OUTPUT_CHARS,
                                settings.IMPORT_MAX_THOUGHT_CHARS)
            lines_seen = -1
            for line, item in adapters.records(stream, fmt):
                if line != lines_seen:
                    lines_seen = line
                    report.read += 1
                    if progress and report.read % 500 == 0:
                        progress(stream.tell(), size)
                try:
                    if isinstance(item, RecordError):
                        raise item
                    writer.add(line, validate(item, limits))
                except RecordError as exc:
                    writer.reject(line, str(exc))
                if writer.full():
                    writer.flush()
            writer.finish()
        if report.read == 0 and not report.rejected:
            report.reject(0, "the file has no records (only blank lines)")
        if report.rejected and not skip_invalid:
            transaction.set_rollback(True)
            report.problems_created = report.traces_created = report.steps_created = 0
            report.labels_created = report.labels_updated = report.unchanged = 0
            report.committed = False
        else:
            report.committed = True
    report.rejected.sort(key=lambda r: r["line"])
    if progress:
        progress(size, size)
    return report
