"""Text search and structured filters through the one filter set (search.services.search), on the
test database (SQLite here; tests/search/test_postgres.py runs the same queries on PostgreSQL)."""

from __future__ import annotations

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from annotation.access import AccessDenied
from annotation.models import Membership, Step
from search import paging, services
from search.errors import SearchError
from tests.review.conftest import judge
from tests.search.conftest import label

pytestmark = pytest.mark.django_db


def ids(study, membership, **params) -> list[str]:
    return list(services.search(study, membership, params).traces.values_list("trace_id", flat=True))


# The fixed queries both databases must answer alike (tests/search/test_postgres.py too).
QUERIES = {
    "wait": ["t1", "t3"],
    "WAIT check": ["t1"],
    '"let me check"': ["t1", "t4"],
    "wait or verify": ["t1", "t3", "t4"],
    "check -wait": ["t4"],
    '"let me" -"check again"': ["t1"],
    "12.5": ["t3", "t4"],  # t4 by its problem statement
    "6.25 or 6": ["t2", "t3"],
    "apples": ["t1", "t2"],  # the problem statement matches every trace of the problem
    "juice litres": ["t3", "t4"],
    "bold": ["t4"],
    "nothing-here-at-all": [],
}


@pytest.mark.parametrize("q", sorted(QUERIES))
def test_text_queries(study, owner_m, traces, q):
    assert ids(study, owner_m, q=q) == QUERIES[q]


def test_the_index_follows_edits_and_deletes(study, owner_m, traces):
    Step.objects.filter(trace=traces["t2"], index=2).update(text="Hmm, wait: 3 + 2 = 5.")
    assert ids(study, owner_m, q="wait") == ["t1", "t2", "t3"]
    Step.objects.filter(trace=traces["t1"]).delete()
    assert ids(study, owner_m, q="wait") == ["t2", "t3"]


def test_hits_mark_the_matching_steps_escaped_and_link_to_the_review_page(study, owner_m, traces):
    s = services.search(study, owner_m, {"q": '"let me check"'})
    page = list(s.traces)
    hits = services.hits(s, page)
    t4 = hits[traces["t4"].pk]
    assert [(h.kind, h.step) for h in t4] == [("step", 2)]
    # FTS5 marks a phrase as one, ts_headline word by word: both mark it, with the text escaped.
    assert t4[0].html.startswith("<mark>Let")
    # (ts_headline ends its fragment on a word; FTS5's snippet keeps the closing tag and the stop).
    assert re.sub(r"</?mark>", "", t4[0].html).startswith("Let me check again &lt;b&gt;bold")
    assert t4[0].url.endswith(f"/traces/{traces['t4'].pk}/#s2")


def test_problem_statements_are_hits_too(study, owner_m, traces):
    s = services.search(study, owner_m, {"q": "juice"})
    hits = services.hits(s, list(s.traces))
    assert hits[traces["t3"].pk][0].kind == "problem"
    assert "<mark>juice</mark>" in hits[traces["t3"].pk][0].html


def test_label_notes_are_searched(study, owner, owner_m, traces):
    label(traces["t2"], 2, verdict="invalid", user=owner, reason="Arithmetic slip: carries wrongly")
    assert ids(study, owner_m, q="carries") == ["t2"]
    s = services.search(study, owner_m, {"q": "carries"})
    hit = services.hits(s, list(s.traces))[traces["t2"].pk][0]
    assert (hit.kind, hit.step) == ("label", 2) and "<mark>carries</mark>" in hit.html


def test_a_blinded_annotator_searches_only_their_own_notes(study, owner, member, member_m, traces):
    assert study.blind
    label(traces["t2"], 2, verdict="invalid", user=owner, reason="carries wrongly")
    label(traces["t3"], 1, verdict="valid", user=member, reason="carries nicely")
    assert ids(study, member_m, q="carries") == ["t3"]


def test_a_blinded_annotator_may_not_filter_by_other_sources(study, owner, member_m, traces):
    judge(study)
    for params in ({"verdict": "invalid", "source": "human"}, {"verdict": "invalid", "source": "judge:gpt-judge"},
                   {"first_error_max": 2, "source": "annotator:olivia"}, {"human_judge_disagreement": "true"},
                   {"adjudicated": "true"}):
        with pytest.raises(AccessDenied, match="blind study"):
            ids(study, member_m, **params)
    assert ids(study, member_m, verdict="invalid", source="mine") == []


