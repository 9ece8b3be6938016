"""The domain: studies, problems with skeletons, traces split into steps, and
labels on those steps from annotators, judges and adjudicators.

Visibility lives in the querysets (``visible_to``): a view never filters by
membership itself.
"""

from __future__ import annotations

import json
from typing import Any

from django.conf import settings
from django.db import connection, models
from django.db.models import Exists, OuterRef, Q
from django.urls import reverse
from django.utils import timezone

from reasonlib.step_functions import FUNCTIONS


class Verdict(models.TextChoices):
    VALID = "valid"
    INVALID = "invalid"
    NEUTRAL = "neutral"


class StudyQuerySet(models.QuerySet):
    def visible_to(self, user) -> StudyQuerySet:
        if not user.is_authenticated:
            return self.none()
        return self.filter(memberships__user=user)


#: The longest study description, on the web and in the API: shown on the study page, not a place for data (the
#: column has no limit of its own, so none is enforced by the database or needs a migration).
DESCRIPTION_MAX = 5000


class Study(models.Model):
    class Segmenter(models.TextChoices):
        LINES = "lines"
        PARAGRAPHS = "paragraphs"
        MARKERS = "markers"
        SENTENCES = "sentences"
        # Reasoning moves (reasonlib.segmentation): paragraphs, cut again where "Wait", "Hmm", "Actually"...
        # open a new move; a thought without paragraph breaks by sentence.
        MOVES = "moves", "Reasoning moves"

    name = models.CharField(max_length=200, unique=True)
    description = models.TextField(blank=True)
    # Annotators see no judge verdicts or other annotators' labels on a trace
    # until they have labelled it completely themselves.
    blind = models.BooleanField(default=True)
    # The answer channel's segmenter (the name predates the thinking channel and is kept).
    segmenter = models.CharField(max_length=20, choices=Segmenter.choices, default=Segmenter.LINES)
    # The thinking channel's segmenter: thoughts are prose that changes course mid-paragraph ("Wait, ..."), and
    # some models (gpt-oss) write no paragraph breaks at all, so the reasoning moves, not lines or paragraphs.
    thought_segmenter = models.CharField(max_length=20, choices=Segmenter.choices, default=Segmenter.MOVES,
                                         db_default=Segmenter.MOVES)
    primary_judge = models.ForeignKey(
        "judges.JudgeConfig", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    default_profile = models.ForeignKey(
        "scoring.ScoringProfile", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)

    objects = StudyQuerySet.as_manager()

    class Meta:
        verbose_name_plural = "studies"
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def get_absolute_url(self) -> str:
        return reverse("study", args=[self.pk])


class Membership(models.Model):
    class Role(models.TextChoices):
        ANNOTATOR = "annotator"
        ADJUDICATOR = "adjudicator"
        OWNER = "owner"

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=20, choices=Role.choices, default=Role.ANNOTATOR)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["study", "user"], name="membership_unique_user_per_study")]

    def __str__(self) -> str:
        return f"{self.user} in {self.study} ({self.role})"

    @property
    def can_adjudicate(self) -> bool:
        return self.role in (self.Role.ADJUDICATOR, self.Role.OWNER)

    @property
    def is_owner(self) -> bool:
        return self.role == self.Role.OWNER


class Invitation(models.Model):
    """An owner's invitation of an existing user to a study, with a role: the user becomes a member only
    by accepting it (annotation.members; issue 29, L5). Nobody is added to a study without consent."""

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="invitations")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="invitations")
    role = models.CharField(max_length=20, choices=Membership.Role.choices, default=Membership.Role.ANNOTATOR)
    invited_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["study", "user"], name="invitation_unique_user_per_study")]
        # "my invitations" (the studies page): the unique constraint leads with the study, so the user needs one.
        indexes = [models.Index(fields=["user"], name="invitation_user_idx")]

    def __str__(self) -> str:
        return f"{self.user} invited to {self.study} ({self.role})"


class StudyScopedQuerySet(models.QuerySet):
    """For models that hang off a study through ``study_path``."""

    study_path = "study"

    def visible_to(self, user):
        if not user.is_authenticated:
            return self.none()
        return self.filter(**{f"{self.study_path}__memberships__user": user})


