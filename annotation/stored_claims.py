"""Each trace's stored claim keys (TraceClaims): written by the mechanistic judge as it parses the
trace, read by the score recompute's thought recoveries in place of parsing the steps again."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from django.db import connection

from annotation.bulk import LOOKUP_CHUNK
from annotation.models import Trace, TraceClaims
from reasonlib.verifier.stored_claims import CLAIMS_VERSION, StepKeys, decode, encode


def _names() -> tuple[str, str, str, str]:
    qn = connection.ops.quote_name
    return (qn(TraceClaims._meta.db_table), qn(TraceClaims._meta.pk.column), qn(Trace._meta.db_table),
            qn(Trace._meta.pk.column))


def write(claims: Sequence[tuple[int, Sequence[StepKeys]]]) -> None:
    """Store ``(trace pk, each step's keys)`` under the current version: a row of an older version is
    replaced, one of the current version left as it is (its steps have not changed, so neither have their
    keys). One statement per chunk of traces, and safe beside another judge run storing the same traces
    (a unique row per trace, and ON CONFLICT instead of a look-up first). Call inside the chunk's
    transaction."""
    if not claims:
        return
    table, key, _, _ = _names()
    rows = [(trace_pk, CLAIMS_VERSION, encode(steps)) for trace_pk, steps in claims]
    upsert = (f"ON CONFLICT ({key}) DO UPDATE SET version = EXCLUDED.version, steps = EXCLUDED.steps "
              f"WHERE {table}.version <> EXCLUDED.version")
    with connection.cursor() as wrapper, connection.wrap_database_errors:
        cursor = wrapper.cursor  # the driver's own: see annotation.bulk.rows_by_key
        if connection.vendor == "postgresql":
            # Three array parameters instead of 3,000 placeholders the client-side binding would scan.
            cursor.execute(
                f"INSERT INTO {table} ({key}, version, steps) "
                f"SELECT * FROM unnest(%s::bigint[], %s::smallint[], %s::text[]) {upsert}",
                [[r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows]],
            )
        else:
            cursor.executemany(f"INSERT INTO {table} ({key}, version, steps) VALUES (?, ?, ?) {upsert}", rows)


def read(trace_pks: Sequence[int]) -> Iterator[tuple[int, int, list[StepKeys]]]:
    """``(trace pk, n_thought_steps, each step's keys)`` of the traces among ``trace_pks`` whose stored keys
    are current: of this parser version and one per step of the trace. The others (never judged by the
    mechanistic judge, or stored by an older parser) are left out: the caller parses their steps."""
    table, key, traces, trace_key = _names()
    qn = connection.ops.quote_name
    n_steps = qn(Trace._meta.get_field("n_steps").column)
    n_thought = qn(Trace._meta.get_field("n_thought_steps").column)
    pks = list(trace_pks)
    with connection.cursor() as cursor:
        for start in range(0, len(pks), LOOKUP_CHUNK):
            part = pks[start:start + LOOKUP_CHUNK]
            cursor.execute(
                f"SELECT c.{key}, c.steps, t.{n_steps}, t.{n_thought} FROM {table} c "
                f"JOIN {traces} t ON t.{trace_key} = c.{key} "
                f"WHERE c.{key} IN ({', '.join(['%s'] * len(part))}) AND c.version = %s",
                [*part, CLAIMS_VERSION],
            )
            for trace_pk, text, steps, thought in cursor.fetchall():
                keys = decode(text) if steps else []
                if len(keys) == steps:
                    yield trace_pk, thought, keys
