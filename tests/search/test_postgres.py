"""The same text queries on PostgreSQL (tsvector, websearch_to_tsquery, ts_headline) as on SQLite
(FTS5): the fixed table of tests/search/test_search.py is the expected answer of both, so a query
whose results differ between the databases fails on one of them. Runs in CI pass 2."""

from __future__ import annotations

import re

import pytest
from django.db import connection

from search import paging, services
from tests.integration import require
from tests.search.conftest import N_TRACES, N_WAIT
from tests.search.test_search import QUERIES, ids

N_TRACES_NOT_WAIT = N_TRACES - N_WAIT

pytestmark = [pytest.mark.integration, pytest.mark.django_db]


@pytest.fixture(autouse=True)
def _postgres():
    require(connection.vendor == "postgresql", "DATABASE_URL does not point at PostgreSQL")


def test_the_fixed_queries_answer_as_on_sqlite(study, owner_m, traces):
    got = {q: ids(study, owner_m, q=q) for q in sorted(QUERIES)}
    assert got == QUERIES


def test_the_index_is_a_generated_tsvector_with_a_gin_index():
    with connection.cursor() as cursor:
        cursor.execute("SELECT indexdef FROM pg_indexes WHERE tablename = 'annotation_step' AND indexname LIKE '%search%'")
        assert "gin (search_tsv)" in cursor.fetchone()[0].lower()


def test_headlines_mark_matches_and_escape_the_text(study, owner_m, traces):
    s = services.search(study, owner_m, {"q": '"let me check"'})
    hit = services.hits(s, list(s.traces))[traces["t4"].pk][0]
    assert "<mark>" in hit.html
    # ts_headline ends a fragment on a word: the full stop may go.
    assert re.sub(r"</?mark>", "", hit.html).startswith("Let me check again &lt;b&gt;bold")


def test_the_trace_ids_of_a_study_have_an_index_a_text_query_and_its_filters_read_alone():
    """search.0006 (after 0004): (study_id) INCLUDE the ids and the filtered columns, so the trace side of a
    text query with model/answer/flag/length/regime filters is an index-only scan; 0004's index is gone;
    and the labels by kind and verdict for the label filters."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'annotation_trace' "
                       "AND indexname LIKE 'search_trace_%'")
        indexes = dict(cursor.fetchall())
    assert list(indexes) == ["search_trace_filters"]
    assert ("(study_id) INCLUDE (id, problem_id, model, answer_correct, flagged, n_steps, regime)"
            in indexes["search_trace_filters"])
    with connection.cursor() as cursor:
        cursor.execute("SELECT indexdef FROM pg_indexes WHERE indexname = 'search_label_verdicts'")
        assert "(kind, verdict) INCLUDE (step_id, annotator_id, judge_id)" in cursor.fetchone()[0]


def test_a_search_plans_without_parallel_workers_and_with_cached_page_costs(study, owner_m, traces):
    """search.backends.planned_search inside a caller's transaction (the test's): the settings hold in
    the block and the connection's defaults are back after it (SET LOCAL alone would last to the
    caller's commit); the search still answers."""
    from search import backends

    with connection.cursor() as cursor:
        cursor.execute("SHOW max_parallel_workers_per_gather")
        workers = cursor.fetchone()[0]
        cursor.execute("SHOW random_page_cost")
        page_cost = cursor.fetchone()[0]
    with backends.planned_search() as cursor:
        cursor.execute("SHOW max_parallel_workers_per_gather")
        assert cursor.fetchone()[0] == "0"
        cursor.execute("SHOW random_page_cost")
        assert cursor.fetchone()[0] == "1.1"
    with connection.cursor() as cursor:
        cursor.execute("SHOW max_parallel_workers_per_gather")
        assert cursor.fetchone()[0] == workers != "0"
        # The connection's own cost is the search's too (reasonaudit/settings.py): the workers above tell a
        # setting put back from one left over.
        cursor.execute("SHOW random_page_cost")
        assert cursor.fetchone()[0] == page_cost == "1.1"
    page = paging.SearchPaginator(services.search(study, owner_m, {"q": "wait"}).traces, 50).get_page(1)
    assert page.paginator.count >= 1