# Problems that belong to a diagnostic suite (fidelity variants) or a benchmark
# (abstraction items) rather than to the study's own problem set. A higher app
# registers the lookup that marks them from its AppConfig.ready (annotation
# cannot import it), e.g. ("fidelity_variant__isnull", False). Suite problems
# and their traces stay out of everything that describes the study -- lists,
# counts, search, judge/scanner/tagging runs, scores and everything read from
# them, exports, evidence -- unless a door about the suite asks for them:
# ``of_study(study)`` is where those doors start, ``of_study(study,
# suites=True)`` the opt-in (docs/architecture.md, "Own items").
_SUITE_LOOKUPS: list[tuple[str, Any]] = []
# Problems a row of another model points at (model, its field to the problem): a fidelity variant.
_SUITE_RELATIONS: list[tuple[type[models.Model], str]] = []


def register_suite_problems(lookup: str, value: Any) -> None:
    """Suite problems are those where the problem's own ``lookup`` is ``value``."""
    if (lookup, value) not in _SUITE_LOOKUPS:
        _SUITE_LOOKUPS.append((lookup, value))


def register_suite_relation(model: type[models.Model], field: str) -> None:
    """Suite problems are those a row of ``model`` points at through ``field``. Matched with EXISTS, not the
    reverse relation's LEFT JOIN ... IS NOT NULL: PostgreSQL estimated that always true (99,500 of 100,000
    problems where none matched), so every own-items query was planned for a hundredth of its rows; EXISTS is
    planned as a (anti-)semi-join from the other table's statistics."""
    if (model, field) not in _SUITE_RELATIONS:
        _SUITE_RELATIONS.append((model, field))


def suite_parts(prefix: str = "") -> list[Q]:
    """One Q per registered rule, each matching suite problems (``prefix``: the path to the problem, e.g.
    ``"problem__"`` from a trace)."""
    parts = [Q(**{f"{prefix}{lookup}": value}) for lookup, value in _SUITE_LOOKUPS]
    parts += [Q(Exists(model.objects.filter(**{field: OuterRef(f"{prefix}pk")})))
              for model, field in _SUITE_RELATIONS]
    return parts


def suite_q(prefix: str = "") -> Q | None:
    """Q matching suite problems (``prefix`` as suite_parts); None when no app registered any."""
    q = None
    for part in suite_parts(prefix):
        q = part if q is None else q | part
    return q


def not_suite(prefix: str = "") -> list[Q]:
    """The conditions of own items, one per rule, for ``filter(*...)``: each negated on its own, so PostgreSQL
    sees NOT EXISTS at the top of the WHERE clause and plans an anti-join from the other table's statistics
    (NOT of the rules' OR made it a filter estimated to keep half the rows)."""
    return [~part for part in suite_parts(prefix)]


def suite_problems_sql(study_id: int) -> tuple[str, tuple] | None:
    """SQL selecting the pks of the study's suite problems (for raw-SQL readers such as the score job's:
    ``problem NOT IN (...)``), or None when no app registered any rule."""
    q = suite_q()
    if q is None:
        return None
    # Without Problem's default ordering, which would join the study and sort its name into every row: a
    # subquery that wide is too big for PostgreSQL to hash, and NOT IN then runs it once per outer row (27 s
    # per chunk of 20,000 traces at 1M traces, where the hashed form takes 0.2 s).
    return Problem.objects.filter(study_id=study_id).filter(q).order_by().values("pk").query.sql_with_params()


class ProblemQuerySet(StudyScopedQuerySet):
    def of_study(self, study: Study | int, *, suites: bool = False) -> ProblemQuerySet:
        """The study's problems as every study-wide door starts from them: its own (suites=True: with the
        suite variants and benchmark items, for the pages and runs about them)."""
        return self.filter(study=study).in_scope(suites)

    def own(self) -> ProblemQuerySet:
        """The study's own problems: without suite variants."""
        return self.filter(*not_suite())

    def suite_members(self) -> ProblemQuerySet:
        q = suite_q()
        return self.none() if q is None else self.filter(q)

    def in_scope(self, include_suites: bool = False) -> ProblemQuerySet:
        return self if include_suites else self.own()

    def with_tag(self, tag: str) -> ProblemQuerySet:
        """The problems tagged ``tag`` exactly (the web list's and the API's ``tag`` filter)."""
        if connection.features.supports_json_field_contains:
            return self.filter(tags__contains=[tag])
        # SQLite: match the JSON text of the list, quotes included, so "alg" is not "algebra".
        return self.filter(tags__icontains=json.dumps(tag))


