"""The full-text index on the two databases (docs/search.md).

PostgreSQL: a stored, generated ``search_tsv`` column with a GIN index on each searched table
(steps' text, problems' statements, labels' reasons); every insert or update computes it, so no
write path has to know about search. SQLite: an FTS5 table per searched table with external
content (the source table itself) kept in step by triggers.

``ensure_index`` creates what is missing and is idempotent: the migration calls it, and so does
``post_migrate`` after every ``migrate``, because SQLite's schema editor rebuilds a table to alter
it (dropping its triggers); an FTS table whose triggers were missing is rebuilt from its source.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from django.db import connections, transaction
from django.db.backends.base.base import BaseDatabaseWrapper

from search.core.query import START, STOP, Query


@dataclass(frozen=True)
class Source:
    table: str  # the Django table searched
    column: str  # its text column
    fts: str  # the SQLite FTS5 table


STEPS = Source("annotation_step", "text", "search_step_fts")
PROBLEMS = Source("annotation_problem", "statement", "search_problem_fts")
LABELS = Source("annotation_steplabel", "reason", "search_label_fts")
SOURCES = (STEPS, PROBLEMS, LABELS)

# Both indexes hold runs of letters and digits, lowercased (search.core.query).
_PG_DOC = "to_tsvector('simple'::regconfig, regexp_replace({col}, '[^[:alnum:]]+', ' ', 'g'))"
_PG_QUERY = "websearch_to_tsquery('simple'::regconfig, %s)"
_LT, _GT = "\ue002", "\ue003"


def is_postgres(connection: BaseDatabaseWrapper) -> bool:
    return connection.vendor == "postgresql"


def ensure_index(using: str = "default") -> list[str]:
    """Create the index where it is missing; returns what was (re)built, for the migration's log."""
    connection = connections[using]
    if connection.vendor not in ("postgresql", "sqlite"):
        return []
    built = []
    with connection.cursor() as cursor:
        existing = set(connection.introspection.table_names(cursor))
        for src in SOURCES:
            if src.table not in existing:
                continue
            if is_postgres(connection):
                if _ensure_pg(cursor, src):
                    built.append(src.table)
            elif _ensure_sqlite(cursor, src, existing):
                built.append(src.table)
    return built


def _ensure_pg(cursor, src: Source) -> bool:
    cursor.execute(
        "SELECT 1 FROM information_schema.columns WHERE table_name = %s AND column_name = 'search_tsv'", [src.table]
    )
    if cursor.fetchone():
        return False
    doc = _PG_DOC.format(col=f'"{src.column}"')
    cursor.execute(f'ALTER TABLE "{src.table}" ADD COLUMN search_tsv tsvector GENERATED ALWAYS AS ({doc}) STORED')
    # The text query's index: search_tsv @@ websearch_to_tsquery(...).
    cursor.execute(f'CREATE INDEX IF NOT EXISTS "{src.table}_search_tsv" ON "{src.table}" USING GIN (search_tsv)')
    return True


def _ensure_sqlite(cursor, src: Source, existing: set[str]) -> bool:
    cursor.execute("SELECT name FROM sqlite_master WHERE type = 'trigger' AND tbl_name = %s", [src.table])
    triggers = {row[0] for row in cursor.fetchall()}
    wanted = {f"{src.fts}_ai", f"{src.fts}_ad", f"{src.fts}_au"}
    if src.fts in existing and wanted <= triggers:
        return False
    cursor.execute(
        f"CREATE VIRTUAL TABLE IF NOT EXISTS {src.fts} USING fts5({src.column}, content='{src.table}', "
        f"content_rowid='id', tokenize='unicode61 remove_diacritics 0')"
    )
    new = f"INSERT INTO {src.fts}(rowid, {src.column}) VALUES (new.id, new.{src.column});"
    old = f"INSERT INTO {src.fts}({src.fts}, rowid, {src.column}) VALUES ('delete', old.id, old.{src.column});"
    cursor.execute(f"CREATE TRIGGER IF NOT EXISTS {src.fts}_ai AFTER INSERT ON {src.table} BEGIN {new} END")
    cursor.execute(f"CREATE TRIGGER IF NOT EXISTS {src.fts}_ad AFTER DELETE ON {src.table} BEGIN {old} END")
    cursor.execute(f"CREATE TRIGGER IF NOT EXISTS {src.fts}_au AFTER UPDATE OF {src.column} ON {src.table} "
                   f"BEGIN {old} {new} END")
    # Rows written while a trigger was missing are in the source only: rebuild from it.
    cursor.execute(f"INSERT INTO {src.fts}({src.fts}) VALUES ('rebuild')")
    return True


