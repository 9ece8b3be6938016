"""Calibration studies moved from scoring to agreement without losing a row.

Migrates the test database back to the schema of main before the move
(scoring's last migration then, 0003_calibration), writes real rows through
the historical models of that schema, migrates forward and reads the rows
back through the agreement app's models. Runs on SQLite by default and on
PostgreSQL with DATABASE_URL set.
"""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

# The whole schema of main before the move: annotation's later migrations
# (a Trace column) would otherwise stay applied under old historical models.
BEFORE_THE_MOVE = [("scoring", "0003_calibration"), ("annotation", "0003_review_workflow")]


def _migrate(targets):
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    if targets is None:
        targets = executor.loader.graph.leaf_nodes()
    executor.migrate(targets)
    executor.loader.build_graph()
    return executor.loader.project_state(targets).apps


def _old_rows(apps) -> dict:
    User = apps.get_model("auth", "User")
    Study = apps.get_model("annotation", "Study")
    Problem = apps.get_model("annotation", "Problem")
    Trace = apps.get_model("annotation", "Trace")
    CalibrationStudy = apps.get_model("scoring", "CalibrationStudy")
    CalibrationTrace = apps.get_model("scoring", "CalibrationTrace")

    user = User.objects.create(username="owner-before-the-move")
    study = Study.objects.create(name="study before the move")
    problem = Problem.objects.create(study=study, problem_id="p1", statement="2+2?")
    traces = [Trace.objects.create(study=study, problem=problem, model=f"m{i % 2}", trace_id=f"t{i}",
                                   steps_hash=f"{i:064d}") for i in range(4)]
    pilot = CalibrationStudy.objects.create(
        study=study, name="pilot", reference="human", candidates=["judge:gpt", "judge:mech"], profile_name="default",
        seed=7, sample_size=4, allocation="proportional", filters={"models": ["m0", "m1"], "domain": "math"},
        validation_fraction=0.25, note="kept across the move", created_by=user,
    )
    other = CalibrationStudy.objects.create(study=study, name="second", sample_size=2)
    for pos, t in enumerate(traces):
        CalibrationTrace.objects.create(calibration=pilot, trace=t, stratum=f"{t.model} / right", position=pos)
    CalibrationTrace.objects.create(calibration=other, trace=traces[0], stratum="m0 / wrong", position=0)
    return {"study": study.pk, "user": user.pk, "pilot": pilot.pk, "other": other.pk, "traces": [t.pk for t in traces]}


@pytest.mark.django_db(transaction=True)
def test_calibration_rows_survive_the_move_to_the_agreement_app():
    try:
        old_apps = _migrate(BEFORE_THE_MOVE)
        with pytest.raises(LookupError):
            old_apps.get_model("agreement", "CalibrationStudy")  # really the old schema
        ids = _old_rows(old_apps)
        new_apps = _migrate(None)
    finally:
        _migrate(None)  # leave the database as every other test expects it

    from agreement.models import CalibrationStudy, CalibrationTrace

    with pytest.raises(LookupError):
        new_apps.get_model("scoring", "CalibrationStudy")
    assert CalibrationStudy._meta.db_table in connection.introspection.table_names()
    assert "scoring_calibrationstudy" not in connection.introspection.table_names()

    pilot = CalibrationStudy.objects.get(pk=ids["pilot"])
    assert (pilot.study_id, pilot.name, pilot.reference, pilot.candidates) == (
        ids["study"], "pilot", "human", ["judge:gpt", "judge:mech"])
    assert (pilot.profile_name, pilot.seed, pilot.sample_size, pilot.allocation) == ("default", 7, 4, "proportional")
    assert pilot.filters == {"models": ["m0", "m1"], "domain": "math"}
    assert (pilot.validation_fraction, pilot.note, pilot.created_by_id) == (0.25, "kept across the move", ids["user"])
    assert list(pilot.items.values_list("trace_id", "stratum", "position")) == [
        (pk, f"m{i % 2} / right", i) for i, pk in enumerate(ids["traces"])]
    assert CalibrationTrace.objects.filter(calibration_id=ids["other"]).count() == 1
    assert list(pilot.study.calibrations.order_by("name").values_list("name", flat=True)) == ["pilot", "second"]

    # The moved tables keep working: new rows get fresh ids (the sequences
    # followed the rename), the constraints still hold, deletes cascade.
    extra = CalibrationStudy.objects.create(study_id=ids["study"], name="after the move", sample_size=1)
    assert extra.pk > ids["other"]
    from django.db import IntegrityError, transaction

    with pytest.raises(IntegrityError), transaction.atomic():
        CalibrationTrace.objects.create(calibration=pilot, trace_id=ids["traces"][0], stratum="dup", position=9)
    pilot.delete()
    assert not CalibrationTrace.objects.filter(calibration_id=ids["pilot"]).exists()
