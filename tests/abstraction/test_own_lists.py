"""Abstraction items belong to their benchmark (issue 31: "abstraction items (384 zero-step traces) mix into the
study's problem and trace lists and counts"): the study's problem list, trace list and problem counts leave the imported items and their traces out, as they leave a fidelity suite's variants out; ``?suites=1``
lists them, and the Abstraction page still shows every answer."""

from __future__ import annotations

import pytest

from abstraction.importing import import_outputs
from annotation.models import Problem, Trace
from annotation.study_summary import by_model
from tests.data_paths import ABSTRACTION_SAMPLE
from tests.subjects.conftest import problem_records

pytestmark = pytest.mark.django_db


@pytest.fixture
def mixed(study, do_import):
    assert do_import(problem_records(2)).committed
    assert import_outputs(study, ABSTRACTION_SAMPLE, model="gpt-4o-mini").committed
    assert Problem.objects.filter(study=study).count() == 2 + 4 * 96
    return study


def test_the_study_lists_and_counts_leave_the_benchmark_items_out(client, owner, mixed):
    client.force_login(owner)
    problems = client.get(f"/studies/{mixed.pk}/problems/").content.decode()
    assert 'href="/problems/' in problems and "abs/" not in problems
    assert "abs/published" in client.get(f"/studies/{mixed.pk}/problems/", {"suites": "1"}).content.decode()
    item_trace = Trace.objects.filter(study=mixed, model="gpt-4o-mini").order_by("problem_id", "pk").first()  # first as the list orders
    link = f'href="/traces/{item_trace.pk}/"'
    assert link not in client.get(f"/studies/{mixed.pk}/traces/").content.decode()
    assert link in client.get(f"/studies/{mixed.pk}/traces/", {"suites": "1"}).content.decode()
    assert Trace.objects.filter(study=mixed).own().count() == 0 < Trace.objects.filter(study=mixed).count()
    assert by_model(mixed)["problems"] == 2
    assert ">0.98<" in client.get(f"/studies/{mixed.pk}/abstraction/").content.decode()  # the page reads them all
