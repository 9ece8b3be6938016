"""Writing and reading stored scores in bulk, without model instances.

A recompute writes each (study, source, profile) set chunk by chunk into a
staging set, then swaps it in whole in one transaction (``publish``):
PostgreSQL gets ``COPY``, other databases ``executemany``. Reads are one
raw query into pandas.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from django.db import connection, models, transaction
from django.utils import timezone

from annotation.models import Problem, Trace, TraceReview
from scoring.models import ScoreSet, ScoringProfile, TraceScore

#: Stored per-trace columns, in the order of scoring.core.scores.SCORE_COLUMNS.
VALUE_COLUMNS = [
    "n_steps", "l_gold", "coverage", "first_error", "answer_correct", "s_base", "p_fmt", "p_haz", "s_hcrs",
    "s_prm", "s_prm_haz", "process", "holistic", "lucky_guess", "empty", "validity_rate", "all_valid",
    # then scoring.core.thought.recovery_by_trace's (RECOVERY_VALUE_COLUMNS)
    "n_thought_steps", "thought_errors", "recovered_errors", "first_unrecovered", "lucky_unrecovered",
]
#: The thinking channel's per-trace columns; a score table without them stores zeros.
RECOVERY_VALUE_COLUMNS = ["n_thought_steps", "thought_errors", "recovered_errors", "first_unrecovered",
                          "lucky_unrecovered"]
_INT = {"n_steps", "l_gold", "coverage", "n_thought_steps", "thought_errors", "recovered_errors"}
_BOOL = {"answer_correct", "lucky_guess", "empty", "lucky_unrecovered"}
_NULLABLE_INT = {"first_error", "first_unrecovered"}
_NULLABLE_BOOL = {"all_valid"}


def _q(name: str) -> str:
    return connection.ops.quote_name(name)


def _column_lists(scored: pd.DataFrame) -> list[list[Any]]:
    """Each stored column as a Python list with None for null."""
    out = []
    for col in VALUE_COLUMNS:
        s = scored[col]
        if col in _INT:
            out.append(s.to_numpy(dtype=np.int64).tolist())
        elif col in _BOOL:
            out.append(s.to_numpy(dtype=bool).tolist())
        elif col in _NULLABLE_INT or col in _NULLABLE_BOOL:
            values = s.astype(object).tolist()
            out.append([None if v is pd.NA or v is None else (int(v) if col in _NULLABLE_INT else bool(v)) for v in values])
        else:
            values = s.to_numpy(dtype=float, na_value=np.nan).tolist()
            out.append([None if v != v else v for v in values])
    return out


def _with_recovery(scored: pd.DataFrame) -> pd.DataFrame:
    missing = [c for c in RECOVERY_VALUE_COLUMNS if c not in scored.columns]
    if not missing:
        return scored
    out = scored.copy()
    for c in missing:
        out[c] = (pd.array([pd.NA] * len(out), dtype="Int64") if c == "first_unrecovered"
                  else np.zeros(len(out), dtype=bool if c == "lucky_unrecovered" else np.int64))
    return out


#: The first character of a score set still being written by a recompute (``staging_source``): no page
#: asks for such a source, so readers keep the set it will replace until ``publish`` swaps it in.
STAGING = "~"


def staging_source(key: str, source: str) -> str:
    return f"{STAGING}{key}:{source}"[:120]


def open_staging(study, source: str, profile: ScoringProfile, key: str) -> ScoreSet:
    """The set a recompute writes (study, source, profile) into, chunk by chunk; a re-run of the same job
    (``key``) writes into the same one, each chunk replacing its own rows."""
    score_set, _ = ScoreSet.objects.get_or_create(study=study, source=staging_source(key, source), profile=profile)
    return score_set


def delete_staging(study, key: str | None = None) -> None:
    """Sets left by a recompute that stopped (``key``: of that recompute; None: of any)."""
    prefix = STAGING if key is None else staging_source(key, "")
    delete_sets(list(ScoreSet.objects.filter(study=study, source__startswith=prefix).values_list("pk", flat=True)))


def write_chunk(score_set: ScoreSet, scored: pd.DataFrame, span: tuple[int, int]) -> None:
    """The scores of one chunk of traces (trace pks ``span``: lo..hi) into ``score_set``, replacing what
    the set held for them (a chunk written twice, by a retry, is written once), in one transaction.
    ``scored``: output of ``scoring.core.scores.score_traces`` (``trace_id`` = Trace pk), joined with the
    thinking channel's per-trace columns when it has them (zeros when not)."""
    scored = _with_recovery(scored)
    table = _q(TraceScore._meta.db_table)
    fk = _q(TraceScore._meta.get_field("score_set").column)
    trace = _q(TraceScore._meta.get_field("trace").column)
    names = [fk, trace] + [_q(TraceScore._meta.get_field(c).column) for c in VALUE_COLUMNS]
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute(f"DELETE FROM {table} WHERE {fk} = %s AND {trace} BETWEEN %s AND %s",
                           [score_set.pk, span[0], span[1]])
        if not len(scored):
            return
        if connection.vendor == "postgresql":
            _copy(table, names, score_set.pk, scored)
        else:
            trace_ids = scored["trace_id"].to_numpy(dtype=np.int64).tolist()
            rows = zip([score_set.pk] * len(trace_ids), trace_ids, *_column_lists(scored), strict=True)
            marks = ", ".join(["%s"] * len(names))
            with connection.cursor() as cursor:
                cursor.executemany(f"INSERT INTO {table} ({', '.join(names)}) VALUES ({marks})", list(rows))


