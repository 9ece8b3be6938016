"""A small study with words to find: steps, a problem statement, notes of labels."""

from __future__ import annotations

import pytest
from django.utils import timezone

from annotation import services
from annotation.models import Membership, Step, StepLabel, Study, Trace
from judges import services as judge_services
from search import scanners
from search.models import Scanner
from tests.conftest import jsonl
from tests.search.fake_scanner import FakeScanner

QUESTION = 'Does the model say "wait" anywhere in its reasoning?'

TRACES = {
    # trace_id: (model, steps, answer correct)
    "t1": ("m1", ["Ann has 3 apples.", "Wait, let me check: 3 + 2 = 5.", "The answer is 5."], True),
    "t2": ("m1", ["Ann has 3 apples.", "3 + 2 = 6, so 6 apples.", "The answer is 6."], False),
    "t3": ("m2", ["Start: 12.5 litres.", "Wait. Halve it: 6.25 litres.", "So 6.25."], True),
    "t4": ("m2", ["We verify the sum.", "Let me check again <b>bold</b>.", "Done: 7."], False),
}


def seed_search(study: Study, do_import) -> dict[str, Trace]:
    records = [
        {"kind": "problem", "problem_id": "apples", "statement": "Ann has 3 apples and buys 2 more. How many?",
         "gold_answer": "5"},
        {"kind": "problem", "problem_id": "juice", "statement": "A jug holds 12.5 litres of juice; pour half.",
         "gold_answer": "6.25"},
    ]
    for tid, (model, steps, correct) in TRACES.items():
        records.append({"kind": "trace", "problem_id": "apples" if tid in ("t1", "t2") else "juice", "model": model,
                        "trace_id": tid, "steps": steps, "answer": steps[-1], "answer_correct": correct})
    report = do_import(jsonl(*records))
    assert report.committed, report.rejected
    return {t.trace_id: t for t in Trace.objects.filter(study=study)}


def label(trace: Trace, index: int, *, verdict: str, user=None, judge=None, reason: str = "",
          kind: str = "human") -> StepLabel:
    step = Step.objects.get(trace=trace, index=index)
    now = timezone.now()
    return StepLabel.objects.create(step=step, kind=StepLabel.Kind.JUDGE if judge else kind, annotator=user,
                                    judge=judge, verdict=verdict, reason=reason, created_at=now, updated_at=now)


@pytest.fixture
def traces(study, do_import) -> dict[str, Trace]:
    return seed_search(study, do_import)


#: The bounded count's study (``many``): 70 traces of one problem.
N_TRACES = 70
#: Trace i says "wait" unless i is a multiple of 7: 60 of the 70 match.
N_WAIT = sum(1 for i in range(N_TRACES) if i % 7)
#: The first 15 say "early": dense at the start of the study, none after.
N_EARLY = 15


@pytest.fixture
def many(study, do_import) -> list[Trace]:
    """70 traces of one problem to page through (tests/search/test_bounded_count.py)."""
    records = [{"kind": "problem", "problem_id": "p", "statement": "Count the apples.", "gold_answer": "5"}]
    for i in range(N_TRACES):
        steps = ["I read the problem early." if i < N_EARLY else "I read the problem.",
                 "Wait, let me check." if i % 7 else "Let me check.", "The answer is 5."]
        records.append({"kind": "trace", "problem_id": "p", "model": "m1", "trace_id": f"b{i:03d}", "steps": steps,
                        "answer": "5", "answer_correct": True})
    report = do_import(jsonl(*records))
    assert report.committed, report.rejected
    return list(Trace.objects.filter(study=study).order_by("pk"))


@pytest.fixture
def owner_m(study, owner) -> Membership:
    return Membership.objects.get(study=study, user=owner)


@pytest.fixture
def member_m(study, member) -> Membership:
    return Membership.objects.get(study=study, user=member)


@pytest.fixture
def open_study(study) -> Study:
    services.do_update_study(study, {"blind": False})
    study.refresh_from_db()
    return study


@pytest.fixture
def server():
    """The tests' OpenAI-compatible judge server answering scanners (tests/search/fake_scanner.py)."""
    fake = FakeScanner().start()
    yield fake
    fake.stop()


@pytest.fixture
def scanner(study, owner, traces, server) -> Scanner:
    """A scanner asking QUESTION through a judge configuration on ``server``; not run yet."""
    judge_services.do_save_judge(study, {"name": "gpt", "model": "fake-model", "base_url": server.url,
                                         "concurrency": 2, "max_retries": 2, "timeout_seconds": 5.0})
    return scanners.do_create_scanner(study, name="waits", question=QUESTION, judge_name="gpt", user=owner)