#: What an import writes and indexes after (indexed_after): its steps and its new problems' statements.
IMPORTED = (STEPS, PROBLEMS)


@contextmanager
def indexed_after(using: str = "default", sources: tuple[Source, ...] = IMPORTED) -> Iterator[None]:
    """Around a bulk insert of steps and problems (an import): on SQLite, the rows of ``sources`` inserted
    inside are added to their FTS5 index by one statement per table at the end instead of one trigger run
    per row.

    Row by row, FTS5 tokenizes each text and flushes its pending terms into a new index segment at every
    statement's end, which the automerge then merges again; one ``INSERT ... SELECT`` over the new rows
    fills its in-memory terms up to their limit before each flush (problems' statements cost more than
    the eight times as many steps did with their trigger: 0.42 s CPU for the 13,190 problems of GSM8K 10x,
    docs/benchmarks.md "Import"). Each insert trigger is dropped and re-created with its own stored SQL
    inside one savepoint: SQLite's DDL is transactional and the drop takes the write lock, held to the
    commit, so no other connection ever sees a table without its trigger, and a failed import rolls the
    trigger's absence back with its rows. The body may insert rows but must not update the indexed text
    of rows it inserted, nor delete them (their triggers would remove terms that were never indexed).
    PostgreSQL computes its column on insert: nothing to do there."""
    connection = connections[using]
    if connection.vendor != "sqlite":
        yield
        return
    deferred: list[tuple[Source, str, int]] = []  # (source, its trigger's SQL, its last id before)
    with transaction.atomic(using=using):
        with connection.cursor() as cursor:
            for src in sources:
                trigger = f"{src.fts}_ai"
                cursor.execute("SELECT sql FROM sqlite_master WHERE type = 'trigger' AND name = %s", [trigger])
                row = cursor.fetchone()
                if row is None:
                    continue  # no index to keep (the search migration has not run): inserted as usual
                # Ids only grow (AUTOINCREMENT), so the rows inserted inside are those above this one.
                cursor.execute(f'SELECT COALESCE(MAX(id), 0) FROM "{src.table}"')
                deferred.append((src, row[0], cursor.fetchone()[0]))
                cursor.execute(f"DROP TRIGGER {trigger}")
        yield
        with connection.cursor() as cursor:
            for src, trigger_sql, last in deferred:
                cursor.execute(
                    f'INSERT INTO {src.fts}(rowid, {src.column}) SELECT id, "{src.column}" FROM "{src.table}" '
                    f"WHERE id > %s",
                    [last],
                )
                cursor.execute(trigger_sql)


def drop_index(using: str = "default") -> None:
    """The migration's reverse."""
    connection = connections[using]
    with connection.cursor() as cursor:
        for src in SOURCES:
            if is_postgres(connection):
                cursor.execute(f'ALTER TABLE "{src.table}" DROP COLUMN IF EXISTS search_tsv')
            elif connection.vendor == "sqlite":
                for suffix in ("ai", "ad", "au"):
                    cursor.execute(f"DROP TRIGGER IF EXISTS {src.fts}_{suffix}")
                cursor.execute(f"DROP TABLE IF EXISTS {src.fts}")


