"""judges 0007: max_tokens becomes optional (null = derived per trace). Rows
holding the old form default (2,048) become null with a new version; chosen
values stay; the mechanistic judge becomes null without a new version; and
back again."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("judges", "0006_drop_moved_engine_fields")]
AFTER = [("judges", "0007_max_tokens_derived")]


def _migrate(targets):
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    return MigrationExecutor(connection).loader.project_state(targets).apps


@pytest.fixture(autouse=True)
def latest_schema_afterwards():
    yield
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())


def test_the_old_default_becomes_derived_and_chosen_values_stay(study):
    old = _migrate(BEFORE)
    JudgeConfig = old.get_model("judges", "JudgeConfig")
    JudgeConfig.objects.filter(study_id=study.pk).update(max_tokens=2048)  # the mechanistic judge, as before
    defaulted = JudgeConfig.objects.create(study_id=study.pk, name="a", provider="llm", max_tokens=2048, version=3)
    chosen = JudgeConfig.objects.create(study_id=study.pk, name="b", provider="llm", max_tokens=300, version=2)
    new = _migrate(AFTER)
    rows = {j.name: (j.max_tokens, j.version) for j in new.get_model("judges", "JudgeConfig").objects.all()}
    assert rows == {"mechanistic": (None, 1), "a": (None, 4), "b": (300, 2)}
    back = _migrate(BEFORE)
    rows = {j.name: j.max_tokens for j in back.get_model("judges", "JudgeConfig").objects.all()}
    assert rows == {"mechanistic": 2048, defaulted.name: 2048, chosen.name: 300}