def publish(staging: ScoreSet, source: str, *, n_traces: int, hazard: list[dict], recoveries: list[list[int]],
            job=None) -> ScoreSet:
    """Swap a written staging set in for (study, source, profile) in one transaction: the set it replaces
    goes (with its rows), the staging set takes its name and a new token. Readers see the old set or the
    new one, never a mix."""
    with transaction.atomic():
        # Serialises two recomputes publishing the same set (PostgreSQL row lock; SQLite holds the write
        # lock for the whole IMMEDIATE transaction).
        old = list(ScoreSet.objects.select_for_update().filter(study_id=staging.study_id, source=source,
                                                              profile_id=staging.profile_id)
                   .values_list("pk", flat=True))
        delete_sets(old)
        staging.source = source
        staging.n_traces = n_traces
        staging.hazard = hazard
        staging.recoveries = recoveries
        staging.computed_at = timezone.now()
        staging.job = job
        staging.new_token()
        staging.save()
    return staging


def _binary_type(field) -> str:
    if isinstance(field, models.ForeignKey):
        field = field.target_field
    if isinstance(field, models.BooleanField):
        return "bool"
    if isinstance(field, models.FloatField):
        return "float8"
    if isinstance(field, (models.BigIntegerField, models.BigAutoField)):
        return "int8"
    return "int4"


def _copy(table: str, names: list[str], score_set_id: int, scored: pd.DataFrame) -> None:
    """PostgreSQL: binary COPY -- psycopg packs each row in C, the server
    parses no text (several times faster than text COPY or executemany)."""
    fields = [TraceScore._meta.get_field(n) for n in ["score_set", "trace"] + VALUE_COLUMNS]
    trace_ids = scored["trace_id"].to_numpy(dtype=np.int64).tolist()
    rows = zip([score_set_id] * len(trace_ids), trace_ids, *_column_lists(scored), strict=True)
    with connection.cursor() as cursor:
        with cursor.cursor.copy(f"COPY {table} ({', '.join(names)}) FROM STDIN (FORMAT BINARY)") as copy:
            copy.set_types([_binary_type(f) for f in fields])
            for row in rows:
                copy.write_row(row)


def delete_sets(pks: list[int]) -> None:
    if not pks:
        return
    # TraceScore rows go with one DELETE ... WHERE score_set_id IN (...):
    # nothing depends on them, so Django's collector never loads them.
    ScoreSet.objects.filter(pk__in=pks).delete()


# ---------------------------------------------------------------------------
# Reading
# ---------------------------------------------------------------------------
#: What the analytics pages read; the export adds the rest.
PAGE_COLUMNS = ["n_steps", "first_error", "answer_correct", "s_hcrs", "process", "s_prm", "holistic", "lucky_guess",
                "validity_rate", "all_valid", "empty", "n_thought_steps", "thought_errors", "recovered_errors",
                "lucky_unrecovered"]


