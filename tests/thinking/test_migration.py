"""annotation 0007 (+ faithfulness 0002): an old trace's thought text becomes thought steps 1..T, its answer
steps move to T+1.. with their labels, interventions follow their step, and back again without loss."""

from __future__ import annotations

import hashlib

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("annotation", "0005_trace_regime"), ("faithfulness", "0001_initial")]
AFTER = [("annotation", "0007_segment_thoughts"), ("faithfulness", "0002_intervention_steps_after_thought")]

THOUGHT = "Let me think.\n\nWait, 3 + 4 = 7.\n\n\nSo 7 * 2 = 14."


def _migrate(targets):
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    # The models of runs and subjects as the database has them (their newest migrations stay applied).
    loader = MigrationExecutor(connection).loader
    others = [leaf for leaf in loader.graph.leaf_nodes() if leaf[0] in ("runs", "subjects")]
    return loader.project_state(targets + others).apps


@pytest.fixture(autouse=True)
def latest_schema_afterwards():
    yield
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())


def _old_data(apps, study_pk: int, user_pk: int) -> dict[str, int]:
    Problem = apps.get_model("annotation", "Problem")
    Trace = apps.get_model("annotation", "Trace")
    Step = apps.get_model("annotation", "Step")
    StepLabel = apps.get_model("annotation", "StepLabel")
    problem = Problem.objects.create(study_id=study_pk, problem_id="p1", statement="3 + 4, doubled?")
    answer_texts = ["3 + 4 = 7", "7 * 2 = 14"]
    old_hash = hashlib.sha256("\x1e".join(answer_texts).encode()).hexdigest()
    with_thought = Trace.objects.create(
        study_id=study_pk, problem=problem, model="m", trace_id="t1", raw="3 + 4 = 7\n7 * 2 = 14",
        thought=THOUGHT, n_steps=2, steps_hash=old_hash,
    )
    plain = Trace.objects.create(study_id=study_pk, problem=problem, model="m", trace_id="t2",
                                 raw="3 + 4 = 7\n7 * 2 = 14", n_steps=2, steps_hash=old_hash)
    for trace in (with_thought, plain):
        for k, text in enumerate(answer_texts, start=1):
            step = Step.objects.create(trace=trace, index=k, text=text, start=10 * (k - 1), end=10 * (k - 1) + len(text))
            StepLabel.objects.create(step=step, kind="human", annotator_id=user_pk, verdict="valid" if k == 1 else "invalid")
    SubjectModel = apps.get_model("subjects", "SubjectModel")
    FaithfulnessRun = apps.get_model("faithfulness", "FaithfulnessRun")
    Intervention = apps.get_model("faithfulness", "Intervention")
    template = apps.get_model("subjects", "PromptTemplate").objects.create(study_id=study_pk, name="z", template="{q}")
    subject = SubjectModel.objects.create(study_id=study_pk, name="m", base_url="http://x/v1", model="m",
                                          prompt_template=template)
    job = apps.get_model("annotation", "Job").objects.create(study_id=study_pk, kind="faithfulness")
    run = apps.get_model("runs", "Run").objects.create(job=job, kind="faithfulness")
    record = FaithfulnessRun.objects.create(job=job, run=run, subject=subject, kind="interventions", mode="completions",
                                          config_version=1)
    Intervention.objects.create(frun=record, trace=with_thought, kind="value_flip", step=2, why="w")
    Intervention.objects.create(frun=record, trace=with_thought, kind="value_flip", step=1, why="w")
    Intervention.objects.create(frun=record, trace=plain, kind="value_flip", step=2, why="w")
    return {"thought": with_thought.pk, "plain": plain.pk, "old_hash": old_hash}


def _steps(apps, pk: int) -> list[tuple]:
    Step = apps.get_model("annotation", "Step")
    return [
        (s.index, s.channel, s.text, s.start, s.end, sorted(s.labels.values_list("verdict", flat=True)))
        for s in Step.objects.filter(trace_id=pk).order_by("index")
    ]


def test_old_thoughts_become_thought_steps_and_back(study, owner):
    ids = _old_data(_migrate(BEFORE), study.pk, owner.pk)
    new = _migrate(AFTER)
    assert _steps(new, ids["thought"]) == [
        (1, "thought", "Let me think.", 0, 13, []),
        (2, "thought", "Wait, 3 + 4 = 7.", 15, 31, []),
        (3, "thought", "So 7 * 2 = 14.", 34, 48, []),
        (4, "answer", "3 + 4 = 7", 0, 9, ["valid"]),
        (5, "answer", "7 * 2 = 14", 10, 20, ["invalid"]),
    ]
    Trace = new.get_model("annotation", "Trace")
    t = Trace.objects.get(pk=ids["thought"])
    for _, channel, text, start, end, _ in _steps(new, ids["thought"]):
        assert (t.thought if channel == "thought" else t.raw)[start:end] == text
    assert (t.n_steps, t.n_thought_steps, t.empty, t.thought) == (5, 3, False, THOUGHT)
    assert t.meta["thought"]["form"] == "migrated"
    assert t.steps_hash != ids["old_hash"]
    plain = Trace.objects.get(pk=ids["plain"])
    assert (plain.n_steps, plain.n_thought_steps, plain.steps_hash) == (2, 0, ids["old_hash"])
    assert [s[:3] for s in _steps(new, ids["plain"])] == [(1, "answer", "3 + 4 = 7"), (2, "answer", "7 * 2 = 14")]
    Intervention = new.get_model("faithfulness", "Intervention")
    assert sorted(Intervention.objects.filter(trace_id=ids["thought"]).values_list("step", flat=True)) == [4, 5]
    assert list(Intervention.objects.filter(trace_id=ids["plain"]).values_list("step", flat=True)) == [2]

    # A label put on a thought step after the migration goes with the step when migrating back.
    thought_step = new.get_model("annotation", "Step").objects.get(trace_id=ids["thought"], index=2)
    label = new.get_model("annotation", "StepLabel").objects.create(step=thought_step, kind="human",
                                                                     annotator_id=owner.pk, verdict="valid")
    new.get_model("annotation", "LabelHistory").objects.create(step=thought_step, label=label, kind="human",
                                                              source_name="olivia")

    old = _migrate(BEFORE)
    Step = old.get_model("annotation", "Step")
    rows = [(s.index, s.text, s.labels.get().verdict) for s in Step.objects.filter(trace_id=ids["thought"]).order_by("index")]
    assert rows == [(1, "3 + 4 = 7", "valid"), (2, "7 * 2 = 14", "invalid")]
    t = old.get_model("annotation", "Trace").objects.get(pk=ids["thought"])
    assert (t.n_steps, t.steps_hash, t.thought) == (2, ids["old_hash"], THOUGHT)
    assert old.get_model("annotation", "LabelHistory").objects.count() == 0
    Intervention = old.get_model("faithfulness", "Intervention")
    assert sorted(Intervention.objects.filter(trace_id=ids["thought"]).values_list("step", flat=True)) == [1, 2]
