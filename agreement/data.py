"""What the agreement pages, the API and the exports read from the database,
as pandas tables for ``agreement.core`` (raw SQL, never model
instances for the bulk).

Label sources of agreement (docs/agreement.md, "Label sources"): the three
scoring sources ``final``, ``human`` and ``judge:NAME`` (scoring/sources.py),
and two more that make sense only as a comparison:

* ``adjudicated``: the adjudicated label of a step, else the human consensus
  -- ``final`` without its fallback to the primary judge, so a judge is never
  measured against its own labels;
* ``annotator:USERNAME``: one annotator's labels (complete reviews only, as
  for ``human``).

Per-trace scores (``P``, first error) are read from the stored ``TraceScore``
rows of the source under the profile when they exist; otherwise (the two
sources above, or a set not computed yet) they are computed here with
``scoring.core.scores.score_traces`` exactly as a recompute would (hazard estimated
over the whole study from the same source).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from django.contrib.auth import get_user_model
from django.db.models import Count, Max

from agreement.core import processbench
from annotation import study_summary
from annotation.models import Step, StepLabel, Study, StudySummary, Trace, TraceReview
from scoring import sources, storage
from scoring.core.labels import final_labels, human_consensus
from scoring.core.scores import estimate_hazard, score_traces
from scoring.models import ScoreSet, ScoringProfile

FINAL, HUMAN = sources.FINAL, sources.HUMAN
ADJUDICATED = "adjudicated"
JUDGE_PREFIX = sources.JUDGE_PREFIX
ANNOTATOR_PREFIX = "annotator:"
#: Sources with stored scores (the recompute writes one set per source and profile).
SCORED_SOURCES = (FINAL, HUMAN)
#: The score columns the agreement reads.
SCORE_COLUMNS = ["n_steps", "first_error", "answer_correct", "s_hcrs", "s_prm", "process", "holistic"]

UnknownSource = sources.UnknownSource


def judge_pks(study: Study) -> dict[str, int]:
    return dict(study.judges.values_list("name", "pk"))


def annotator_names(study: Study) -> dict[int, str]:
    """pk -> username of everyone who reviewed a trace of the study (two queries). Every human label has
    its annotator's TraceReview; who they are is stored with the study's summary by the score job
    (annotation.study_summary.reviewer_ids: grouping the reviews takes a second at 300,000 traces) and
    read from the reviews only while none is stored (a stale one with the members who reviewed since)."""
    ids = study_summary.stored_reviewer_ids(study)
    if ids is None:
        ids = study_summary.reviewer_ids(study)
    return dict(get_user_model().objects.filter(pk__in=ids).order_by("pk").values_list("pk", "username"))


def check_source(study: Study, name: str | None, *, judges: dict[str, int] | None = None,
                 annotators: dict[int, str] | None = None) -> str:
    """A valid agreement source name; raises UnknownSource with a plain reason."""
    name = (name or "").strip()
    if name in (FINAL, HUMAN, ADJUDICATED):
        return name
    if name.startswith(JUDGE_PREFIX):
        judges = judge_pks(study) if judges is None else judges
        if name[len(JUDGE_PREFIX):] in judges:
            return name
        raise UnknownSource(f"no judge named {name[len(JUDGE_PREFIX):]!r} in this study")
    if name.startswith(ANNOTATOR_PREFIX):
        annotators = annotator_names(study) if annotators is None else annotators
        if name[len(ANNOTATOR_PREFIX):] in annotators.values():
            return name
        raise UnknownSource(f"no annotator named {name[len(ANNOTATOR_PREFIX):]!r} in this study")
    if not name:
        raise UnknownSource("give a label source: human, final, adjudicated, judge:NAME or annotator:USERNAME")
    raise UnknownSource(f"unknown label source {name!r}; use human, final, adjudicated, judge:NAME or "
                        "annotator:USERNAME")


def _confidences(study_id: int, kind: str, column: str, pk: int,
                 span: tuple[int, int] | None = None) -> pd.DataFrame:
    """trace_id, step, confidence of one source's labels that carry a confidence (of the traces with pks
    in ``span``)."""
    lab, st, tr = sources._table(StepLabel), sources._table(Step), sources._table(Trace)
    sql = (
        f"SELECT s.{sources._col(Step, 'trace')}, s.{sources._col(Step, 'index')}, "
        f"l.{sources._col(StepLabel, 'confidence')} "
        f"FROM {lab} l JOIN {st} s ON s.{sources._q('id')} = l.{sources._col(StepLabel, 'step')} "
        f"JOIN {tr} t ON t.{sources._q('id')} = s.{sources._col(Step, 'trace')} "
        f"WHERE t.{sources._col(Trace, 'study')} = %s AND l.{sources._col(StepLabel, 'kind')} = %s "
        f"AND l.{sources._col(StepLabel, column)} = %s AND l.{sources._col(StepLabel, 'confidence')} IS NOT NULL"
    )
    params: list[Any] = [study_id, kind, pk]
    if span is not None:
        sql += f" AND s.{sources._col(Step, 'trace')} BETWEEN %s AND %s"
        params += [span[0], span[1]]
    df = sources._frame(sql, params, {"trace_id": "int64", "step": "int64", "confidence": "object"})
    df["confidence"] = df["confidence"].astype(float)
    return df


def read_ratings(study: Study) -> pd.DataFrame:
    """Holistic 0-10 ratings of complete reviews: trace_id, rating, annotator (username)."""
    rows = list(TraceReview.objects.filter(trace__in=Trace.objects.of_study(study).values("pk"), complete=True,
                                          rating__isnull=False)
                .order_by("trace_id", "annotator_id").values_list("trace_id", "rating", "annotator__username"))
    return pd.DataFrame.from_records(rows, columns=["trace_id", "rating", "annotator"]).astype(
        {"trace_id": "int64", "rating": "float64"})


@dataclass
class AgreementData:
    """One read of a study for any number of comparisons.

    ``scope`` (Trace pks, e.g. a calibration sample) restricts every table
    handed out; consensus, completeness and the hazard behind computed
    scores always use the whole study, so a trace's numbers do not depend on
    which sample it is in.
    """

    study: Study
    inputs: sources.Inputs
    annotators: dict[int, str]
    ratings: pd.DataFrame
    scope: np.ndarray | None = None
    #: One chunk of the study (first pk, last pk): its traces, labels, confidences and stored scores only
    #: (agreement.streamed). Consensus and first errors are per trace; computed scores, which need the
    #: study-wide hazard, are not read by chunk (``full_scores`` refuses).
    span: tuple[int, int] | None = None
    _memo: dict[Any, Any] = field(default_factory=dict)

    @classmethod
    def read(cls, study: Study, scope=None) -> AgreementData:
        inputs = sources.read_inputs(study)
        scope_arr = None if scope is None else np.unique(np.asarray(list(scope), dtype=np.int64))
        return cls(study=study, inputs=inputs, annotators=annotator_names(study), ratings=read_ratings(study),
                   scope=scope_arr)

    @classmethod
    def read_chunk(cls, study: Study, span: tuple[int, int], *, annotators: dict[int, str],
                   ratings: pd.DataFrame) -> AgreementData:
        """The traces with pks in ``span`` and their labels; ``annotators`` and ``ratings`` are the study's
        (read once)."""
        return cls(study=study, inputs=sources.read_inputs(study, span), annotators=annotators, ratings=ratings,
                   span=span)

    # -- sources -----------------------------------------------------------
    def check(self, name: str | None) -> str:
        return check_source(self.study, name, judges=self.inputs.judges, annotators=self.annotators)

    def sources(self) -> list[str]:
        """Every source with labels: final, human, adjudicated, judges, annotators."""
        src = self.inputs.labels["src"].to_numpy()
        judges = {pk for pk in (-np.unique(src[src < 0])).tolist()}
        names = [FINAL, HUMAN, ADJUDICATED]
        names += [f"{JUDGE_PREFIX}{n}" for n, pk in sorted(self.inputs.judges.items()) if pk in judges]
        people = {int(pk) for pk in np.unique(src[src > 0]).tolist()}
        names += [f"{ANNOTATOR_PREFIX}{self.annotators[pk]}" for pk in sorted(people, key=lambda p: self.annotators.get(p, ""))
                  if pk in self.annotators]
        return names

    def scoped(self, df: pd.DataFrame) -> pd.DataFrame:
        if self.scope is None:
            return df
        return df.loc[np.isin(df["trace_id"].to_numpy(dtype=np.int64), self.scope)].reset_index(drop=True)

    def human(self) -> pd.DataFrame:
        """The human consensus (sources.human_steps) with n_annotators and n_agree."""
        if "human" not in self._memo:
            labels = self.inputs.labels
            human = labels.loc[labels["src"].to_numpy() > 0, ["trace_id", "step", "src", "verdict", "skeleton_refs"]]
            if human.empty:
                self._memo["human"] = sources.human_steps(labels)
            else:
                self._memo["human"] = human_consensus(human.rename(columns={"src": "annotator"}))
        return self._memo["human"]

    def user_pk(self, username: str) -> int | None:
        for pk, name in self.annotators.items():
            if name == username:
                return pk
        return None

    def full_steps(self, source: str) -> pd.DataFrame:
        """The whole study's step labels of ``source``: trace_id, step,
        verdict, skeleton_refs (``final``/``adjudicated``: also origin)."""
        key = ("steps", source)
        if key in self._memo:
            return self._memo[key]
        labels = self.inputs.labels
        if source == FINAL:
            steps = final_labels(sources.adjudicated_steps(labels), self.human()[sources.STEP_COLUMNS],
                                      sources.judge_steps(labels, self.inputs.primary_judge))
        elif source == ADJUDICATED:
            steps = final_labels(sources.adjudicated_steps(labels), self.human()[sources.STEP_COLUMNS], None)
        elif source.startswith(ANNOTATOR_PREFIX):
            pk = self.user_pk(source[len(ANNOTATOR_PREFIX):])
            mine = labels["src"].to_numpy() == pk if pk is not None else np.zeros(len(labels), dtype=bool)
            steps = labels.loc[mine, sources.STEP_COLUMNS].reset_index(drop=True)
        elif source == HUMAN:
            steps = self.human()
        else:
            steps = sources.source_steps(self.inputs, source)
        self._memo[key] = steps
        return steps

    def steps(self, source: str, *, confidence: bool = False) -> pd.DataFrame:
        """Step labels of ``source`` in scope; with ``confidence``, judges' and
        annotators' labels get a ``confidence`` column when they report any."""
        steps = self.scoped(self.full_steps(source))
        if confidence:
            conf = self.confidences(source)
            if conf is not None:
                steps = steps.merge(conf, on=["trace_id", "step"], how="left")
        return steps

    def confidences(self, source: str) -> pd.DataFrame | None:
        key = ("conf", source)
        if key not in self._memo:
            conf = None
            if source.startswith(JUDGE_PREFIX):
                pk = self.inputs.judges.get(source[len(JUDGE_PREFIX):])
                if pk is not None:
                    conf = _confidences(self.study.pk, StepLabel.Kind.JUDGE, "judge", pk, self.span)
            elif source.startswith(ANNOTATOR_PREFIX):
                pk = self.user_pk(source[len(ANNOTATOR_PREFIX):])
                if pk is not None:
                    conf = _confidences(self.study.pk, StepLabel.Kind.HUMAN, "annotator", pk, self.span)
            self._memo[key] = conf if conf is not None and len(conf) else None
        return self._memo[key]

    def annotator_labels(self) -> pd.DataFrame:
        """Raw human labels of complete reviews in scope: trace_id, step, annotator (username), verdict."""
        labels = self.inputs.labels
        human = labels.loc[labels["src"].to_numpy() > 0, ["trace_id", "step", "src", "verdict"]]
        names = np.asarray([self.annotators.get(int(pk), f"user {pk}") for pk in human["src"].tolist()], dtype=object)
        out = pd.DataFrame({"trace_id": human["trace_id"].to_numpy(), "step": human["step"].to_numpy(),
                            "annotator": names, "verdict": human["verdict"].astype(object).to_numpy()})
        return self.scoped(out)

    def scoped_ratings(self) -> pd.DataFrame:
        return self.scoped(self.ratings)

    def traces(self) -> pd.DataFrame:
        return self.scoped(self.inputs.traces)

    def processbench_splits(self) -> pd.DataFrame:
        """trace_id (pk), split of the traces in scope imported from ProcessBench ("processbench/math-12")."""
        rows = [(pk, processbench.split_of(tid)) for pk, tid in
                Trace.objects.of_study(self.study).filter(trace_id__startswith="processbench/")
                .values_list("pk", "trace_id")]
        frame = pd.DataFrame([r for r in rows if r[1] is not None], columns=["trace_id", "split"])
        return self.scoped(frame.astype({"trace_id": "int64"}))

    # -- scores ------------------------------------------------------------
    def _score_set(self, source: str, profile: ScoringProfile) -> ScoreSet | None:
        key = ("sets", profile.pk)
        if key not in self._memo:  # one query per profile for every source
            self._memo[key] = {s.source: s for s in ScoreSet.objects.filter(study=self.study, profile=profile)}
        return self._memo[key].get(source)

    def full_scores(self, source: str, profile: ScoringProfile) -> tuple[pd.DataFrame, dict[str, Any]]:
        """Per-trace scores of ``source`` for the whole study (complete traces
        only), and where they came from."""
        key = ("scores", source, profile.pk)
        if key in self._memo:
            return self._memo[key]
        stored = None
        if source in SCORED_SOURCES or source.startswith(JUDGE_PREFIX):
            stored = self._score_set(source, profile)
        if stored is None and self.span is not None:
            raise ValueError(f"{source}: no stored scores, and computed ones need the whole study")
        if stored is not None:
            frame = storage.read_scores(stored, columns=SCORE_COLUMNS, span=self.span)
            frame = frame.drop(columns=["trace_id"]).rename(columns={"trace": "trace_id"})
            origin = {"from": "stored", "computed_at": stored.computed_at.isoformat(), "traces": stored.n_traces}
        else:
            steps = self.full_steps(source)
            traces = self.inputs.traces
            core_profile = profile.as_profile()
            hazard = None if core_profile.pinned_hazard is not None else estimate_hazard(traces, steps)
            scored = score_traces(traces, steps, core_profile, hazard=hazard)
            frame = scored.loc[scored["complete"].to_numpy(dtype=bool)].reset_index(drop=True)
            origin = {"from": "computed", "computed_at": None, "traces": int(len(frame))}
        self._memo[key] = (frame, origin)
        return frame, origin

    def scores(self, source: str, profile: ScoringProfile) -> tuple[pd.DataFrame, dict[str, Any]]:
        frame, origin = self.full_scores(source, profile)
        return self.scoped(frame), origin


