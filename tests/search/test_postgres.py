"""The same text queries on PostgreSQL (tsvector, websearch_to_tsquery, ts_headline) as on SQLite
(FTS5): the fixed table of tests/search/test_search.py is the expected answer of both, so a query
whose results differ between the databases fails on one of them. Runs in CI pass 2."""

from __future__ import annotations

import re

import pytest
from django.db import connection

from search import services
from tests.integration import require
from tests.search.test_search import QUERIES, ids

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


def test_the_trace_ids_of_a_study_have_an_index_a_text_query_reads_alone():
    """search.0004: (study_id) INCLUDE (id, problem_id), so the text query's trace side is an index-only scan."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT indexdef FROM pg_indexes WHERE tablename = 'annotation_trace' "
                       "AND indexname = 'search_trace_study_ids'")
        (indexdef,) = cursor.fetchone()
    assert "(study_id) INCLUDE (id, problem_id)" in indexdef
