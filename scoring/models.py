"""Stored scoring profiles and per-(trace, source, profile) scores.

The arithmetic lives in ``scoring.core`` (pure); these models only persist
its inputs (profiles) and outputs (scores) so pages read, never recompute.
"""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models
from django.urls import reverse
from django.utils import timezone

from runs.models import RunRecord
from scoring.core.profile import Profile


class ScoringProfile(models.Model):
    """A named, versioned parameter set. Editing creates a new version row."""

    study = models.ForeignKey("annotation.Study", on_delete=models.CASCADE, related_name="profiles")
    name = models.CharField(max_length=100)
    version = models.PositiveIntegerField(default=1)
    params = models.JSONField(default=dict)
    is_current = models.BooleanField(default=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["study", "name", "-version"]
        constraints = [
            models.UniqueConstraint(fields=["study", "name", "version"], name="profile_unique_version"),
            models.UniqueConstraint(
                fields=["study", "name"], condition=models.Q(is_current=True), name="profile_one_current_version"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name} v{self.version}"

    def get_absolute_url(self) -> str:
        return reverse("scoring-profiles", args=[self.study_id]) + f"#profile-{self.name}"

    def as_profile(self) -> Profile:
        """The validated core profile (missing keys take the paper's defaults)."""
        return Profile.from_dict(self.params)


class ScoreSet(models.Model):
    """The stored scores of one study for one label source under one profile
    version: written whole by one recompute, replaced whole by the next."""

    study = models.ForeignKey("annotation.Study", on_delete=models.CASCADE, related_name="score_sets")
    source = models.CharField(max_length=120)  # human | final | judge:NAME
    profile = models.ForeignKey(ScoringProfile, on_delete=models.CASCADE, related_name="score_sets")
    computed_at = models.DateTimeField(default=timezone.now)
    # New on every write; part of every cache key derived from these scores
    # (primary keys are reused after rollbacks, a token is not).
    token = models.CharField(max_length=32, default="")
    n_traces = models.PositiveIntegerField(default=0)
    # The study-wide hazard table the scores were computed with.
    hazard = models.JSONField(default=list, blank=True)
    # Every recovered thought error of the source: [trace pk, error step, recovering step]
    # (scoring.core.thought.recoveries), for the distances to recovery on the analytics pages.
    recoveries = models.JSONField(default=list, blank=True)
    job = models.ForeignKey("annotation.Job", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["study", "source", "profile"], name="scoreset_unique_source_profile"),
        ]

    def __str__(self) -> str:
        return f"{self.study} / {self.source} / {self.profile}"

    def new_token(self) -> None:
        self.token = uuid.uuid4().hex


class TraceScore(models.Model):
    """One trace's scores from one label source under one profile version
    (through its score set). Only traces whose labels from the source are
    complete have a row; empty traces are complete by definition."""

    # A derived table, rebuilt whole by every recompute: no database-level
    # foreign keys, whose per-row checks at commit cost as much as writing
    # the rows. Integrity is the application's: rows are written only for
    # traces the same recompute read, and deleting a score set or a trace
    # cascades here through Django's collector (on_delete=CASCADE works
    # without a constraint). A trace deleted between the read and the write
    # leaves rows that no page joins to, gone at the next recompute.
    # No index of its own: the unique constraint below leads with it.
    score_set = models.ForeignKey(ScoreSet, on_delete=models.CASCADE, related_name="scores", db_index=False,
                                  db_constraint=False)
    # Indexed (the default): cascades from deleted traces.
    trace = models.ForeignKey("annotation.Trace", on_delete=models.CASCADE, related_name="scores",
                              db_constraint=False)
    n_steps = models.PositiveIntegerField()
    l_gold = models.PositiveIntegerField()
    coverage = models.PositiveIntegerField()
    first_error = models.PositiveIntegerField(null=True)
    answer_correct = models.BooleanField()
    s_base = models.FloatField(null=True)
    p_fmt = models.FloatField()
    p_haz = models.FloatField()
    s_hcrs = models.FloatField(null=True)
    s_prm = models.FloatField()
    s_prm_haz = models.FloatField()
    process = models.FloatField()
    holistic = models.FloatField()
    lucky_guess = models.BooleanField()
    empty = models.BooleanField()
    validity_rate = models.FloatField(null=True)  # share of steps not invalid (SVR per trace)
    all_valid = models.BooleanField(null=True)  # no invalid step (VSR per trace)
    # The thinking channel (scoring.core.thought, docs/scoring.md section 9): the same for every
    # profile of a source, whatever channels the profile's scores read.
    n_thought_steps = models.PositiveIntegerField(default=0, db_default=0)
    thought_errors = models.PositiveIntegerField(default=0, db_default=0)
    recovered_errors = models.PositiveIntegerField(default=0, db_default=0)
    first_unrecovered = models.PositiveIntegerField(null=True)  # reading-order step; null: none
    lucky_unrecovered = models.BooleanField(default=False, db_default=False)  # correct though an error reached it

    class Meta:
        constraints = [
            # Also the index of every page read: WHERE score_set_id = ...
            models.UniqueConstraint(fields=["score_set", "trace"], name="tracescore_one_per_set"),
        ]
        indexes = [
            # The lucky-guesses page in its default order (process, then trace) and its count: a page is cut from
            # the set's lucky rows alone, never from every row of the set (1M at 1M traces, issue 33).
            models.Index(fields=["score_set", "process", "trace"], condition=models.Q(lucky_guess=True),
                         name="tracescore_lucky"),
        ]

    def __str__(self) -> str:
        return f"{self.trace_id} in set {self.score_set_id}"


class ScoreRun(RunRecord):
    """A score recompute as a run of the run engine (kind "score", scoring.runclient): its items are the
    study's chunks of traces twice over -- item i < K adds up chunk i's hazard counts, item K + i scores
    and writes chunk i -- then its summary steps -- item 2K + j stores the j-th summary of the scores or
    warms the cache (``summaries``) -- so every free worker process takes chunks. What the chunks add up is
    merged here, in each chunk's transaction; the last chunk of the first pass adds the second pass's
    chunks, the last of the second swaps the new score sets in and adds the summary steps' chunks."""

    #: The kind of run (runs.engine) a score job is; its client is scoring.runclient.ScoreClient.
    KIND = "score"

    class Phase(models.TextChoices):
        HAZARDS = "hazards"  # adding up the hazard counts
        SCORES = "scores"  # scoring and writing the chunks
        SUMMARIES = "summaries"  # the new score sets are the study's; storing what is summarized of them
        PUBLISHED = "published"  # the new score sets are the study's, and every summary of them is stored

    job = models.OneToOneField("annotation.Job", on_delete=models.CASCADE, related_name="score_run")
    run = models.OneToOneField("runs.Run", on_delete=models.CASCADE, related_name="score_run")
    # Profile name -> the pk of the version scored (fixed when the run is planned, so every chunk scores
    # the same versions), in scoring order (the default first).
    profiles = models.JSONField(default=dict, blank=True)
    spans = models.JSONField(default=list, blank=True)  # [first trace pk, last trace pk] of each chunk
    # Worked in the process that started it (``score --inline``, eager mode): no tasks are queued.
    inline = models.BooleanField(default=False)
    phase = models.CharField(max_length=20, choices=Phase.choices, default=Phase.HAZARDS)
    merged = models.PositiveIntegerField(default=0)  # chunks of the current phase merged
    # The first pass's sums (scoring.score_jobs.Tally): judges with labels, hazard counts per
    # "source|channels", traces and labels read.
    tally = models.JSONField(default=dict, blank=True)
    sources = models.JSONField(default=list, blank=True)  # the label sources, once the first pass is over
    # The second pass's sums (scoring.score_jobs.Written): rows per "source|profile", recovered thought
    # errors per source.
    written = models.JSONField(default=dict, blank=True)
    # The third phase's steps (scoring.score_jobs.summary_steps: the stored-summary hooks by name, then the
    # cache warm-up), fixed when the run is planned: item 2K + j is the j-th.
    summaries = models.JSONField(default=list, blank=True)

    def __str__(self) -> str:
        return f"score run {self.pk} ({self.phase})"

    def summary(self) -> dict:
        """The score job's result (what ``score`` prints and the job page shows)."""
        rows = sum(n for _source, _name, n in (self.written or {}).get("rows", []))
        started = self.job.started_at or self.job.created_at
        return {
            "run": self.pk,
            "sources": self.sources,
            "profiles": list(self.profiles),
            "traces": (self.tally or {}).get("traces", 0),
            "labels": (self.tally or {}).get("labels", 0),
            "rows": rows,
            "chunks": len(self.spans),
            "steps_done": len(self.sources) * len(self.profiles),
            "seconds": {"total": round((timezone.now() - started).total_seconds(), 3)},
            "finished_at": timezone.now().isoformat(),
        }