def data_version(study: Study, scope_key: str = "") -> str:
    """A cheap fingerprint of everything agreement reads (label and review
    counts and last changes, score-set tokens, trace count): a cache key part
    that moves whenever a number could."""
    sets = list(ScoreSet.objects.filter(study=study).order_by("pk").values_list("pk", "token"))
    judges = list(study.judges.order_by("pk").values_list("pk", "name"))
    # The study's stored summary (annotation.study_summary): the score job writes it anew with a new time, and
    # every change of a label, review or trace since marks it with the change's time (data_changed, but for a
    # final verdict). The two times stand for the counts, which group every label of the study (seconds at a
    # million labels).
    stored = StudySummary.objects.filter(study=study).values_list("computed_at", "marked_at").first()
    if stored is not None:
        # A final verdict keeps the summary (it changes no stored count), not the reports of the adjudicated
        # source: the study's final verdicts, a few rows, stand for themselves.
        final = StepLabel.objects.filter(kind=StepLabel.Kind.ADJUDICATION, step__trace__study=study).aggregate(
            n=Count("id"), last=Max("updated_at"))
        computed, marked = stored
        return repr(("summary", computed.isoformat(), marked and marked.isoformat(), final["n"], final["last"], sets,
                     judges, study.primary_judge_id, scope_key))
    labels = StepLabel.objects.filter(step__trace__study=study).aggregate(n=Count("id"), last=Max("updated_at"))
    reviews = TraceReview.objects.filter(trace__study=study).aggregate(n=Count("id"), last=Max("updated_at"))
    traces = Trace.objects.filter(study=study).aggregate(n=Count("id"), last=Max("id"))
    return repr((labels["n"], labels["last"], reviews["n"], reviews["last"], sets, traces["n"], traces["last"],
                 judges, study.primary_judge_id, scope_key))
