"""search 0007: the one answer a sampled trace had becomes its author's own ScanAnswer (the command line's
when it had no author); a sampled trace nobody answered keeps no answer."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("search", "0006_pg_filter_indexes")]
AFTER = [("search", "0007_scan_answers_per_person")]


def _migrate(targets):
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    return executor.loader.project_state(targets).apps


@pytest.fixture(autouse=True)
def latest_schema_afterwards():
    yield
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())


def test_each_old_answer_becomes_its_authors_own():
    apps = _migrate(BEFORE)
    User = apps.get_model("auth", "User")
    Study, Problem, Trace = (apps.get_model("annotation", n) for n in ("Study", "Problem", "Trace"))
    JudgeConfig = apps.get_model("judges", "JudgeConfig")
    Scanner, ScanLabel = apps.get_model("search", "Scanner"), apps.get_model("search", "ScanLabel")
    alice = User.objects.create(username="alice")
    study = Study.objects.create(name="s")
    problem = Problem.objects.create(study=study, problem_id="p", statement="s", gold_answer="1")
    traces = [Trace.objects.create(study=study, problem=problem, trace_id=f"t{i}", model="m") for i in range(3)]
    judge = JudgeConfig.objects.create(study=study, name="gpt")
    scanner = Scanner.objects.create(study=study, name="w", question="Does it wait?", judge=judge)
    ScanLabel.objects.create(scanner=scanner, trace=traces[0], split="dev", answer=True, annotator=alice)
    ScanLabel.objects.create(scanner=scanner, trace=traces[1], split="test", answer=False)  # the command line's
    ScanLabel.objects.create(scanner=scanner, trace=traces[2], split="test")  # drawn, not answered

    apps = _migrate(AFTER)
    ScanAnswer = apps.get_model("search", "ScanAnswer")
    got = sorted((a.label.trace.trace_id, a.annotator_id, a.answer)
                 for a in ScanAnswer.objects.select_related("label__trace"))
    assert got == [("t0", alice.pk, True), ("t1", None, False)]
    assert apps.get_model("search", "ScanLabel").objects.count() == 3