# The planner settings of a search's matching-ids query on PostgreSQL, measured on the 100,000-trace
# study (docs/benchmarks.md):
# * max_parallel_workers_per_gather = 0: a text query's matches are hashed subplans of the trace scan
#   (one per searched table). When PostgreSQL parallelizes that scan, every worker runs each subplan
#   again -- the bitmap scan of every step holding *wait* three times over on two cores -- so the
#   parallel plan was slower than the serial one.
# * random_page_cost = 1.1: the default 4.0 prices an index probe as a read from a spinning disk, so the
#   notes' matches (10,000 labels) reached their steps by a sequential scan of all 1,000,000 steps
#   (190-250 ms) instead of 10,000 probes of the step key (70-100 ms). The search reads tables a serving
#   database holds in memory; 1.1 is the usual value for that (and SSDs).
# * jit = off: a walk of the study's first traces (``walked_matches``) is costed as thousands of index probes, over
#   the JIT's threshold, and compiling it took 200-250 ms of a 60 ms query.
# Every connection plans with the last two already (reasonaudit/settings.py); a search keeps them where a
# DATABASE_URL's own options plan otherwise.
_SEARCH_PLANNER = ("max_parallel_workers_per_gather", "0"), ("random_page_cost", "1.1"), ("jit", "off")


@contextmanager
def planned_search(using: str = "default") -> Iterator:
    """A cursor for a search's query (the pager's ids, a cohort's ``INSERT ... SELECT``) with the
    planner settings above, on PostgreSQL inside a transaction of its own; the settings end with it.
    ``SET LOCAL`` lasts to the end of the *outermost* transaction, so inside a caller's transaction
    they are set back to the connection's defaults on the way out; after an error the savepoint's
    rollback undoes them (a statement then would fail in the aborted transaction and hide the
    error). On SQLite a plain cursor: its
    transactions begin IMMEDIATE here (reasonaudit/settings.py), so a transaction around a read would
    take the write lock and queue the search behind an import."""
    connection = connections[using]
    if not is_postgres(connection):
        with connection.cursor() as cursor:
            yield cursor
        return
    nested = connection.in_atomic_block
    with transaction.atomic(using=using), connection.cursor() as cursor:
        # One statement each way (constants, no parameters: psycopg sends them as one simple query).
        cursor.execute("; ".join(f"SET LOCAL {name} = {value}" for name, value in _SEARCH_PLANNER))
        yield cursor
        if nested:
            cursor.execute("; ".join(f"SET LOCAL {name} TO DEFAULT" for name, _value in _SEARCH_PLANNER))


# --------------------------------------------------------------------------
# Queries. Each returns SQL selecting ids and its parameters, for RawSQL in a
# queryset filter (``pk__in=RawSQL(...)``).


def matching_ids(src: Source, query: Query, *, select: str = "id", where: str = "", params: list | None = None,
                 using: str = "default") -> tuple[str, list]:
    """SQL selecting ``select`` (a column of the source table, aliased ``t``) of the rows of ``src``
    matching ``query``, narrowed by ``where`` (SQL on ``t``)."""
    connection = connections[using]
    extra = f" AND ({where})" if where else ""
    if is_postgres(connection):
        sql = f'SELECT t.{select} FROM "{src.table}" t WHERE t.search_tsv @@ {_PG_QUERY}{extra}'
        return sql, [query.websearch(), *(params or [])]
    # CROSS JOIN fixes SQLite's join order: the FTS table first. Probed by rowid from the other side,
    # FTS5 evaluates the whole MATCH again for every row (seconds on a common word).
    sql = (f'SELECT t.{select} FROM {src.fts} f CROSS JOIN "{src.table}" t ON t.id = f.rowid '
           f"WHERE {src.fts} MATCH %s{extra}")
    return sql, [query.fts5(), *(params or [])]