@pytest.mark.django_db(transaction=True)
def test_the_planner_settings_end_with_the_search(study, owner_m, traces):
    """Outside any transaction (as a request is), SET LOCAL ends with the search's own transaction:
    the next query of the connection plans with the server's settings again."""
    from search import backends

    # The workers, not the page cost: the connection plans with the search's page cost too (reasonaudit/settings.py).
    with connection.cursor() as cursor:
        cursor.execute("SHOW max_parallel_workers_per_gather")
        before = cursor.fetchone()[0]
    with backends.planned_search() as cursor:
        cursor.execute("SHOW max_parallel_workers_per_gather")
        assert cursor.fetchone()[0] == "0"
    with connection.cursor() as cursor:
        cursor.execute("SHOW max_parallel_workers_per_gather")
        assert cursor.fetchone()[0] == before != "0"


def test_an_error_inside_a_planned_search_is_raised_as_itself(study, owner_m, traces):
    """Inside a caller's transaction, a failing statement aborts the search's savepoint: the error the
    caller sees is that statement's, not one from putting the planner settings back, and the savepoint's
    rollback has already put them back."""
    from django.db import ProgrammingError

    from search import backends

    with connection.cursor() as cursor:
        cursor.execute("SHOW max_parallel_workers_per_gather")
        workers = cursor.fetchone()[0]
    with pytest.raises(ProgrammingError, match="no_such_table"), backends.planned_search() as cursor:
        cursor.execute("SELECT * FROM no_such_table")
    with connection.cursor() as cursor:
        cursor.execute("SHOW max_parallel_workers_per_gather")
        assert cursor.fetchone()[0] == workers != "0"


def _ways(study, membership, params: dict, per_page: int = 3) -> tuple[list, list, list[str]]:
    """(page 1-3 of the search's own pager, the same pages by the planner alone, the pager's queries)."""
    from django.test.utils import CaptureQueriesContext

    s = services.search(study, membership, params)
    with CaptureQueriesContext(connection) as ctx:
        pager = s.paginator()(s.traces, per_page)
        walked = [([t.pk for t in pager.get_page(n)], pager.count, pager.count_is_lower_bound) for n in (1, 2, 3)]
    planner = paging.SearchPaginator(s.traces, per_page)
    planned = [([t.pk for t in planner.get_page(n)], planner.count, planner.count_is_lower_bound) for n in (1, 2, 3)]
    return walked, planned, [q["sql"] for q in ctx.captured_queries]


def test_a_walk_of_the_study_finds_the_pages_the_planner_finds(study, owner, member, many, monkeypatch):
    """search.paging.SearchPaginator's walk (backends.walked_matches), with a cap of 20 and a sample of 7: a dense
    query is walked (the sample, then a window), a query whose matches stop early falls back to the planner, a
    sparse one stops after the sample; the problem's statement, the channel, notes, other filters and blind mode
    give what the planner gives."""
    from annotation.models import Membership
    from tests.search.conftest import N_EARLY, label

    monkeypatch.setattr(paging, "COUNT_CAP", 20)
    monkeypatch.setattr(paging, "_WALK_SAMPLE", 7)
    for t in many[:30]:
        label(t, 1, verdict="valid", user=owner, reason="zeta here")
    for t in many[40:43]:
        label(t, 1, verdict="valid", user=member, reason="zeta too")
    owner_m, member_m = (Membership.objects.get(study=study, user=u) for u in (owner, member))

    def walks(sql: list[str]) -> int:
        return sum("WITH w AS MATERIALIZED" in q for q in sql)

    def planned(sql: list[str]) -> int:
        return sum("WITH m AS MATERIALIZED" in q for q in sql)

    walked, expected, sql = _ways(study, owner_m, {"q": "wait"})
    assert walked == expected and expected[0][1:] == (20, True) and (walks(sql), planned(sql)) == (6, 0)
    walked, expected, sql = _ways(study, owner_m, {"q": "early"})  # dense in the sample, none after the 15th
    assert walked == expected and expected[0][1:] == (N_EARLY, False) and (walks(sql), planned(sql)) == (6, 3)
    walked, expected, sql = _ways(study, owner_m, {"q": "check -wait"})  # one trace in 7
    assert walked == expected and expected[0][1:] == (N_TRACES_NOT_WAIT, False) and (walks(sql), planned(sql)) == (3, 3)
    for params in ({"q": "apples"}, {"q": "wait", "channel": "answer"}, {"q": "wait", "model": "m1"},
                   {"q": "zeta"}, {"q": "zeta", "answer_correct": "true"}):
        walked, expected, _sql = _ways(study, owner_m, params)
        assert walked == expected, params
    hers, expected, sql = _ways(study, member_m, {"q": "zeta"})  # her own notes only: 3 traces
    assert hers == expected and expected[0] == ([t.pk for t in many[40:43]], 3, False)
    assert N_WAIT > 20
