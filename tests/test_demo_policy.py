"""The demo under an address policy that keeps model calls off loopback (the production default): its
stand-in model is not run -- the demo says so and never widens the policy -- and the rest of the demo stands."""

from __future__ import annotations

import pytest

from demo import research
from subjects.models import SubjectModel

pytestmark = pytest.mark.django_db


def test_the_stand_in_is_not_run_where_the_policy_refuses_loopback(settings, study):
    settings.MODEL_NETWORKS = ()
    said: list[str] = []
    research.run_stand_in(study, said.append)
    assert said == ["stand-in: not run -- the address policy (REASONAUDIT_MODEL_NETWORKS) allows no loopback "
                    "model server; Fidelity and Evidence stay empty"]
    assert not SubjectModel.objects.filter(study=study).exists()
