"""A calibration sample can be drawn among the traces the reference has labelled completely (issue 31: a
sample of 40 drew 0 of the 40 human-labelled traces). The pool: 12 traces of 2 steps, human labels on both
steps of t00..t05 only."""

from __future__ import annotations

import pytest
from django.test import Client

from agreement import calibration
from agreement.models import CalibrationStudy
from annotation.models import StepLabel
from tests.agreement.test_calibration import pool  # noqa: F401 - fixture

pytestmark = pytest.mark.django_db

LABELLED = {f"t{i:02d}" for i in range(6)}


def test_only_completely_labelled_traces_are_drawn(pool, owner):  # noqa: F811
    cal = calibration.do_create_calibration(pool, name="labelled", reference="human", candidates=["judge:gpt"],
                                            size=6, seed=3, reference_complete=True, user=owner)
    assert {i.trace.trace_id for i in cal.items.select_related("trace")} == LABELLED
    assert cal.filters["reference_complete"] is True
    with pytest.raises(calibration.CalibrationError, match="size: asked for 7 traces, but only 6"):
        calibration.do_create_calibration(pool, name="more", reference="human", candidates=["judge:gpt"], size=7,
                                          reference_complete=True)
    StepLabel.objects.filter(step__trace__model="m1", kind=StepLabel.Kind.HUMAN).delete()
    with pytest.raises(calibration.CalibrationError, match="reference_complete: no trace that matches the filters "
                                                           "has complete labels from human"):
        calibration.do_create_calibration(pool, name="none", reference="human", candidates=["judge:gpt"],
                                          size=2, models=["m1"], reference_complete=True)


def test_the_form_offers_it(pool, owner):  # noqa: F811
    web = Client()
    web.force_login(owner)
    url = f"/studies/{pool.pk}/calibration/"
    assert "Only traces the reference labelled completely" in web.get(url).content.decode()
    r = web.post(url, {"name": "from the page", "reference": "human", "candidates": ["judge:gpt"], "size": "4",
                       "allocation": "equal", "seed": "0", "validation_fraction": "0.5", "reference_complete": "on"})
    assert r.status_code == 302, r.content.decode()[:2000]
    cal = CalibrationStudy.objects.get(name="from the page")
    assert {i.trace.trace_id for i in cal.items.select_related("trace")} <= LABELLED
