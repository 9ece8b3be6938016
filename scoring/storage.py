"""Writing and reading stored scores in bulk, without model instances.

A recompute writes each (study, source, profile) set chunk by chunk into a
staging set, then swaps it in whole in one transaction (``publish``):
PostgreSQL gets ``COPY``, other databases ``executemany``. Reads are one
raw query into pandas.
"""

from __future__ import annotations

import contextlib
from typing import Any

import numpy as np
import pandas as pd
from django.db import connection, models, transaction
from django.utils import timezone

from annotation.models import Problem, Trace, TraceReview, suite_problems_sql
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


def _score_sql(score_set: ScoreSet, labels: list[str], columns: list[str], *, model: str = "", domain: str = "",
               only_reviewed_by=None, lucky_only: bool = False, include_suites: bool = False,
               span: tuple[int, int] | None = None) -> tuple[str, list[Any]]:
    """The one query of stored scores (both readers): ``labels`` (of LABEL_COLUMNS) then ``columns`` of the
    set's rows, in trace order, with the filters of ``read_scores``."""
    ts, t, p, rv = (_q(m._meta.db_table) for m in (TraceScore, Trace, Problem, TraceReview))

    def c(model, field):
        return _q(model._meta.get_field(field).column)

    label_sql = {"trace": f"s.{c(TraceScore, 'trace')}", "trace_id": f"t.{c(Trace, 'trace_id')}",
                 "problem_id": f"p.{c(Problem, 'problem_id')}", "model": f"t.{c(Trace, 'model')}",
                 "domain": f"p.{c(Problem, 'domain')}"}
    select = [label_sql[name] for name in labels] + [f"s.{c(TraceScore, col)}" for col in columns]
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
    suite = None if include_suites else suite_problems_sql(score_set.study_id)
    if suite is not None:
        # Suite variants (fidelity) stay out of every analytics page unless asked for: the same rule as
        # Problem.objects.own(), compiled to SQL as the score job's reads compile it.
        where.append(f"p.{_q('id')} NOT IN ({suite[0]})")
        params += list(suite[1])
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
    return sql, params


#: What identifies a stored score's trace: its pk, then the text columns the readers may add.
LABEL_COLUMNS = ["trace", "trace_id", "problem_id", "model", "domain"]


def read_scores(score_set: ScoreSet, *, model: str = "", domain: str = "", columns: list[str] | None = None,
                only_reviewed_by=None, lucky_only: bool = False, include_suites: bool = False,
                span: tuple[int, int] | None = None) -> pd.DataFrame:
    """Stored scores of one set as a table: trace (pk), trace_id, problem_id,
    model, domain and ``columns`` (default PAGE_COLUMNS), in trace order.

    ``only_reviewed_by`` (a user) keeps the traces that user has labelled
    completely -- what an annotator of a blind study may see trace by trace;
    ``span`` (first pk, last pk) the traces of one chunk.
    Holds every row as Python objects while it reads (the exports' reader); the analytics pages read
    ``read_compact``.
    """
    columns = list(PAGE_COLUMNS if columns is None else columns)
    sql, params = _score_sql(score_set, LABEL_COLUMNS, columns, model=model, domain=domain,
                             only_reviewed_by=only_reviewed_by, lucky_only=lucky_only, include_suites=include_suites,
                             span=span)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    df = pd.DataFrame.from_records(rows, columns=LABEL_COLUMNS + columns, coerce_float=False)
    return typed(df)


@contextlib.contextmanager
def _streaming():
    """Where the connection reads through a server-side cursor (PostgreSQL), a transaction for it: outside
    one, the server would compute the whole result before the first row (a cursor WITH HOLD). SQLite's
    cursor steps through the rows by itself, and a transaction there would take the write lock."""
    if connection.vendor != "postgresql" or connection.settings_dict.get("DISABLE_SERVER_SIDE_CURSORS"):
        yield
        return
    with transaction.atomic():
        with connection.cursor() as cursor:
            # Every row is read: plan for all of them, not for a cursor's first 10 % (PostgreSQL's default),
            # whose fast-start plan on statistics a recompute has just outdated nested its loops: 0.66 s
            # instead of 0.07 s for 20,000 scores.
            cursor.execute("SET LOCAL cursor_tuple_fraction = 1.0")
        yield