class Problem(models.Model):
    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="problems")
    problem_id = models.CharField(max_length=200)
    statement = models.TextField()
    gold_answer = models.TextField(blank=True)
    domain = models.CharField(max_length=100, blank=True)
    tags = models.JSONField(default=list, blank=True)
    meta = models.JSONField(default=dict, blank=True)
    # Denormalised from the newest approved skeleton so scoring reads one
    # column instead of a join per trace.
    approved_skeleton = models.ForeignKey(
        "annotation.Skeleton", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    l_gold = models.PositiveSmallIntegerField(default=0)
    created_at = models.DateTimeField(default=timezone.now)

    objects = ProblemQuerySet.as_manager()

    class Meta:
        ordering = ["study", "problem_id"]
        constraints = [
            models.UniqueConstraint(fields=["study", "problem_id"], name="problem_unique_id_per_study"),
        ]
        indexes = [
            # Problem list filtered by domain.
            models.Index(fields=["study", "domain"], name="problem_study_domain_idx"),
        ]

    def __str__(self) -> str:
        return self.problem_id

    def get_absolute_url(self) -> str:
        return reverse("problem", args=[self.pk])


class Skeleton(models.Model):
    """One version of a problem's minimal reasoning skeleton. Versions are never edited in place."""

    class Status(models.TextChoices):
        DRAFT = "draft"
        APPROVED = "approved"

    problem = models.ForeignKey(Problem, on_delete=models.CASCADE, related_name="skeletons")
    version = models.PositiveIntegerField()
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.DRAFT)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)
    approved_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    approved_at = models.DateTimeField(null=True, blank=True)
    note = models.TextField(blank=True)

    class Meta:
        ordering = ["problem", "-version"]
        constraints = [
            models.UniqueConstraint(fields=["problem", "version"], name="skeleton_unique_version"),
        ]

    def __str__(self) -> str:
        return f"{self.problem} v{self.version} ({self.status})"


class SkeletonStep(models.Model):
    skeleton = models.ForeignKey(Skeleton, on_delete=models.CASCADE, related_name="steps")
    position = models.PositiveSmallIntegerField()  # 1-based
    text = models.TextField()
    # "check" would shadow Model.check(); the import key stays "check".
    check_expr = models.CharField(max_length=500, blank=True)

    class Meta:
        ordering = ["skeleton", "position"]
        constraints = [
            models.UniqueConstraint(fields=["skeleton", "position"], name="skeletonstep_unique_position"),
        ]

    def __str__(self) -> str:
        return f"{self.position}. {self.text[:60]}"


class TraceQuerySet(StudyScopedQuerySet):
    def of_study(self, study: Study | int, *, suites: bool = False) -> TraceQuerySet:
        """The study's traces as every study-wide door starts from them (search, run scopes, exports,
        menus, counts): its own (suites=True: with the suite variants' and benchmark items' traces, for
        the pages and runs about them)."""
        return self.filter(study=study).in_scope(suites)

    def with_problem(self) -> TraceQuerySet:
        return self.select_related("problem")

    def own(self) -> TraceQuerySet:
        """Traces of the study's own problems: not of suite variants."""
        return self.filter(*not_suite("problem__"))

    def suite_members(self) -> TraceQuerySet:
        q = suite_q("problem__")
        return self.none() if q is None else self.filter(q)

    def in_scope(self, include_suites: bool = False) -> TraceQuerySet:
        return self if include_suites else self.own()