def matching_traces(query: Query, *, study_id: int, step_where: str = "", step_params: list | None = None,
                    label_where: str = "", label_params: list | None = None,
                    using: str = "default") -> tuple[str, list]:
    """SQL selecting the ids of the traces whose steps, problem statement or (visible) labels' reasons
    match ``query``: one ``UNION ALL`` of the three index-driven matches, for ``pk__in``.

    Why one union rather than three ``IN`` subqueries joined by OR: PostgreSQL cannot turn an OR of
    ``IN`` subqueries into joins, so it checks each trace against a hashed subplan of each -- and a
    subplan whose matches do not fit ``work_mem`` is not hashed but rescanned for every trace of the
    study (issue 33: ``q=wait`` at 300,000 traces took 2.2 s with 32 MB and did not finish in nine
    minutes with the shipped 4 MB). A single ``IN`` of a union is a semi-join, which the planner
    runs as a hash join (batched to disk when it outgrows ``work_mem``, never rescanned) or as
    probes of the trace key: each arm is read once, through its GIN (or FTS5) index, at any size."""
    step_sql, s_params = matching_ids(STEPS, query, select="trace_id", where=step_where, params=step_params,
                                      using=using)
    prob_sql, p_params = matching_ids(PROBLEMS, query, where="t.study_id = %s", params=[study_id], using=using)
    lab_sql, l_params = matching_ids(LABELS, query, select="step_id", where=label_where, params=label_params,
                                     using=using)
    sql = (f"{step_sql} UNION ALL SELECT tp.id FROM annotation_trace tp WHERE tp.problem_id IN ({prob_sql}) "
           f"UNION ALL SELECT sl.trace_id FROM annotation_step sl WHERE sl.id IN ({lab_sql})")
    return sql, [*s_params, *p_params, *l_params]


def walked_matches(query: Query, *, study_id: int, window: int, limit: int, rest: tuple[str, list],
                   step_where: str = "", step_params: list | None = None, label_where: str = "",
                   label_params: list | None = None, each_trace: bool = True) -> tuple[str, list]:
    """PostgreSQL only: SQL of the first ``limit`` traces, in id order, among the study's first ``window`` traces that
    match ``query`` and that ``rest`` (SQL of trace ids in a column ``_walk_id``: the rest of the search) selects, as
    rows (how many traces were read, a trace's id or NULL).

    For a query that matches most traces (search.paging.SearchPaginator): ``matching_traces`` reads every match
    (``q=wait``: 1,000,000 steps at 1M traces, 7 s) before the first trace is known, and its union hides from the
    planner how many traces match, so a LIMIT never makes it stop early. Here each trace of the window is probed by
    its own steps (the (trace, index) key; the first matching step ends it), its problem and its notes, and then by
    the rest of the search on its id. The steps' and the rest's probes are correlated subqueries with a LIMIT, which
    the planner cannot turn into a hash of every match or of the whole study (it estimates the study's own traces at
    one in 200 and hashed them all for 12,500 ids: 54 ms at 100,000 traces); the problem's and the notes' it may
    hash when their matches are few. So the read is as long as the window, whatever the size of the study.

    ``each_trace=False`` lets the planner hash the steps' matches too (an ``EXISTS``): for a sample of a few hundred
    traces it does so only when the matches are few, and a sparse query's sample then costs a probe of the index
    rather than one of every step of the sample (``q=zebra`` at 100,000 traces: a search of 10 ms, not 20; 8 ms
    without a walk)."""
    step_extra = f" AND ({step_where})" if step_where else ""
    label_extra = f" AND ({label_where})" if label_where else ""
    rest_sql, rest_params = rest
    steps = f'SELECT 1 FROM "{STEPS.table}" t WHERE t.trace_id = w.id AND t.search_tsv @@ {_PG_QUERY}{step_extra}'
    steps_match = f"({steps} LIMIT 1) IS NOT NULL" if each_trace else f"EXISTS ({steps})"
    sql = ("WITH w AS MATERIALIZED (SELECT id, problem_id FROM annotation_trace WHERE study_id = %s ORDER BY id LIMIT %s) "
           "SELECT n.n, m.id FROM (SELECT COUNT(*) AS n FROM w) n LEFT JOIN (SELECT w.id FROM w WHERE "
           f"({steps_match} "
           f'OR EXISTS (SELECT 1 FROM "{PROBLEMS.table}" t WHERE t.id = w.problem_id AND t.search_tsv @@ {_PG_QUERY}) '
           f'OR EXISTS (SELECT 1 FROM "{LABELS.table}" t JOIN "{STEPS.table}" ls ON ls.id = t.step_id '
           f"WHERE ls.trace_id = w.id AND t.search_tsv @@ {_PG_QUERY}{label_extra})) "
           f"AND (SELECT 1 FROM ({rest_sql}) r WHERE r._walk_id = w.id LIMIT 1) IS NOT NULL "
           "ORDER BY w.id LIMIT %s) m ON TRUE ORDER BY m.id")
    text = query.websearch()
    return sql, [study_id, window, text, *(step_params or []), text, text, *(label_params or []), *rest_params, limit]


