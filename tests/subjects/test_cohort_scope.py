"""A saved cohort as the scope of generation, fidelity and faithfulness runs (issue 22): one check of
the ``cohort`` parameter for the runs page/REST (the kinds' serializers), the services and the CLI."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from rest_framework import serializers

from annotation.models import Membership, Problem
from fidelity.running import run_items
from fidelity.suites import do_create_suite
from runs import kinds
from search import services as search_services
from subjects import services
from tests.search.conftest import seed_search

pytestmark = pytest.mark.django_db


@pytest.fixture
def cohort(study, owner, do_import):
    seed_search(study, do_import)
    membership = Membership.objects.get(study=study, user=owner)
    # t1 and t2 answer the "apples" problem only
    return search_services.do_save_cohort(study, membership, name="apples", data={"q": "apples", "model": "m1"})


@pytest.mark.parametrize("kind", ["generation", "fidelity", "interventions", "anytime", "early_answering"])
def test_every_kind_refuses_a_cohort_of_another_study_by_the_field(study, subject, kind):
    made = subject()
    for bad, says in (("999", "no cohort 999"), ("apples", "give a cohort's id")):
        with pytest.raises(serializers.ValidationError) as err:
            kinds.validate(kind, study, {"model": made.name, "cohort": bad})
        assert says in str(err.value.detail["cohort"][0])


def test_generation_over_a_cohort_asks_only_its_traces_problems(study, subject, cohort):
    made = subject()
    every = services.problems_in_scope(made, "all", 1)
    assert len(every) == 2
    scoped = services.problems_in_scope(made, "all", 1, cohort=str(cohort.pk))
    assert scoped == [Problem.objects.get(study=study, problem_id="apples").pk]
    record = services.do_start_generation(made, cohort=str(cohort.pk), queue=False)
    assert record.job.params["cohort"] == str(cohort.pk)
    assert record.job.total == 1


def test_generation_started_through_the_kind_keeps_the_cohort(study, subject, cohort, owner):
    made = subject()
    record = kinds.start("generation", study, {"model": made.name, "cohort": str(cohort.pk)}, owner)
    assert record.job.params["cohort"] == str(cohort.pk)


def test_the_cli_refuses_an_unknown_cohort_naming_the_field(study, subject):
    made = subject()
    with pytest.raises(CommandError, match="cohort: no cohort 999"):
        call_command("generate", "--study", study.name, "--model", made.name, "--cohort", "999")
    with pytest.raises(CommandError, match="cohort: no cohort 999"):
        call_command("interventions", "--study", study.name, "--model", made.name, "--cohort", "999")


def test_fidelity_originals_are_the_cohorts_problems(study, cohort):
    made = do_create_suite(study, "s", axes=["perturbation"], per_problem=1)
    originals, variants = run_items(made.suite, ["perturbation"])
    scoped, scoped_variants = run_items(made.suite, ["perturbation"], cohort=str(cohort.pk))
    apples = Problem.objects.get(study=study, problem_id="apples").pk
    assert apples in originals and len(originals) == 2
    assert scoped == [apples]
    assert set(scoped_variants) < set(variants) or not variants