def test_bad_input_names_the_parameter(study, owner_m, traces):
    cases = {"q": ("-wait", "only excludes"), "answer_correct": ("maybe", "true or false"),
             "re": ("(", "not a valid pattern"), "verdict": ("odd", "valid choice"),
             "first_error_rel_max": ("2", "less than or equal"), "regime": ("novalue", "key=value"),
             "source": ("judge:nobody", "no judge named"), "cohort": ("999", "no cohort")}
    for field, (value, message) in cases.items():
        with pytest.raises(SearchError) as exc:
            ids(study, owner_m, **{field: value})
        assert field in exc.value.by_field and message in " ".join(exc.value.by_field[field]), (field, exc.value.errors)


def test_structured_filters(study, owner, owner_m, traces):
    j = judge(study)
    label(traces["t2"], 2, verdict="invalid", user=owner)
    label(traces["t2"], 2, verdict="valid", judge=j)
    label(traces["t4"], 3, verdict="invalid", user=owner)
    label(traces["t4"], 3, verdict="invalid", judge=j)
    label(traces["t1"], 1, verdict="valid", user=owner, kind="adjudication")
    assert ids(study, owner_m, model="m2") == ["t3", "t4"]
    assert ids(study, owner_m, answer_correct="false") == ["t2", "t4"]
    assert ids(study, owner_m, verdict="invalid") == ["t2", "t4"]
    assert ids(study, owner_m, labelled="true") == ["t2", "t4"]
    assert ids(study, owner_m, labelled="true", source="judge:gpt-judge") == ["t2", "t4"]
    assert ids(study, owner_m, labelled="false") == ["t1", "t3"]
    assert ids(study, owner_m, verdict="invalid", source="judge:gpt-judge") == ["t4"]
    assert ids(study, owner_m, first_error_max=2) == ["t2"]
    assert ids(study, owner_m, first_error_min=3) == ["t4"]
    assert ids(study, owner_m, first_error_rel_min="0.9") == ["t4"]
    assert ids(study, owner_m, first_error_rel_max="0.7") == ["t2"]
    assert ids(study, owner_m, human_judge_disagreement="true") == ["t2"]
    assert ids(study, owner_m, human_judge_disagreement="false") == ["t1", "t3", "t4"]
    assert ids(study, owner_m, adjudicated="true") == ["t1"]
    assert ids(study, owner_m, n_steps_min=3, n_steps_max=3, model="m1") == ["t1", "t2"]
    # Combined with the text query.
    assert ids(study, owner_m, q="answer", answer_correct="false") == ["t2"]


def test_regime_keys(study, owner_m, traces):
    traces["t1"].regime = {"temperature": 0.7, "api": {"kind": "chat"}}
    traces["t1"].save(update_fields=["regime"])
    traces["t2"].regime = {"temperature": 0.0}
    traces["t2"].save(update_fields=["regime"])
    assert ids(study, owner_m, regime="temperature=0.7") == ["t1"]
    assert ids(study, owner_m, regime="api.kind=chat") == ["t1"]


def test_regex_option(study, owner_m, traces):
    assert ids(study, owner_m, re=r"\d+\.\d+ litres") == ["t3"]
    assert ids(study, owner_m, re=r"wait", model="m1") == ["t1"]
    s = services.search(study, owner_m, {"re": r"6\.25"})
    hit = services.hits(s, list(s.traces))[s.traces[0].pk][0]
    assert "<mark>6.25</mark>" in hit.html and hit.step == 2


def test_outsiders_see_nothing(study, outsider, traces):
    from annotation import access

    with pytest.raises(AccessDenied) as exc:
        access.check_study(outsider, study.pk)
    assert exc.value.outsider


def test_results_stay_in_the_study(study, owner, owner_m, traces, do_import):
    from annotation import services as annotation_services
    from tests.search.conftest import seed_search

    other, _ = annotation_services.do_get_or_create_study("Other", owner=owner)
    seed_search(other, lambda data: do_import(data, target=other))
    assert ids(study, owner_m, q="wait") == ["t1", "t3"]
    assert Membership.objects.filter(study=other).count() == 1


def test_thought_steps_are_searched_and_the_channel_filter_narrows(study, owner_m, traces, do_import):
    from tests.conftest import jsonl

    report = do_import(jsonl({"kind": "trace", "problem_id": "apples", "model": "r1", "trace_id": "t5",
                              "thought_steps": ["Hmm, wait, apples again.", "Recount them."],
                              "steps": ["So 5 apples."], "answer": "5"}))
    assert report.committed, report.rejected
    assert ids(study, owner_m, q="recount") == ["t5"]
    assert ids(study, owner_m, q="recount", channel="answer") == []
    assert ids(study, owner_m, q="wait", channel="thought") == ["t5"]
    assert ids(study, owner_m, re="recount", channel="thought") == ["t5"]
    s = services.search(study, owner_m, {"q": "recount"})
    (hit,) = services.hits(s, list(s.traces))[s.traces[0].pk]
    assert (hit.kind, hit.step, hit.channel) == ("step", 2, "thought")