class Trace(models.Model):
    class AnswerOrigin(models.TextChoices):
        NONE = "none", "not decided"
        IMPORTED = "imported"
        AUTOMATIC = "automatic"
        REVIEWER = "reviewer"

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="traces")
    problem = models.ForeignKey(Problem, on_delete=models.CASCADE, related_name="traces")
    model = models.CharField(max_length=200)
    trace_id = models.CharField(max_length=300)
    raw = models.TextField(blank=True)
    # The thinking channel's text (docs/import-format.md): every thought block of the output, joined in order
    # by a blank line. Thought steps' offsets index this text.
    thought = models.TextField(blank=True)
    answer = models.TextField(blank=True)
    answer_correct = models.BooleanField(null=True)
    answer_origin = models.CharField(max_length=20, choices=AnswerOrigin.choices, default=AnswerOrigin.NONE)
    # The automatic check is kept even when an import or a reviewer overrides it.
    auto_answer_correct = models.BooleanField(null=True)
    # Steps over both channels (the Step rows); the first n_thought_steps of them are the thought's.
    n_steps = models.PositiveIntegerField(default=0)
    n_thought_steps = models.PositiveIntegerField(default=0, db_default=0)
    # The thought was cut before it closed (max_tokens): it is kept, and the trace has no answer channel.
    thought_truncated = models.BooleanField(default=False, db_default=False)
    empty = models.BooleanField(default=False)
    steps_hash = models.CharField(max_length=64)
    flagged = models.BooleanField(default=False)
    meta = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    # The inference regime the trace was produced under (generation.md): model as the server reported it,
    # endpoint host, API kind, prompt template and messages hash, sampling settings, k, tools, continuation
    # mode, code version. Empty when the source did not say.
    regime = models.JSONField(default=dict, blank=True)

    objects = TraceQuerySet.as_manager()

    class Meta:
        ordering = ["study", "problem", "model"]
        constraints = [
            models.UniqueConstraint(fields=["study", "trace_id"], name="trace_unique_id_per_study"),
        ]
        indexes = [
            # Trace list and leaderboard filtered by model.
            models.Index(fields=["study", "model"], name="trace_study_model_idx"),
            # The web trace list's order (problem, model) without sorting the study.
            models.Index(fields=["study", "problem", "model", "id"], name="trace_study_problem_model_idx"),
        ]

    def __str__(self) -> str:
        return self.trace_id

    def get_absolute_url(self) -> str:
        return reverse("trace", args=[self.pk])

    @property
    def n_answer_steps(self) -> int:
        return self.n_steps - self.n_thought_steps

    def channel_text(self, channel: str) -> str:
        """The text a step of ``channel`` has its offsets in: ``thought`` for the thinking channel, ``raw``
        (the output as received) for the answer channel -- see docs/import-format.md."""
        return self.thought if channel == Step.Channel.THOUGHT else self.raw


class Step(models.Model):
    class Channel(models.TextChoices):
        THOUGHT = "thought"
        ANSWER = "answer"

    # No index of its own: the unique (trace, index) below starts with it and serves every look-up, join and
    # cascade by trace, so a second B-tree would only be one more write per step (2M steps in an import).
    trace = models.ForeignKey(Trace, on_delete=models.CASCADE, related_name="steps", db_index=False)
    # 1-based and unique per trace over both channels, in reading order: thought steps 1..T, then answer steps.
    index = models.PositiveIntegerField()
    # db_default too: raw inserts that predate the channel (and name no channel) write answer steps.
    channel = models.CharField(max_length=8, choices=Channel.choices, default=Channel.ANSWER, db_default=Channel.ANSWER)
    text = models.TextField()
    # Offsets into the step's channel text (Trace.channel_text); null when the steps were given, not segmented.
    start = models.PositiveIntegerField(null=True, blank=True)
    end = models.PositiveIntegerField(null=True, blank=True)

    class Meta:
        ordering = ["trace", "index"]
        constraints = [
            models.UniqueConstraint(fields=["trace", "index"], name="step_unique_index_per_trace"),
        ]

    def __str__(self) -> str:
        return f"{self.trace_id}#{self.index}"


