"""One budget of regex time per request, shared by filtering and snippet marking (issue 29, M4).

The issue's request: ``re=MATCHME|(\\w+\\s?)+$`` over traces whose first step says MATCHME (so the
filter matches each trace at once and skips its other steps) and whose other steps are ordinary
sentences the second branch takes a few hundredths of a second to give up on. Marking the page's
snippets then re-ran the pattern over every step of 50 traces at up to 0.05 s each with no total
(88 s in the issue; 25 s here before the budget, 3 s after -- measured, not asserted: the tests count the
matches a request makes against a budget on a clock of their own, so a busy machine cannot fail them)."""

from __future__ import annotations

import itertools

import pytest
from rest_framework.test import APIClient

from search import filters
from search.core.regex import Bounded, Budget, BudgetSpent, compile_bounded
from tests.conftest import jsonl

pytestmark = pytest.mark.django_db

PATTERN = r"MATCHME|(\w+\s?)+$"
SLOW_STEP = " ".join(["word"] * 45) + "."  # ends in a full stop: the second branch backtracks, then fails


#: What each match costs on the tests' clock (the counting_clock fixture): a budget of B seconds allows B / TICK.
TICK = 0.01
#: The matches the issue's request made without a budget: the filter's one per trace, then every step marked.
UNBOUNDED = 50 + 50 * 31


@pytest.fixture
def counting_clock(monkeypatch):
    """A budget's clock that advances TICK at every match it is asked about, and a count of the matches: the
    budget is then a number of matches, whatever the machine's speed. Returns the list the count goes in."""
    ticks = itertools.count()

    def left(self, reserve: float = 0.0) -> float:
        return self.seconds - reserve - TICK * next(ticks)

    searched: list[int] = []
    real_search = Bounded.search

    def search(self, text, budget=None, **kwargs):
        searched.append(1)
        return real_search(self, text, budget, **kwargs)

    monkeypatch.setattr(Budget, "left", left)
    monkeypatch.setattr(Bounded, "search", search)
    return searched


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
    """The premise: no single match of a slow step times out (so only a total stops the request; how slow
    each step is, is measured in benchmarks, not asserted here)."""
    pattern = compile_bounded(PATTERN)
    assert pattern.search(SLOW_STEP) is None  # not TimeoutError


def test_the_issues_request_ends_within_the_budget_and_says_its_marks_are_partial(slow_study, owner,
                                                                                     counting_clock):
    client = APIClient()
    client.force_authenticate(owner)
    r = client.get(f"/api/v1/studies/{slow_study.pk}/traces/", {"re": PATTERN})
    assert r.status_code == 200, r.content
    body = r.json()
    assert body["count"] == 50  # the filter matched every trace on its first step
    # Filtering and marking share one budget: at most its worth of matches, not the unbounded request's.
    assert len(counting_clock) <= filters.REGEX_BUDGET_S / TICK + 1 < UNBOUNDED
    (note,) = [n for n in body.get("notes", []) if n.startswith("partial marks")]
    assert "ran out after" in note and "of its 50 traces show their matches" in note
    # What was marked before the budget ran out is kept: the first traces show their MATCHME step.
    assert body["results"][0]["matches"][0]["step"] == 1 and "<mark>MATCHME</mark>" in body["results"][0]["matches"][0]["html"]


def test_the_filter_leaves_the_marking_its_reserve_and_notes_a_partial_read(slow_study, owner, monkeypatch,
                                                                           counting_clock):
    """Filtering that runs out stops at the budget less the marking's reserve, with a note."""
    monkeypatch.setattr(filters, "REGEX_BUDGET_S", 0.8)
    monkeypatch.setattr(filters, "REGEX_MARK_RESERVE_S", 0.3)
    client = APIClient()
    client.force_authenticate(owner)
    r = client.get(f"/api/v1/studies/{slow_study.pk}/traces/", {"re": r"NOWHERE|(\w+\s?)+$"})
    assert r.status_code == 200, r.content
    assert r.json()["count"] == 0
    assert any(n.startswith("the regular expression read the first") for n in r.json()["notes"])
    # The filter had 0.5 s of the 0.8: that many matches (of 50 x 31 steps), then it stopped.
    assert len(counting_clock) <= (0.8 - 0.3) / TICK + 1 < 50 * 31


def test_a_budget_gives_each_match_at_most_what_is_left(counting_clock):
    pattern = compile_bounded(PATTERN)
    with pytest.raises(BudgetSpent):
        pattern.search("anything", Budget(0.0))
    nearly = Budget(2 * TICK)
    with pytest.raises(BudgetSpent):
        for _ in range(100):
            pattern.search(SLOW_STEP, nearly)
    assert len(counting_clock) <= 1 + 3  # the spent one, then two ticks' worth: not 100 slow steps
    with pytest.raises(BudgetSpent):  # a reserve is kept back
        pattern.search("x", Budget(1.0), reserve=1.0)
    assert pattern.search("MATCHME.", Budget(1.0)).group() == "MATCHME"