def read_scores(score_set: ScoreSet, *, model: str = "", domain: str = "", columns: list[str] | None = None,
                only_reviewed_by=None, lucky_only: bool = False, include_suites: bool = False,
                span: tuple[int, int] | None = None) -> pd.DataFrame:
    """Stored scores of one set as a table: trace (pk), trace_id, problem_id,
    model, domain and ``columns`` (default PAGE_COLUMNS), in trace order.

    ``only_reviewed_by`` (a user) keeps the traces that user has labelled
    completely -- what an annotator of a blind study may see trace by trace;
    ``span`` (first pk, last pk) the traces of one chunk.
    """
    columns = list(PAGE_COLUMNS if columns is None else columns)
    ts, t, p, rv = (_q(m._meta.db_table) for m in (TraceScore, Trace, Problem, TraceReview))

    def c(model, field):
        return _q(model._meta.get_field(field).column)

    select = [f"s.{c(TraceScore, 'trace')}", f"t.{c(Trace, 'trace_id')}", f"p.{c(Problem, 'problem_id')}",
              f"t.{c(Trace, 'model')}", f"p.{c(Problem, 'domain')}"] + [f"s.{c(TraceScore, col)}" for col in columns]
    where = [f"s.{c(TraceScore, 'score_set')} = %s"]
    params: list[Any] = [score_set.pk]
    if model:
        where.append(f"t.{c(Trace, 'model')} = %s")
        params.append(model)
    if domain:
        where.append(f"p.{c(Problem, 'domain')} = %s")
        params.append(domain)
    if lucky_only:
        where.append(f"s.{c(TraceScore, 'lucky_guess')} = %s")
        params.append(True)
    if span is not None:  # a chunk of the study's traces: pks lo..hi
        where.append(f"s.{c(TraceScore, 'trace')} BETWEEN %s AND %s")
        params += [span[0], span[1]]
    if not include_suites:
        # Suite variants (fidelity) stay out of every analytics page unless asked for:
        # the same rule as Problem.objects.own(), compiled to SQL.
        suite = Problem.objects.filter(study_id=score_set.study_id).suite_members().values("pk")
        if not suite.query.is_empty():
            sub_sql, sub_params = suite.query.sql_with_params()
            where.append(f"p.{_q('id')} NOT IN ({sub_sql})")
            params += list(sub_params)
    if only_reviewed_by is not None:
        where.append(
            f"s.{c(TraceScore, 'trace')} IN (SELECT r.{c(TraceReview, 'trace')} FROM {rv} r "
            f"WHERE r.{c(TraceReview, 'annotator')} = %s AND r.{c(TraceReview, 'complete')} = %s)"
        )
        params += [only_reviewed_by.pk, True]
    sql = (
        f"SELECT {', '.join(select)} FROM {ts} s "
        f"JOIN {t} t ON t.{_q('id')} = s.{c(TraceScore, 'trace')} "
        f"JOIN {p} p ON p.{_q('id')} = t.{c(Trace, 'problem')} "
        f"WHERE {' AND '.join(where)} ORDER BY s.{c(TraceScore, 'trace')}"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    names = ["trace", "trace_id", "problem_id", "model", "domain"] + columns
    df = pd.DataFrame.from_records(rows, columns=names, coerce_float=False)
    return typed(df)


def typed(df: pd.DataFrame) -> pd.DataFrame:
    """Column types of scoring.core's score tables (nulls as NaN / NA)."""
    out = df.copy()
    for col in out.columns:
        if col in _INT or col == "trace":
            out[col] = out[col].astype("int64")
        elif col in _BOOL:
            out[col] = out[col].astype(bool)
        elif col in _NULLABLE_INT:
            out[col] = pd.array(out[col].tolist(), dtype="Int64")
        elif col in _NULLABLE_BOOL:
            out[col] = pd.array([None if v is None else bool(v) for v in out[col].tolist()], dtype="boolean")
        elif col in VALUE_COLUMNS:
            out[col] = pd.to_numeric(out[col], errors="coerce").astype(float)
    # Stored rows are complete by construction (scoring.core's hazard needs the column).
    out["complete"] = True
    return out