class TraceClaims(models.Model):
    """Each step's claim keys (the arithmetic it gets wrong and right), stored by the mechanistic judge when it
    parses the trace, so the score recompute's thought recoveries read them instead of parsing every step
    again (annotation/stored_claims.py; the text's form: reasonlib/verifier/stored_claims.py).

    One row per trace, not per step: at 10M steps that is a tenth of the rows to write and of their
    headers and index entries to keep, and the recompute reads whole traces anyway. A step's text does
    not change once imported (a re-import with other steps is refused, nothing edits a step), so a row
    is only ever stale by ``version`` (the parser's, reasonlib.verifier.stored_claims.CLAIMS_VERSION) or
    by a migration that re-segments traces: the reader uses a row only when it has the current version
    and one line per step of the trace, and parses the steps otherwise. A migration that rewrites step
    texts should delete the rows of the traces it changes."""

    trace = models.OneToOneField(Trace, on_delete=models.CASCADE, primary_key=True, related_name="stored_claims")
    version = models.PositiveSmallIntegerField()
    steps = models.TextField()

    def __str__(self) -> str:
        return f"claims of {self.trace_id} (v{self.version})"


class StepLabelQuerySet(StudyScopedQuerySet):
    study_path = "step__trace__study"


class StepLabel(models.Model):
    """One source's label on one step. A source is an annotator, a judge
    configuration, or the adjudication (at most one per step)."""

    class Kind(models.TextChoices):
        HUMAN = "human"
        JUDGE = "judge"
        ADJUDICATION = "adjudication"

    step = models.ForeignKey(Step, on_delete=models.CASCADE, related_name="labels")
    kind = models.CharField(max_length=20, choices=Kind.choices)
    annotator = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE, related_name="step_labels"
    )
    judge = models.ForeignKey("judges.JudgeConfig", null=True, blank=True, on_delete=models.CASCADE, related_name="labels")
    verdict = models.CharField(max_length=10, choices=Verdict.choices)
    skeleton_refs = models.JSONField(default=list, blank=True)
    confidence = models.FloatField(null=True, blank=True)
    reason = models.TextField(blank=True)
    version = models.PositiveIntegerField(default=1)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)

    objects = StepLabelQuerySet.as_manager()

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=(
                    Q(kind="human", annotator__isnull=False, judge__isnull=True)
                    | Q(kind="judge", annotator__isnull=True, judge__isnull=False)
                    | Q(kind="adjudication", annotator__isnull=False, judge__isnull=True)
                ),
                name="steplabel_source_matches_kind",
            ),
            models.UniqueConstraint(
                fields=["step", "annotator"], condition=Q(kind="human"), name="steplabel_one_per_annotator"
            ),
            models.UniqueConstraint(fields=["step", "judge"], condition=Q(kind="judge"), name="steplabel_one_per_judge"),
            models.UniqueConstraint(fields=["step"], condition=Q(kind="adjudication"), name="steplabel_one_final"),
        ]

    def __str__(self) -> str:
        return f"{self.step} {self.source}: {self.verdict}"

    @property
    def source(self) -> str:
        if self.kind == self.Kind.JUDGE:
            return f"judge:{self.judge.name}"
        return "final" if self.kind == self.Kind.ADJUDICATION else "human"


class StepTagQuerySet(StudyScopedQuerySet):
    study_path = "step__trace__study"


class StepTag(models.Model):
    """One source's tag of what a step *does* (reasonlib.step_functions: plan generation, self checking, ...),
    one row per tag: a step can serve several functions. A source is an annotator, a judge configuration,
    or a published analysis brought in by an import (``origin`` names it, e.g. "thought-anchors")."""

    class Kind(models.TextChoices):
        HUMAN = "human"
        JUDGE = "judge"
        IMPORTED = "imported"

    step = models.ForeignKey(Step, on_delete=models.CASCADE, related_name="tags")
    kind = models.CharField(max_length=20, choices=Kind.choices)
    annotator = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE, related_name="step_tags"
    )
    judge = models.ForeignKey("judges.JudgeConfig", null=True, blank=True, on_delete=models.CASCADE,
                              related_name="step_tags")
    origin = models.CharField(max_length=100, blank=True)
    tag = models.CharField(max_length=40, choices=[(n, label) for n, label, _ in FUNCTIONS])
    created_at = models.DateTimeField(default=timezone.now)

    objects = StepTagQuerySet.as_manager()

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=(
                    Q(kind="human", annotator__isnull=False, judge__isnull=True, origin="")
                    | Q(kind="judge", annotator__isnull=True, judge__isnull=False, origin="")
                    | Q(kind="imported", annotator__isnull=True, judge__isnull=True) & ~Q(origin="")
                ),
                name="steptag_source_matches_kind",
            ),
            models.UniqueConstraint(fields=["step", "annotator", "tag"], condition=Q(kind="human"),
                                    name="steptag_one_per_annotator_and_tag"),
            models.UniqueConstraint(fields=["step", "judge", "tag"], condition=Q(kind="judge"),
                                    name="steptag_one_per_judge_and_tag"),
            models.UniqueConstraint(fields=["step", "origin", "tag"], condition=Q(kind="imported"),
                                    name="steptag_one_per_origin_and_tag"),
        ]

    def __str__(self) -> str:
        return f"{self.step} {self.source}: {self.tag}"

    @property
    def source(self) -> str:
        if self.kind == self.Kind.JUDGE:
            return f"judge:{self.judge.name}"
        return f"imported:{self.origin}" if self.kind == self.Kind.IMPORTED else "human"


