"""Bulk SQL for large writes: rows inserted without model instances (COPY on PostgreSQL, many-row INSERTs on
SQLite), primary keys handed out before the rows are written, and ``{key: pk}`` look-ups in chunks.

The import pipeline (annotation/importing/pipeline.py) writes through these, and so do the run clients that
turn model output into traces (subjects, fidelity, abstraction) when they look their rows up again.
"""

from __future__ import annotations

import json
import sqlite3
from itertools import chain
from typing import Any

from django.db import connection, models

LOOKUP_CHUNK = 2000  # keys per "IN (...)" look-up, below every backend's parameter limit
_UNSET = object()


def new_pks(model: type, n: int) -> list[int]:
    """``n`` primary keys for rows of ``model`` that the caller is about to insert with them (in its
    transaction), so it never has to look its new rows up again by their natural keys.

    A look-up per batch by the rows' keys was the import's cost that grew with the data: inside one long
    transaction PostgreSQL's statistics still describe the empty tables of its start, and its plan for
    ``step = ANY(...) AND kind = 'human'`` read every label imported so far, at every batch (81 % of the
    database's time at 300,000 traces). Keys handed out first need no plan at all.

    PostgreSQL: ``nextval`` of the table's sequence, safe beside any concurrent writer. SQLite: the table's
    ``AUTOINCREMENT`` counter in ``sqlite_sequence`` is moved up by ``n`` first -- the UPDATE takes the
    database's write lock, held to the commit, so no other connection can hand out the same keys; new rows
    always get a key above both this counter and the largest key present, so none collides later either."""
    if n <= 0:
        return []
    meta = model._meta
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                "SELECT nextval(pg_get_serial_sequence(%s, %s)) FROM generate_series(1, %s)",
                [meta.db_table, meta.pk.column, n],
            )
            return [row[0] for row in cursor.fetchall()]
        table = meta.db_table
        cursor.execute("UPDATE sqlite_sequence SET seq = seq + %s WHERE name = %s", [n, table])
        if cursor.rowcount == 0:
            # The table never held a row (no counter yet): start above any key present.
            cursor.execute(
                f"INSERT INTO sqlite_sequence (name, seq) SELECT %s, COALESCE(MAX({connection.ops.quote_name(meta.pk.column)}), 0) + %s "
                f"FROM {connection.ops.quote_name(table)}",
                [table, n],
            )
        cursor.execute("SELECT seq FROM sqlite_sequence WHERE name = %s", [table])
        last = cursor.fetchone()[0]
    return list(range(last - n + 1, last + 1))


def json_text(value: Any) -> str | None:
    """A JSON field's value as both backends store it (what ``JSONField`` writes), for ``insert_rows(...,
    prepared=True)``; None stays SQL NULL."""
    return None if value is None else json.dumps(value)


def db_value(model: type, field: str, value: Any) -> Any:
    """``value`` as the database takes it for ``model.field``: a date-time written into every row of a batch
    is prepared once this way, not once a row."""
    return model._meta.get_field(field).get_db_prep_save(value, connection)


