"""Every list and the review page use a number of queries that does not grow
with the data (N+1 queries are bugs)."""

from __future__ import annotations

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from annotation.models import Step, Trace
from annotation.review.labels import LabelIn, do_flag, do_save_labels
from annotation.review.queues import do_assign
from annotation.review.tags import do_save_tags
from tests.conftest import jsonl
from tests.review.conftest import human_label, judge, judge_label

pytestmark = pytest.mark.django_db


def _grow(study, do_import, owner, member, annotator2, start: int, n: int) -> None:
    records = []
    for p in range(start, start + n):
        records.append({"kind": "problem", "problem_id": f"g{p}", "statement": "s", "gold_answer": "1",
                        "domain": "d", "tags": ["t"], "skeleton": [{"text": "a"}, {"text": "b"}]})
        for m in ("m1", "m2"):
            records.append({"kind": "trace", "problem_id": f"g{p}", "model": m, "trace_id": f"g{p}/{m}",
                            "steps": ["x = 1", "y = 2"], "answer": "1"})
    do_import(jsonl(*records))
    config = judge(study)
    for trace in Trace.objects.filter(trace_id__startswith="g").exclude(reviews__isnull=False)[:n]:
        human_label(trace, 1, member, "valid")
        human_label(trace, 1, annotator2, "invalid", note="no")
        judge_label(trace, 2, config, "invalid")
        do_flag(trace, member, "bad_problem")
    do_assign(study, owner, [member, annotator2, owner], 2)


WEB = ["studies", "study", "trace-list", "problem-list", "queue", "adjudication", "study-members"]
API = ["/api/v1/studies/", "/api/v1/studies/{s}/traces/", "/api/v1/studies/{s}/problems/",
       "/api/v1/studies/{s}/queue/", "/api/v1/studies/{s}/disagreements/", "/api/v1/studies/{s}/members/",
       "/api/v1/studies/{s}/traces/?disagreement=true&flagged=true&needs_review=true&answer_correct=true"]


@pytest.mark.parametrize("target", WEB + API)
def test_lists_use_a_constant_number_of_queries(client, django_assert_max_num_queries, study, do_import, owner,
                                                member, annotator2, target):
    if target.startswith("/api/"):
        client = APIClient()
        client.force_authenticate(owner)
        url = target.format(s=study.pk)
    else:
        client.force_login(owner)
        url = reverse(target) if target == "studies" else reverse(target, args=[study.pk])
    _grow(study, do_import, owner, member, annotator2, 0, 2)
    with django_assert_max_num_queries(40) as small:
        assert client.get(url).status_code == 200
    _grow(study, do_import, owner, member, annotator2, 2, 25)
    with django_assert_max_num_queries(len(small.captured_queries)):
        assert client.get(url).status_code == 200


def test_the_review_page_of_a_200_step_trace(client, django_assert_max_num_queries, study, do_import, member,
                                             annotator2, adjudicator):
    steps = [f"step {i}: {i} * 2 = {2 * i}" for i in range(200)]
    do_import(jsonl({"kind": "problem", "problem_id": "p", "statement": "s", "gold_answer": "1",
                     "skeleton": [{"text": f"fact {k}"} for k in range(10)]},
                    {"kind": "trace", "problem_id": "p", "model": "m", "steps": steps, "answer": "1"}))
    trace = Trace.objects.select_related("problem", "study").get()
    config = judge(study)
    do_save_labels(trace, member, version=0,
                          labels=[LabelIn(i, "valid", [1]) for i in range(1, 201)])
    do_save_labels(trace, annotator2, version=0,
                          labels=[LabelIn(i, "invalid", note="n") for i in range(1, 201)])
    for step in Step.objects.filter(trace=trace):
        judge_label(trace, step.index, config, "valid")
    do_save_tags(trace, member, version=1, tags={i: ["active_computation", "self_checking"] for i in range(1, 201)})
    for user in (member, adjudicator):  # revealed to both: every label and tag is on the page
        client.force_login(user)
        # One reads the step-function tags, one the step importance of the review panel (anchors).
        with django_assert_max_num_queries(11):
            response = client.get(reverse("trace", args=[trace.pk]))
        assert response.status_code == 200 and response.content.count(b'class="step') >= 200
        assert response.content.count(b'value="self_checking" checked') == (200 if user == member else 0)
    api = APIClient()
    api.force_authenticate(member)
    with django_assert_max_num_queries(6):
        assert len(api.get(f"/api/v1/traces/{trace.pk}/").json()["labels"]) == 600
    with django_assert_max_num_queries(5):
        assert len(api.get(f"/api/v1/traces/{trace.pk}/labels/").json()["labels"]) == 200