class LabelHistory(models.Model):
    """Append-only audit trail: every change to a StepLabel, before and after."""

    # No index of its own: labelhistory_step_at_idx (step, at) below serves every look-up by step and the cascade.
    # A second index of the step alone was one more index entry per history row (10M per judge run at 1M traces,
    # 422 MB).
    step = models.ForeignKey(Step, on_delete=models.CASCADE, related_name="history", db_index=False)
    label = models.ForeignKey(StepLabel, null=True, blank=True, on_delete=models.SET_NULL, related_name="history")
    kind = models.CharField(max_length=20, choices=StepLabel.Kind.choices)
    source_name = models.CharField(max_length=200)  # username or judge name, kept if the source goes
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    at = models.DateTimeField(default=timezone.now)
    before = models.JSONField(null=True, blank=True)
    after = models.JSONField(null=True, blank=True)
    via = models.CharField(max_length=50, blank=True)  # web, api, import, judge run, adjudication

    class Meta:
        ordering = ["step", "at", "pk"]
        indexes = [models.Index(fields=["step", "at"], name="labelhistory_step_at_idx")]


class TraceReview(models.Model):
    """An annotator's work on a whole trace: the version the labels API and the
    review page lock on, completeness, the holistic rating and flags."""

    class Flag(models.TextChoices):
        NONE = "", "none"
        BAD_PROBLEM = "bad_problem", "bad problem"
        CANT_JUDGE = "cant_judge", "can't judge"

    trace = models.ForeignKey(Trace, on_delete=models.CASCADE, related_name="reviews")
    annotator = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="reviews")
    version = models.PositiveIntegerField(default=0)
    complete = models.BooleanField(default=False)
    rating = models.FloatField(null=True, blank=True)
    flag = models.CharField(max_length=20, choices=Flag.choices, blank=True, default="")
    skipped = models.BooleanField(default=False)
    updated_at = models.DateTimeField(default=timezone.now)
    # Where the last change came from ("web", "api", "import"): named in the
    # 409 message so a reviewer knows which tab or script overtook them.
    updated_via = models.CharField(max_length=20, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["trace", "annotator"], name="tracereview_one_per_annotator"),
            models.CheckConstraint(
                condition=Q(rating__isnull=True) | Q(rating__gte=0, rating__lte=10), name="tracereview_rating_0_10"
            ),
        ]


