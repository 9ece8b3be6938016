"""Fixtures of the review workflow tests: the standard users plus an
adjudicator, and a seeded study with skeletons, traces and a primary judge."""

from __future__ import annotations

import pytest
from django.utils import timezone

from annotation import services
from annotation.models import Membership, Step, StepLabel, Study, Trace
from tests.conftest import jsonl


@pytest.fixture
def annotator2(django_user_model, study):
    user = django_user_model.objects.create_user("bob", password="pw-bob")
    services.do_add_member(study, user.username, Membership.Role.ANNOTATOR)
    return user


def seed(do_import, n_problems: int = 2, models=("m1", "m2"), n_steps: int = 3, **extra) -> None:
    records = []
    for p in range(n_problems):
        records.append({
            "kind": "problem", "problem_id": f"p{p}", "statement": f"Ann has {p} apples and buys 2. How many?",
            "gold_answer": str(p + 2), "domain": "arithmetic" if p % 2 == 0 else "algebra", "tags": ["gsm8k", f"t{p}"],
            "skeleton": [{"text": f"She buys 2 more: ${p}+2={p + 2}$", "check": f"{p}+2={p + 2}"},
                         {"text": f"The answer is **{p + 2}**"}],
        })
        for m in models:
            steps = [f"Step {i + 1}: {p} + 2 = {p + 2}" for i in range(n_steps)]
            records.append({"kind": "trace", "problem_id": f"p{p}", "model": m, "trace_id": f"p{p}/{m}",
                            "steps": steps, "answer": str(p + 2), **extra})
    report = do_import(jsonl(*records))
    assert report.committed, report.rejected


@pytest.fixture
def seeded(study, do_import) -> Study:
    seed(do_import)
    return study


def judge(study: Study, name: str = "gpt-judge", primary: bool = True):
    from judges.models import JudgeConfig

    config, _ = JudgeConfig.objects.get_or_create(study=study, name=name, defaults={"provider": "fake"})
    if primary:
        Study.objects.filter(pk=study.pk).update(primary_judge=config)
        study.primary_judge = config
    return config


def judge_label(trace: Trace, index: int, config, verdict: str, reason: str = "judge says so") -> StepLabel:
    now = timezone.now()
    return StepLabel.objects.create(step=Step.objects.get(trace=trace, index=index), kind=StepLabel.Kind.JUDGE,
                                    judge=config, verdict=verdict, reason=reason, created_at=now, updated_at=now)


def human_label(trace: Trace, index: int, user, verdict: str, refs=(), note: str = "") -> StepLabel:
    now = timezone.now()
    return StepLabel.objects.create(step=Step.objects.get(trace=trace, index=index), kind=StepLabel.Kind.HUMAN,
                                    annotator=user, verdict=verdict, skeleton_refs=list(refs), reason=note,
                                    created_at=now, updated_at=now)