def test_label_filters_keep_to_the_study(study, owner, owner_m, traces, do_import):
    """The label filters select trace ids from the labels of every study (one pass, no join through the
    trace's study): the search's own study condition must keep another study's labelled traces out."""
    from annotation import services as annotation_services
    from tests.search.conftest import seed_search

    other, _ = annotation_services.do_get_or_create_study("Study B", owner=owner)
    theirs = seed_search(other, lambda data: do_import(data, target=other))
    label(theirs["t1"], 1, verdict="invalid", user=owner)
    label(traces["t4"], 3, verdict="invalid", user=owner)
    for params in ({"verdict": "invalid"}, {"labelled": "true"}, {"first_error_max": 3},
                   {"first_error_rel_min": "0.1"}):
        assert ids(study, owner_m, **params) == ["t4"], params
    assert ids(study, owner_m, labelled="false") == ["t1", "t2", "t3"]


def test_the_paginator_pages_only_in_id_order(study, member_m, traces):
    from search.paging import SearchPaginator

    s = services.search(study, member_m, {"q": "wait"})
    with pytest.raises(ValueError, match="ordered by pk"):
        SearchPaginator(s.traces.order_by("-pk"), 2).get_page(1)


@pytest.mark.parametrize("per_page", [1, 2, 3, 50])
def test_the_one_query_paginator_pages_as_djangos_does(study, member_m, traces, per_page):
    """SearchPaginator (count and the page's ids in one query) gives Django's pages, count and clamping."""
    from django.core.paginator import Paginator

    from search.paging import SearchPaginator

    for params in ({"q": "wait or apples"}, {"q": "zebra"}, {}):
        s = services.search(study, member_m, params)
        ours, django = SearchPaginator(s.traces, per_page), Paginator(s.traces, per_page)
        for number in (1, 2, 3, 99, "x", 0):
            mine, theirs = ours.get_page(number), django.get_page(number)
            assert [t.trace_id for t in mine] == [t.trace_id for t in theirs], (params, number)
            assert (mine.number, mine.paginator.count, mine.paginator.num_pages) == (
                theirs.number, theirs.paginator.count, theirs.paginator.num_pages)
        s = services.search(study, member_m, params)
        with CaptureQueriesContext(connection) as ctx:
            page = SearchPaginator(s.traces, per_page).get_page(1)
            [t.problem.problem_id for t in page]
        # The count with the ids, then the rows with their problems (none to read for an empty page); on PostgreSQL
        # the first runs in a transaction of its own with its planner settings (search.backends.planned_search).
        reads = [q["sql"] for q in ctx.captured_queries
                 if not re.match(r"(SAVEPOINT|RELEASE SAVEPOINT|BEGIN|COMMIT|SET LOCAL)\b", q["sql"])]
        assert len(reads) == (2 if page.object_list else 1), reads


def test_a_search_without_a_filter_is_counted_by_the_stored_summary_and_pages_alike(client, study, owner, traces):
    """No filter: the count is the stored number of the study's traces (nothing counted: 0.9 s at 1M traces) and the
    page is cut by the pk index; the pages and the API list the same traces, in the same pages, as a counted search."""
    from annotation.models import StudySummary, Trace
    from annotation.study_summary_writer import store

    membership = study.memberships.get(user=owner)
    store(study)
    s = services.search(study, membership, {})
    total = Trace.objects.of_study(study).count()
    assert s.count == total > 3
    model = Trace.objects.filter(study=study).values_list("model", flat=True).first()
    assert services.search(study, membership, {"model": model}).count is None  # a filter: counted
    pages = []
    for number in (1, 2, 99):
        with CaptureQueriesContext(connection) as ctx:
            page = s.paginator()(s.traces, 2).get_page(number)
        assert not [q for q in ctx.captured_queries if "COUNT(" in q["sql"]]
        pages.append(([t.pk for t in page], page.number, page.paginator.num_pages))
    StudySummary.objects.filter(study=study).delete()
    counted = services.search(study, membership, {})
    assert counted.count is None
    assert pages == [([t.pk for t in page], page.number, page.paginator.num_pages) for page in
                     (paging.SearchPaginator(counted.traces, 2).get_page(n) for n in (1, 2, 99))]
    store(study)
    client.force_login(owner)
    with CaptureQueriesContext(connection) as ctx:
        api = client.get(f"/api/v1/studies/{study.pk}/traces/").json()
    assert not [q for q in ctx.captured_queries if "COUNT(" in q["sql"]]
    assert api["count"] == total and [r["id"] for r in api["results"]][:2] == pages[0][0]