class Assignment(models.Model):
    """A trace in an annotator's queue. Made by an owner (round-robin, ``k``
    annotators per trace, stratified by model); the queue is read in
    ``position`` order, which interleaves the models."""

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="assignments")
    trace = models.ForeignKey(Trace, on_delete=models.CASCADE, related_name="assignments")
    annotator = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="assignments")
    position = models.PositiveIntegerField()
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["study", "annotator", "position"]
        constraints = [
            models.UniqueConstraint(fields=["trace", "annotator"], name="assignment_one_per_annotator"),
        ]
        indexes = [
            # "My queue": an annotator's assignments in a study, in order.
            models.Index(fields=["study", "annotator", "position"], name="assignment_queue_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.trace_id} -> {self.annotator_id} #{self.position}"


class Job(models.Model):
    """A unit of background work with progress: imports, judge runs, scoring, exports."""

    class Kind(models.TextChoices):
        IMPORT = "import"
        JUDGE = "judge"
        SCORE = "score"
        EXPORT = "export"

    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        SUCCEEDED = "succeeded"
        PARTIAL = "partial"  # finished, some items failed (runs of model calls)
        FAILED = "failed"
        CANCELLED = "cancelled"

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="jobs")
    kind = models.CharField(max_length=20, choices=Kind.choices)
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.QUEUED)
    params = models.JSONField(default=dict, blank=True)
    input_file = models.FileField(upload_to="uploads/%Y/%m/", blank=True)
    output_file = models.FileField(upload_to="exports/%Y/%m/", blank=True)
    done = models.PositiveIntegerField(default=0)
    failed = models.PositiveIntegerField(default=0)
    total = models.PositiveIntegerField(default=0)
    result = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True)
    cancel_requested = models.BooleanField(default=False)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    objects = StudyScopedQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["study", "kind", "-created_at"], name="job_study_kind_idx")]

    def __str__(self) -> str:
        return f"{self.kind} job {self.pk} ({self.status})"

    def get_absolute_url(self) -> str:
        return reverse("job", args=[self.pk])

    @property
    def finished(self) -> bool:
        return self.status in (self.Status.SUCCEEDED, self.Status.PARTIAL, self.Status.FAILED, self.Status.CANCELLED)

    @property
    def percent(self) -> int:
        return int(100 * self.done / self.total) if self.total else (100 if self.finished else 0)


class StudySummary(models.Model):
    """Counts over every trace and label of a study (annotation.study_summary): traces, traces reviewed
    completely by anyone, traces a judge labelled, open disagreements. Written by the score job
    (which every change of the data queues) and marked stale by the change itself (signals.data_changed),
    so the study list and the study page read one row instead of grouping a million labels, and say how
    old it is while the job recomputes it; with no row (never computed) they count from the data."""

    study = models.OneToOneField(Study, on_delete=models.CASCADE, primary_key=True, related_name="summary")
    counts = models.JSONField()
    computed_at = models.DateTimeField(default=timezone.now)
    # The data changed since computed_at (the latest change at marked_at): pages show the counts as of
    # computed_at until the score job that the change queued writes them anew (issue 33: counting from the
    # data took a minute a page at a million traces, for the twelve minutes of that job).
    stale = models.BooleanField(default=False)
    marked_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"summary of study {self.study_id}"


class SummaryDisagreement(models.Model):
    """A step whose labels disagree (annotation.review.disagreement_step_ids, adjudicated or not),
    stored with its study's StudySummary by the same job and as current as that row (its ``stale``):
    the adjudication page and the disagreement filter read these instead of grouping every label."""

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="+")
    # A derived table rewritten whole by each job: no database foreign key to check per row.
    step = models.ForeignKey(Step, on_delete=models.DO_NOTHING, db_constraint=False, related_name="summary_disagreements")
    # The step's trace and index, copied: the adjudication page lists the disagreements in (trace, index) order, a
    # page of 20 cut from the (study, trace, index) index. Ordered by the step's own columns, every disagreement
    # step of the study (1.8 million at 1M traces) was joined and sorted for each page (issue 33).
    trace = models.ForeignKey(Trace, on_delete=models.DO_NOTHING, db_constraint=False, db_index=False, related_name="+")
    index = models.PositiveIntegerField()

    class Meta:
        indexes = [models.Index(fields=["study", "step"], name="summary_disagreement_idx"),
                   models.Index(fields=["study", "trace", "index"], name="summary_disagreement_order")]

    def __str__(self) -> str:
        return f"step {self.step_id} of study {self.study_id}"


class OneTimePassword(models.Model):
    """An account whose password was generated and handed over (annotation.members.do_create_account): the
    first sign-in with it spends it (the password becomes unusable at once) and the user must choose their
    own before any other page (annotation.one_time)."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="one_time_password")
    created_at = models.DateTimeField(auto_now_add=True)
    spent_at = models.DateTimeField(null=True, blank=True)