def step_snippets(query: Query, trace_ids: list[int], *, channel: str = "",
                  using: str = "default") -> list[tuple[int, int, int, str, str]]:
    """(step id, trace id, step index, channel, marked snippet) of the matching steps of ``trace_ids``
    (of one channel if given), in trace and step order. Snippets mark matches with START/STOP
    (search.core.query)."""
    if not trace_ids:
        return []
    connection = connections[using]
    only = " AND s.channel = %s" if channel else ""
    extra = [channel] if channel else []
    with connection.cursor() as cursor:
        if is_postgres(connection):
            options = (f'StartSel="{START}", StopSel="{STOP}", MaxWords=30, MinWords=12, MaxFragments=2, '
                       'FragmentDelimiter=" … "')
            # ts_headline's parser drops what looks like an HTML tag: hide angle brackets from it
            # and put them back below (the page escapes them). The page's steps first (a materialized
            # CTE, by the trace key), then the match on those few: left to itself PostgreSQL ANDed the
            # trace key with the GIN scan of the whole study's matches (a phrase of common words:
            # 26,791 steps for 50 traces, 60 ms of a 215 ms search).
            cursor.execute(
                f"WITH page AS MATERIALIZED (SELECT s.id, s.trace_id, s.\"index\", s.channel, s.text, s.search_tsv "
                f"FROM annotation_step s WHERE s.trace_id = ANY(%s){only}) "
                f"SELECT s.id, s.trace_id, s.\"index\", s.channel, ts_headline('simple'::regconfig, "
                f"replace(replace(s.text, '<', %s), '>', %s), q, %s) "
                f"FROM page s, {_PG_QUERY} q WHERE s.search_tsv @@ q "
                f"ORDER BY s.trace_id, s.\"index\"",
                [list(trace_ids), *extra, _LT, _GT, options, query.websearch()],
            )
            return [(a, b, c, d, h.replace(_LT, "<").replace(_GT, ">")) for a, b, c, d, h in cursor.fetchall()]
        else:
            placeholders = ", ".join(["%s"] * len(trace_ids))
            # The page's steps lie between the lowest and highest step id of its traces: FTS5 seeks to
            # that rowid range instead of listing every match of the study and probing each step for
            # its trace (55-90 ms for a common word at 100,000 traces; 0.2-4 ms within the range).
            span = f"SELECT {{}}(id) FROM annotation_step WHERE trace_id IN ({placeholders})"
            cursor.execute(
                f"SELECT s.id, s.trace_id, s.\"index\", s.channel, snippet({STEPS.fts}, 0, %s, %s, '…', 24) "
                f"FROM {STEPS.fts} CROSS JOIN annotation_step s ON s.id = {STEPS.fts}.rowid "
                f"WHERE {STEPS.fts} MATCH %s AND {STEPS.fts}.rowid BETWEEN ({span.format('MIN')}) "
                f"AND ({span.format('MAX')}) AND s.trace_id IN ({placeholders}){only} "
                f"ORDER BY s.trace_id, s.\"index\"",
                [START, STOP, query.fts5(), *trace_ids, *trace_ids, *trace_ids, *extra],
            )
        return [tuple(row) for row in cursor.fetchall()]