def insert_rows(model: type, fields: list[str], rows: list[tuple], *, prepared: bool = False) -> None:
    """``executemany`` without building model instances: at import sizes the
    ORM's per-object work costs several times what the database does.

    Values of JSON and date-time fields are adapted by the field itself, so
    each backend gets what it expects -- unless ``prepared``: then the caller gives them as the
    database takes them (``json_text``, ``db_value``), as a writer that builds its JSON anyway does
    (the judge: a fifth of its CPU went to adapting values one at a time)."""
    if not rows:
        return
    qn = connection.ops.quote_name
    model_fields = [model._meta.get_field(f) for f in fields]
    cols = ", ".join(qn(f.column) for f in model_fields)
    marks = ", ".join(["%s"] * len(fields))
    adapt = {} if prepared else {
        i: f for i, f in enumerate(model_fields) if isinstance(f, (models.JSONField, models.DateTimeField))
    }
    if adapt:
        # Most of these values repeat (one timestamp per batch, empty meta
        # dicts, the same tags): adapt each distinct value once. The memo key
        # is the value's repr: these values come from json.loads or are
        # datetimes, for which equal reprs mean equal values -- and repr is
        # several times cheaper than json.dumps on a small dict.
        # The same object (the batch's timestamp, NO_META) is recognised by
        # identity before any repr is taken.
        memo: dict[tuple[int, str], Any] = {}
        last: dict[int, tuple[Any, Any]] = {i: (_UNSET, None) for i in adapt}

        def prep(i: int, value: Any) -> Any:
            seen, prepared = last[i]
            if value is seen:
                return prepared
            key = (i, repr(value))
            prepared = memo.get(key, _UNSET)
            if prepared is _UNSET:
                prepared = memo[key] = adapt[i].get_db_prep_save(value, connection)
            last[i] = (value, prepared)
            return prepared

        def adapted(row: tuple) -> list:
            out = list(row)
            for i in adapt:
                out[i] = prep(i, out[i])
            return out

        rows = [adapted(row) for row in rows]
    table = qn(model._meta.db_table)
    if connection.vendor == "postgresql":
        # Django's psycopg cursors bind parameters on the client: an
        # executemany merges every value into SQL text in Python, which cost
        # more than everything else in the import together. COPY sends the
        # rows in bulk, and does the same inside the import's transaction.
        with connection.cursor() as wrapper, connection.wrap_database_errors:
            with wrapper.cursor.copy(f"COPY {table} ({cols}) FROM STDIN") as copy:
                for row in rows:
                    copy.write_row(row)
        return
    # Many rows per INSERT statement: SQLite pays its per-statement work (and FTS5, whose triggers keep the
    # search index, flushes its pending terms) once per statement, so one row a statement cost ~10x.
    per = max(1, min(200, connection.features.max_query_params // len(fields)))
    # The backend's own cursor, not the debug wrapper DEBUG puts around it (a development checkout runs with
    # DEBUG): that wrapper logs each statement with all its values spelled out, for which Django's SQLite
    # backend runs one more query per statement (SELECT QUOTE(?), ...) -- a third of the import's CPU at 200,000
    # steps, and a log of megabytes of SQL text nobody reads. Database errors are still Django's.
    # The many-row statement is written in sqlite3's own "?" style and run by sqlite3's execute: Django's
    # cursor would rewrite its 1,200 "%s" into "?" by a regular expression at every one of its thousands of
    # runs (a tenth of the import's time in the inserts).
    with connection.cursor() as wrapper, connection.wrap_database_errors:
        cursor = wrapper.cursor
        full = len(rows) - len(rows) % per
        if full:
            many = ", ".join(["(" + ", ".join(["?"] * len(fields)) + ")"] * per)
            sql = f"INSERT INTO {table} ({cols}) VALUES {many}"
            execute = sqlite3.Cursor.execute
            for start in range(0, full, per):
                execute(cursor, sql, list(chain.from_iterable(rows[start:start + per])))
        if full < len(rows):
            cursor.executemany(f"INSERT INTO {table} ({cols}) VALUES ({marks})", rows[full:])


def rows_by_key(model: type, key: str, values: list[Any], columns: list[str], **where: Any) -> list[tuple]:
    """``(key, *columns)`` of the rows of ``model`` whose ``key`` is in
    ``values`` and whose fields equal ``where``, by raw SQL in chunks: the
    ORM's ``__in`` lookup prepares each of thousands of values through the
    field, which costs more than the query itself."""
    if not values:
        return []
    qn = connection.ops.quote_name
    meta = model._meta

    def col(name: str) -> str:
        return qn((meta.pk if name == "pk" else meta.get_field(name)).column)

    key_col = col(key)
    key_field = meta.pk if key == "pk" else meta.get_field(key)
    key_type = key_field.db_type(connection) if connection.vendor == "postgresql" else ""
    select = ", ".join([key_col, *(col(c) for c in columns)])
    conds = [f"{col(name)} = %s" for name in where]
    params = list(where.values())
    limit = connection.features.max_query_params or 10_000
    size = max(1, min(LOOKUP_CHUNK, limit - len(params)))
    out: list[tuple] = []
    with connection.cursor() as wrapper, connection.wrap_database_errors:
        # The driver's own cursor: with DEBUG on, Django's cursor logs every
        # statement with its parameters, and on SQLite it quotes each of these
        # thousands of parameters again through an extra query to do so.
        cursor = wrapper.cursor
        for start in range(0, len(values), size):
            chunk = values[start : start + size]
            if connection.vendor == "postgresql":
                # One array parameter (the client-side binding of Django's psycopg cursors would scan
                # thousands of placeholders), and one index probe per key: the keys are unnested and each
                # looked up by a subquery that OFFSET 0 keeps from being merged into a join. With
                # "key = ANY(...)" the planner chose its index from statistics that, inside an import's
                # transaction, still describe the tables before it: it took (study, model) for the trace
                # ids and read every trace of the study at every batch (2.5M rows at 100,000 traces).
                # A probe by (study, trace_id) has a unique index whatever the statistics say.
                cursor.execute(
                    f"SELECT k.v, t.* FROM unnest(%s::{key_type}[]) AS k(v) CROSS JOIN LATERAL ("
                    f"SELECT {', '.join(col(c) for c in columns)} FROM {qn(meta.db_table)} "
                    f"WHERE {' AND '.join([*conds, f'{key_col} = k.v'])} OFFSET 0) AS t",
                    [list(chunk), *params],
                )
            else:
                cursor.execute(
                    f"SELECT {select} FROM {qn(meta.db_table)} WHERE "
                    f"{' AND '.join([*conds, f'{key_col} IN ({", ".join(["%s"] * len(chunk))})'])}",
                    [*params, *chunk],
                )
            out.extend(cursor.fetchall())
    return out


def pk_map(model: type, key: str, values: list[Any], **where: Any) -> dict[Any, int]:
    """``{key: pk}`` for the rows of ``model`` with ``key`` in ``values``; see ``rows_by_key``."""
    return dict(rows_by_key(model, key, values, ["pk"], **where))  # type: ignore[arg-type]
