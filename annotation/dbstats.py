"""The planner's statistics of tables a bulk write has just changed, refreshed before the reads that follow it
(PostgreSQL only; docs/configuration.md, "PostgreSQL").

PostgreSQL plans from statistics that ANALYZE gathers: autovacuum does so once a table's changes since its last
ANALYZE pass 10% of its rows, on its own schedule (a minute's nap, a worker per table), and not at all where it is
switched off. A judge run writes a label per step (10M at 1M traces) and the score job it queues starts within
seconds, before any such pass: planned from statistics that said the study had no judge labels, the agreement's
read of a judge's confidences walked all 10M labels for each of its 50 chunks (2.9 s each, 143 s in all) instead
of the chunk's 200,000. So the readers that follow bulk writes (the score job, when it plans) refresh the tables
whose changes passed autovacuum's own threshold, with ANALYZE: a sample of 30,000 rows at the default statistics
target, about a second at 10M rows, whatever the table's size."""

from __future__ import annotations

from collections.abc import Iterable

from django.db import connections
from django.db.models import Model

#: autovacuum's default analyze threshold: a table is stale once its changes since its last ANALYZE pass
#: THRESHOLD_ROWS + THRESHOLD_SCALE x its rows (autovacuum_analyze_threshold, autovacuum_analyze_scale_factor).
THRESHOLD_ROWS = 50
THRESHOLD_SCALE = 0.1


def refresh_stale(models: Iterable[type[Model]], using: str = "default", *, written: int = 0) -> list[str]:
    """ANALYZE those of the ``models``' tables whose changes since their last ANALYZE pass autovacuum's threshold
    (never analyzed: every row is a change); returns their names. ``written``: rows the caller wrote to them in
    its own transaction, which PostgreSQL's counters show only once it commits. Tables another session is
    vacuuming or analyzing are skipped (SKIP_LOCKED): that one refreshes them. Nothing on SQLite, whose planner
    needs no statistics for the plans these reads take."""
    connection = connections[using]
    if connection.vendor != "postgresql":
        return []
    tables = sorted({model._meta.db_table for model in models})
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT relname FROM pg_stat_user_tables WHERE schemaname = current_schema() AND relname = ANY(%s) "
            "AND n_mod_since_analyze + %s > %s + %s * GREATEST(n_live_tup + %s, 0) ORDER BY relname",
            [tables, written, THRESHOLD_ROWS, THRESHOLD_SCALE, written],
        )
        stale = [name for (name,) in cursor.fetchall()]
        if stale:
            cursor.execute("ANALYZE (SKIP_LOCKED) " + ", ".join(connection.ops.quote_name(t) for t in stale))
    return stale
