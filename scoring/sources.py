"""Label sources: read a study's traces and labels into pandas (raw SQL, never
model instances) and derive the step labels of each source.

Sources (docs/analytics.md, "Label sources"):

* ``human``: the consensus (``scoring.core.labels.human_consensus``) of the human
  labels of annotators whose review of that trace is *complete*. Labels of an
  annotator still working on a trace do not count: a half-finished review
  would otherwise make a trace look verified, and the consensus would change
  under the annotator's feet with every save.
* ``judge:NAME``: the labels of one judge configuration, as they are.
* ``final``: step by step, the adjudicated label, else the human consensus
  above, else the study's primary judge (``scoring.core.labels.final_labels``).

A trace is scored under a source only when that source labels every one of
its steps (empty traces always); see ``complete_traces``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from django.db import connection, transaction

from annotation import stored_claims
from annotation.models import (
    Problem,
    Step,
    StepLabel,
    Study,
    Trace,
    TraceClaims,
    TraceReview,
    suite_problems_sql,
)
from reasonlib.refusals import Invalid
from reasonlib.verifier.corrections import claim_keys
from scoring.core.labels import INVALID, VALID, VERDICTS, final_labels, human_consensus

HUMAN = "human"
FINAL = "final"
JUDGE_PREFIX = "judge:"
STEP_COLUMNS = ["trace_id", "step", "verdict", "skeleton_refs"]


class UnknownSource(Invalid):
    """A source name that is malformed or names no judge of the study."""

    default_field = "source"


def judge_names(study: Study) -> list[str]:
    return list(study.judges.order_by("name").values_list("name", flat=True))


def available_sources(study: Study, judges: list[str] | None = None) -> list[str]:
    """Every source a study can be scored under: final, human, one per judge."""
    judges = judge_names(study) if judges is None else judges
    return [FINAL, HUMAN] + [f"{JUDGE_PREFIX}{name}" for name in judges]


def check_source(study: Study, source: str, judges: list[str] | None = None) -> str:
    source = (source or "").strip()
    if source in (FINAL, HUMAN):
        return source
    if source.startswith(JUDGE_PREFIX):
        name = source[len(JUDGE_PREFIX):]
        judges = judge_names(study) if judges is None else judges
        if name in judges:
            return source
        raise UnknownSource(f"no judge named {name!r} in this study")
    raise UnknownSource(f"unknown label source {source!r}; use final, human or judge:NAME")


def _q(name: str) -> str:
    return connection.ops.quote_name(name)


def _table(model) -> str:
    return _q(model._meta.db_table)


def _col(model, field: str) -> str:
    return _q(model._meta.get_field(field).column)


def _fetch(sql: str, params: list) -> list[tuple]:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


def _frame(sql: str, params: list, dtypes: dict[str, str]) -> pd.DataFrame:
    """A query's rows as a DataFrame with the given column types ("int64" or
    "object"), through one raw cursor and never model instances."""
    with transaction.atomic():
        if connection.vendor == "postgresql":
            # A chunk's steps are hashed; with the default 4 MB the hash spills to disk in batches. (The
            # connection's own planner settings: reasonaudit/settings.py.)
            with connection.cursor() as cursor:
                cursor.execute("SET LOCAL work_mem = '64MB'")
        rows = _fetch(sql, params)
    names = list(dtypes)
    columns = list(zip(*rows, strict=True)) if rows else [() for _ in names]
    del rows
    data = {}
    for name, values in zip(names, columns, strict=True):
        if dtypes[name] == "int64":
            data[name] = np.fromiter(values, dtype=np.int64, count=len(values))
        else:
            arr = np.empty(len(values), dtype=object)
            arr[:] = values
            data[name] = arr
    return pd.DataFrame(data)


@dataclass
class Inputs:
    """Everything a recompute of one study reads, as plain tables.

    traces  trace_id (Trace pk), model, domain, n_steps, l_gold, answer_correct (bool),
            n_thought_steps (the first n_thought_steps steps are the thought's)
    labels  trace_id, step, src, verdict, skeleton_refs -- one row per label
            that can count: src > 0 a human annotator's id (only labels of
            complete reviews), src < 0 minus a judge's id, src = 0 the
            adjudication
    """

    traces: pd.DataFrame
    labels: pd.DataFrame
    judges: dict[str, int] = field(default_factory=dict)  # name -> JudgeConfig pk
    primary_judge: int | None = None

    def sources(self) -> list[str]:
        with_labels = set((-self.labels.loc[self.labels["src"] < 0, "src"]).unique().tolist())
        names = sorted(name for name, pk in self.judges.items() if pk in with_labels)
        return [FINAL, HUMAN] + [f"{JUDGE_PREFIX}{name}" for name in names]


def _own_only(trace_alias: str, study_id: int) -> tuple[str, list]:
    """A WHERE clause keeping the study's own traces (annotation.models.suite_problems_sql: not the suite
    variants' nor the benchmark items'), "" when no rule is registered: scores, the hazard behind them and
    everything read from them (leaderboard, hazard, lucky guesses, agreement, calibration) start here."""
    suite = suite_problems_sql(study_id)
    if suite is None:
        return "", []
    sub_sql, sub_params = suite
    return f" AND {trace_alias}.{_col(Trace, 'problem')} NOT IN ({sub_sql})", list(sub_params)


def _in_range(column: str, span: tuple[int, int] | None) -> tuple[str, list]:
    """The SQL condition (and its parameters) of a chunk of traces: trace pks lo..hi, both included."""
    return ("", []) if span is None else (f" AND {column} BETWEEN %s AND %s", [span[0], span[1]])


def trace_spans(study_id: int, size: int) -> list[tuple[int, int]]:
    """The study's traces cut into chunks of ``size`` traces, as (first pk, last pk), in pk order: what a
    streamed recompute reads one at a time (only the pks are read)."""
    sql = (f"SELECT t.{_q('id')} FROM {_table(Trace)} t WHERE t.{_col(Trace, 'study')} = %s "
           f"ORDER BY t.{_q('id')}")
    size = max(1, size)
    spans: list[tuple[int, int]] = []
    first = last = None
    n = 0
    with connection.cursor() as cursor:
        cursor.execute(sql, [study_id])
        # In batches: a million pks never become a million Python tuples at once.
        while rows := cursor.fetchmany(50_000):
            for (pk,) in rows:
                if n % size == 0:
                    if first is not None:
                        spans.append((first, last))
                    first = pk
                last, n = pk, n + 1
    if first is not None:
        spans.append((first, last))
    return spans


#: The tables the score job reads (here, and its stored summaries: annotation.study_summary_writer, agreement's,
#: the evidence's): their planner statistics are refreshed when it plans (annotation.dbstats, score_jobs.make_plan).
READS = (Trace, Problem, Step, StepLabel, TraceReview, TraceClaims)


def read_traces(study_id: int, span: tuple[int, int] | None = None) -> pd.DataFrame:
    t, p = _table(Trace), _table(Problem)
    cond, extra = _in_range(f"t.{_q('id')}", span)
    own_sql, own_params = _own_only("t", study_id)
    correct = _col(Trace, "answer_correct")
    sql = (
        f"SELECT t.{_q('id')}, t.{_col(Trace, 'model')}, p.{_col(Problem, 'domain')}, t.{_col(Trace, 'n_steps')}, "
        # An answer nobody has decided counts as not correct (as on the study page).
        f"p.{_col(Problem, 'l_gold')}, CASE WHEN t.{correct} THEN 1 ELSE 0 END, t.{_col(Trace, 'n_thought_steps')} "
        f"FROM {t} t JOIN {p} p ON p.{_q('id')} = t.{_col(Trace, 'problem')} "
        f"WHERE t.{_col(Trace, 'study')} = %s{cond}{own_sql} ORDER BY t.{_q('id')}"
    )
    df = _frame(sql, [study_id, *extra, *own_params],
                {"trace_id": "int64", "model": "object", "domain": "object", "n_steps": "int64",
                 "l_gold": "int64", "answer_correct": "int64", "n_thought_steps": "int64"})
    df["answer_correct"] = df["answer_correct"].astype(bool)
    return df


def _parse_refs(raw: pd.Series) -> np.ndarray:
    """JSON text of skeleton_refs -> object array of lists; each distinct text is
    parsed once (a study has a handful: "[]", "[1]", "[1, 2]" ...)."""
    codes, uniques = pd.factorize(raw, use_na_sentinel=True)
    parsed = []
    for text in uniques:
        value = json.loads(text) if isinstance(text, str) and text else text
        parsed.append(value if isinstance(value, list) else [])
    table = np.empty(len(parsed) + 1, dtype=object)
    table[: len(parsed)] = parsed
    table[len(parsed)] = []
    return table[np.where(codes < 0, len(parsed), codes)]


_VERDICT_CODES = {v: i for i, v in enumerate(VERDICTS)}


def labels_query(study_id: int, span: tuple[int, int] | None = None) -> tuple[str, list]:
    """SQL and parameters of read_labels: the database does the filtering and
    encodes who labelled (``src``) and the verdict as small integers; refs
    are read only where they can count (valid steps), so Python handles few
    and short values."""
    lab, st, tr, rv = _table(StepLabel), _table(Step), _table(Trace), _table(TraceReview)
    cond, extra = _in_range(f"t.{_q('id')}", span)
    own_sql, own_params = _own_only("t", study_id)
    kind, verdict = f"l.{_col(StepLabel, 'kind')}", f"l.{_col(StepLabel, 'verdict')}"
    sql = (
        f"SELECT s.{_col(Step, 'trace')}, s.{_col(Step, 'index')}, "
        f"CASE WHEN {kind} = %s THEN l.{_col(StepLabel, 'annotator')} "
        f"WHEN {kind} = %s THEN -l.{_col(StepLabel, 'judge')} ELSE 0 END, "
        f"CASE WHEN {verdict} = %s THEN 0 WHEN {verdict} = %s THEN 1 ELSE 2 END, "
        f"CASE WHEN {verdict} = %s THEN l.{_col(StepLabel, 'skeleton_refs')} END "
        f"FROM {lab} l "
        f"JOIN {st} s ON s.{_q('id')} = l.{_col(StepLabel, 'step')} "
        f"JOIN {tr} t ON t.{_q('id')} = s.{_col(Step, 'trace')} "
        f"LEFT JOIN {rv} r ON r.{_col(TraceReview, 'trace')} = s.{_col(Step, 'trace')} "
        f"AND r.{_col(TraceReview, 'annotator')} = l.{_col(StepLabel, 'annotator')} AND {kind} = %s "
        f"WHERE t.{_col(Trace, 'study')} = %s{cond} AND ({kind} <> %s OR r.{_col(TraceReview, 'complete')} = %s)"
        f"{own_sql}"
    )
    human = StepLabel.Kind.HUMAN
    return sql, [human, StepLabel.Kind.JUDGE, VALID, INVALID, VALID, human, study_id, *extra, human, True, *own_params]


def read_labels(study_id: int, span: tuple[int, int] | None = None) -> pd.DataFrame:
    """The labels of a study (of its traces in ``span``: pks lo..hi) that any source can use: judge and
    adjudicated labels, and human labels of complete reviews (see the module docstring)."""
    sql, params = labels_query(study_id, span)
    df = _frame(sql, params, {"trace_id": "int64", "step": "int64", "src": "int64", "verdict": "int64",
                              "skeleton_refs": "object"})
    df["verdict"] = pd.Categorical.from_codes(df["verdict"].to_numpy(), categories=list(VERDICTS))
    df["skeleton_refs"] = _parse_refs(df["skeleton_refs"]) if len(df) else pd.Series(dtype=object)
    return df


def read_inputs(study: Study, span: tuple[int, int] | None = None) -> Inputs:
    """The whole study, or (``span``) its traces with pks lo..hi and their labels."""
    judges = dict(study.judges.values_list("name", "pk"))
    return Inputs(
        traces=read_traces(study.pk, span),
        labels=read_labels(study.pk, span),
        judges=judges,
        primary_judge=study.primary_judge_id,
    )


def _empty_steps() -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series(dtype=object) for c in STEP_COLUMNS})


def human_steps(labels: pd.DataFrame) -> pd.DataFrame:
    """Consensus of the human labels (of complete reviews: read_labels filters)."""
    human = labels.loc[labels["src"].to_numpy() > 0, ["trace_id", "step", "src", "verdict", "skeleton_refs"]]
    if human.empty:
        return _empty_steps()
    return human_consensus(human.rename(columns={"src": "annotator"}))[STEP_COLUMNS]


def judge_steps(labels: pd.DataFrame, judge_pk: int | None) -> pd.DataFrame:
    if judge_pk is None:
        return _empty_steps()
    return labels.loc[labels["src"].to_numpy() == -judge_pk, STEP_COLUMNS].reset_index(drop=True)


def adjudicated_steps(labels: pd.DataFrame) -> pd.DataFrame:
    return labels.loc[labels["src"].to_numpy() == 0, STEP_COLUMNS].reset_index(drop=True)


def source_steps(inputs: Inputs, source: str, *, human: pd.DataFrame | None = None) -> pd.DataFrame:
    """The step labels of one source: trace_id, step, verdict, skeleton_refs.

    ``human`` may pass a consensus already computed (it serves two sources)."""
    if source == HUMAN:
        return human if human is not None else human_steps(inputs.labels)
    if source == FINAL:
        hum = human if human is not None else human_steps(inputs.labels)
        final = final_labels(
            adjudicated_steps(inputs.labels), hum, judge_steps(inputs.labels, inputs.primary_judge)
        )
        return final[STEP_COLUMNS]
    if source.startswith(JUDGE_PREFIX):
        return judge_steps(inputs.labels, inputs.judges.get(source[len(JUDGE_PREFIX):]))
    raise UnknownSource(f"unknown label source {source!r}")


_NUMBER = re.compile(r"\d+(?:\.\d+)?")


def read_claims(error_steps: dict[int, set[int]], *, chunk: int = 2000, stored: bool = True) -> pd.DataFrame:
    """trace_id, step, wrong_claims, right_claims of the thought steps of the traces in
    ``error_steps`` (trace pk -> its steps labelled invalid by any source): what
    scoring.core.thought.recoveries matches an error against. Only traces with a thought error are read.

    The keys the mechanistic judge stored as it parsed a trace (annotation.stored_claims) are read as
    they are: the error steps, and every later thought step that gets a claim right. ``stored=False``
    (and any trace whose stored keys are missing or of an older parser) parses the steps' text instead
    (reasonlib.verifier.corrections.claim_keys, which is dear): the error steps, and only the later
    steps that could re-derive one of their false claims -- a step whose text lacks one of the numbers
    of every false claim before it cannot, and gets no claims. Both give recoveries the same matches:
    a later step's keys matter only where they equal a false claim's."""
    rows: list[tuple[int, int, tuple[str, ...], tuple[str, ...]]] = []
    parse = set(error_steps)
    if stored:
        for trace_id, n_thought, keys in stored_claims.read(sorted(error_steps)):
            parse.discard(trace_id)
            errors = error_steps[trace_id]
            first = min(errors)
            for index in range(first, n_thought + 1):
                wrong, right = keys[index - 1]
                if index in errors:
                    rows.append((trace_id, index, wrong, right))
                elif right:
                    rows.append((trace_id, index, (), right))
    st = _table(Step)
    trace_ids = sorted(parse)
    for i in range(0, len(trace_ids), chunk):
        part = trace_ids[i:i + chunk]
        marks = ", ".join(["%s"] * len(part))
        sql = (f"SELECT s.{_col(Step, 'trace')}, s.{_col(Step, 'index')}, s.{_col(Step, 'text')} FROM {st} s "
               f"WHERE s.{_col(Step, 'trace')} IN ({marks}) AND s.{_col(Step, 'channel')} = %s "
               f"ORDER BY s.{_col(Step, 'trace')}, s.{_col(Step, 'index')}")
        current, numbers = None, []  # the false claims seen so far in the trace, as their numbers
        for trace_id, index, text in _fetch(sql, [*part, Step.Channel.THOUGHT]):
            if trace_id != current:
                current, numbers = trace_id, []
            text = text or ""
            if index in error_steps[trace_id]:
                wrong, right = claim_keys(text)
                numbers += [_NUMBER.findall(k) for k in wrong]
                rows.append((trace_id, index, wrong, right))
            elif numbers and "=" in text and any(all(n in text for n in nums) for nums in numbers):
                rows.append((trace_id, index, (), claim_keys(text)[1]))
    out = pd.DataFrame.from_records(rows, columns=["trace_id", "step", "wrong_claims", "right_claims"])
    return out.astype({"trace_id": "int64", "step": "int64"}) if len(out) else out