#: Rows the compact reader converts at a time (each a tuple of Python objects only until its chunk is
#: converted to arrays).
COMPACT_CHUNK_ROWS = 20_000


def read_compact(score_set: ScoreSet, columns: list[str], *, labels: tuple[str, ...] = ("trace", "model"),
                 model: str = "", domain: str = "", include_suites: bool = False,
                 chunk_rows: int | None = None) -> pd.DataFrame:
    """The table ``read_scores`` reads (the same rows, order, column types and values, ``complete``
    included), with only ``labels`` (of LABEL_COLUMNS) and ``columns``, in a form whose memory follows the
    arrays: numbers in NumPy arrays (nullable ones with a mask), each distinct text (a model's name) one
    ``str`` shared by every row of it. Read through a server-side cursor ``chunk_rows`` rows at a time, so
    neither this process nor its database driver ever holds a Python object (or a result row) per score:
    what the analytics pages and the cache warm read of a million traces (issue 33)."""
    names = [*labels, *columns]
    unknown = [n for n in labels if n not in LABEL_COLUMNS] + [n for n in columns if n not in VALUE_COLUMNS]
    if unknown:
        raise ValueError(f"read_compact: unknown column(s) {unknown}")
    sql, params = _score_sql(score_set, list(labels), columns, model=model, domain=domain,
                             include_suites=include_suites)
    parts: dict[str, list[np.ndarray]] = {n: [] for n in names}
    masks: dict[str, list[np.ndarray]] = {n: [] for n in names if n in _NULLABLE_INT or n in _NULLABLE_BOOL}
    texts: dict[str, dict[str, int]] = {n: {} for n in labels if n != "trace"}
    size = int(chunk_rows or COMPACT_CHUNK_ROWS)
    with _streaming(), connection.chunked_cursor() as cursor:
        cursor.execute(sql, params)
        while rows := cursor.fetchmany(size):
            for name, values in zip(names, zip(*rows, strict=True), strict=True):
                n = len(values)
                if name in texts:
                    seen = texts[name]
                    parts[name].append(np.fromiter((seen.setdefault(v, len(seen)) for v in values), np.int64, n))
                elif name in masks:
                    masks[name].append(np.fromiter((v is None for v in values), bool, n))
                    kind = np.int64 if name in _NULLABLE_INT else bool
                    parts[name].append(np.fromiter((0 if v is None else v for v in values), kind, n))
                elif name == "trace" or name in _INT:
                    parts[name].append(np.fromiter(values, np.int64, n))
                elif name in _BOOL:
                    parts[name].append(np.fromiter(values, bool, n))
                else:
                    parts[name].append(np.array(values, dtype=float))  # None -> NaN, as read_scores types it
            del rows

    def joined(chunks: list[np.ndarray], dtype) -> np.ndarray:
        return np.concatenate(chunks) if chunks else np.zeros(0, dtype)

    data: dict[str, Any] = {}
    for name in names:
        if name in texts:
            # One str object per distinct text, shared by its rows: 8 bytes a row (read_scores: a str each).
            shared = np.empty(len(texts[name]), dtype=object)
            shared[:] = list(texts[name])
            data[name] = shared[joined(parts.pop(name), np.int64)]
        elif name in masks:
            mask = joined(masks.pop(name), bool)
            if name in _NULLABLE_INT:
                data[name] = pd.arrays.IntegerArray(joined(parts.pop(name), np.int64), mask)
            else:
                data[name] = pd.arrays.BooleanArray(joined(parts.pop(name), bool), mask)
        elif name == "trace" or name in _INT:
            data[name] = joined(parts.pop(name), np.int64)
        elif name in _BOOL:
            data[name] = joined(parts.pop(name), bool)
        else:
            data[name] = joined(parts.pop(name), float)
    df = pd.DataFrame(data, columns=names, copy=False)
    df["complete"] = True
    return df


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
