"""One budget of regex time per request, shared by filtering and snippet marking (issue 29, M4).

The issue's request: ``re=MATCHME|(\\w+\\s?)+$`` over traces whose first step says MATCHME (so the
filter matches each trace at once and skips its other steps) and whose other steps are ordinary
sentences the second branch takes a few hundredths of a second to give up on. Marking the page's
snippets then re-ran the pattern over every step of 50 traces at up to 0.05 s each with no total
(88 s in the issue; 25 s here before the budget, 3 s after)."""

from __future__ import annotations

import time

import pytest
from rest_framework.test import APIClient

from search import filters
from search.core.regex import MATCH_TIMEOUT_S, Budget, BudgetSpent, compile_bounded
from tests.conftest import jsonl

pytestmark = pytest.mark.django_db

PATTERN = r"MATCHME|(\w+\s?)+$"
SLOW_STEP = " ".join(["word"] * 45) + "."  # ends in a full stop: the second branch backtracks, then fails


@pytest.fixture
def slow_study(study, do_import):
    records = [{"kind": "problem", "problem_id": "p", "statement": "A problem.", "gold_answer": "1"}]
    for k in range(50):
        records.append({"kind": "trace", "problem_id": "p", "model": "m", "trace_id": f"slow{k}",
                        "steps": ["MATCHME at once.", *[SLOW_STEP] * 30], "answer": "1"})
    report = do_import(jsonl(*records))
    assert report.committed, report.rejected
    return study


def test_one_step_costs_the_pattern_real_time_but_less_than_the_per_match_timeout():
    """The premise: each slow step is slow, yet no single match times out (so only a total stops it)."""
    pattern = compile_bounded(PATTERN)
    started = time.monotonic()
    assert pattern.search(SLOW_STEP) is None
    assert 0.002 < time.monotonic() - started < MATCH_TIMEOUT_S


def test_the_issues_request_ends_within_the_budget_and_says_its_marks_are_partial(slow_study, owner):
    client = APIClient()
    client.force_authenticate(owner)
    started = time.monotonic()
    r = client.get(f"/api/v1/studies/{slow_study.pk}/traces/", {"re": PATTERN})
    elapsed = time.monotonic() - started
    assert r.status_code == 200, r.content
    body = r.json()
    assert body["count"] == 50  # the filter matched every trace on its first step
    assert elapsed < filters.REGEX_BUDGET_S + 3.0  # the budget plus the request's own work; was ~50 s
    (note,) = [n for n in body.get("notes", []) if n.startswith("partial marks")]
    assert "ran out after" in note and "of its 50 traces show their matches" in note
    # What was marked before the budget ran out is kept: the first traces show their MATCHME step.
    assert body["results"][0]["matches"][0]["step"] == 1 and "<mark>MATCHME</mark>" in body["results"][0]["matches"][0]["html"]


def test_the_filter_leaves_the_marking_its_reserve_and_notes_a_partial_read(slow_study, owner, monkeypatch):
    """Filtering that runs out stops at the budget less the marking's reserve, with a note."""
    monkeypatch.setattr(filters, "REGEX_BUDGET_S", 0.8)
    monkeypatch.setattr(filters, "REGEX_MARK_RESERVE_S", 0.3)
    client = APIClient()
    client.force_authenticate(owner)
    started = time.monotonic()
    r = client.get(f"/api/v1/studies/{slow_study.pk}/traces/", {"re": r"NOWHERE|(\w+\s?)+$"})
    elapsed = time.monotonic() - started
    assert r.status_code == 200, r.content
    assert r.json()["count"] == 0
    assert any(n.startswith("the regular expression read the first") for n in r.json()["notes"])
    assert elapsed < 0.8 + 3.0


def test_a_budget_gives_each_match_at_most_what_is_left():
    pattern = compile_bounded(PATTERN)
    spent = Budget(0.0)
    with pytest.raises(BudgetSpent):
        pattern.search("anything", spent)
    nearly = Budget(0.01)
    started = time.monotonic()
    with pytest.raises(BudgetSpent):
        for _ in range(100):
            pattern.search(SLOW_STEP, nearly)
    assert time.monotonic() - started < 0.5  # not 100 slow steps (3 s): the budget ended them
    with pytest.raises(BudgetSpent):  # a reserve is kept back
        pattern.search("x", Budget(1.0), reserve=1.0)
    assert pattern.search("MATCHME.", Budget(1.0)).group() == "MATCHME"
