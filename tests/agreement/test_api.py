"""Agreement API: the field names of docs/agreement.md exactly, hand-computed
values, "not defined" with reasons, permissions (anonymous, outsider,
blind annotator), errors and constant query counts."""

from __future__ import annotations

import pytest

from annotation.models import Study
from tests.agreement.conftest import INTERFACE_FIELDS, judge_labels, labels_of, problem, trace
from tests.conftest import api, jsonl

pytestmark = pytest.mark.django_db


def urls(study) -> list[str]:
    return [f"/api/v1/studies/{study.pk}/agreement/?candidate=judge:gpt",
            f"/api/v1/studies/{study.pk}/agreement/disagreements/?candidate=judge:gpt",
            f"/api/v1/studies/{study.pk}/agreement/annotators/",
            f"/api/v1/studies/{study.pk}/calibrations/"]


def test_the_agreement_object_has_the_documented_fields_and_values(worked, owner):
    r = api(owner).get(f"/api/v1/studies/{worked.pk}/agreement/?reference=human&candidate=judge:gpt&profile=default")
    assert r.status_code == 200
    m = r.json()
    missing = [f for f in INTERFACE_FIELDS if f not in m]
    assert not missing
    assert m["steps_compared"] == 10 and m["percent_agreement"] == pytest.approx(0.7)
    assert m["kappa"] == pytest.approx(0.4915, abs=1e-4) and m["kappa_binary"] == pytest.approx(0.5238, abs=1e-4)
    assert set(m["confusion"]) == {"valid", "invalid", "neutral"} and m["confusion"]["neutral"]["valid"] == 1
    assert (m["traces_compared"], m["first_error_exact"], m["first_error_within_1"]) == (2, 0.5, 0.5)
    assert (m["pb_error_acc"], m["pb_correct_acc"], m["pb_f1"]) == (1.0, 0.0, 0.0)
    # degenerate: two traces -- the correlations are null and say why
    assert m["pearson_r"] is None and m["pearson_ci"] is None and m["spearman_rho"] is None
    assert m["undefined"]["pearson_r"] == "fewer than 3 paired values (n = 2)"
    assert (m["reference"], m["candidate"], m["profile"], m["profile_version"], m["seed"]) == (
        "human", "judge:gpt", "default", 1, 0)
    assert m["html_url"].startswith("http://testserver/studies/") and "candidate=judge%3Agpt" in m["html_url"]


def test_intervals_are_pairs_in_order(scored_pairs, owner):
    m = api(owner).get(f"/api/v1/studies/{scored_pairs.pk}/agreement/?candidate=judge:gpt&profile=no-hazard").json()
    assert m["pearson_r"] == pytest.approx(7 / 11) and m["spearman_rho"] == pytest.approx(0.5)
    for key in ("pearson_ci", "spearman_ci", "percent_agreement_ci", "kappa_ci"):
        lo, hi = m[key]
        assert lo <= hi


def test_defaults_are_human_against_the_primary_judge(worked, owner):
    judge = worked.judges.get(name="gpt")
    Study.objects.filter(pk=worked.pk).update(primary_judge=judge)
    m = api(owner).get(f"/api/v1/studies/{worked.pk}/agreement/").json()
    assert (m["reference"], m["candidate"]) == ("human", "judge:gpt")


def test_bad_parameters_answer_400_with_the_field(worked, owner):
    r = api(owner).get(f"/api/v1/studies/{worked.pk}/agreement/?candidate=judge:nope")
    assert r.status_code == 400
    assert r.json()["errors"] == [{"field": "candidate", "message": "no judge named 'nope' in this study"}]
    r = api(owner).get(f"/api/v1/studies/{worked.pk}/agreement/?candidate=judge:gpt&profile=nope")
    assert r.status_code == 400 and r.json()["errors"][0]["field"] == "profile"
    r = api(owner).get(f"/api/v1/studies/{worked.pk}/agreement/?candidate=judge:gpt&calibration=99")
    assert r.status_code == 400 and r.json()["errors"][0]["field"] == "calibration"


def test_permissions(worked, owner, member, outsider, adjudicator):
    for url in urls(worked):
        assert api().get(url).status_code == 401
        r = api(outsider).get(url)
        assert r.status_code == 404 and set(r.json()) == {"detail", "errors"}
        # the study is blind: an annotator sees no agreement (it lists every source's verdicts)
        r = api(member).get(url)
        assert r.status_code == 403 and "blind" in r.json()["detail"]
        assert api(adjudicator).get(url).status_code == 200
        assert api(owner).get(url).status_code == 200
    Study.objects.filter(pk=worked.pk).update(blind=False)
    for url in urls(worked):
        assert api(member).get(url).status_code == 200


def test_disagreements_link_to_the_review_page(worked, owner):
    r = api(owner).get(f"/api/v1/studies/{worked.pk}/agreement/disagreements/?candidate=judge:gpt").json()
    assert r["count"] == 3
    rows = [(d["trace_id"], d["step"], d["reference_verdict"], d["candidate_verdict"]) for d in r["results"]]
    assert rows == [("tA", 5, "valid", "invalid"), ("tB", 3, "invalid", "valid"), ("tB", 5, "neutral", "valid")]
    assert r["results"][0]["confidence"] == 0.91
    assert r["results"][0]["html_url"].startswith("http://testserver/traces/")


def _grow(study, do_import, start: int, n: int) -> None:
    records = [problem(f"g{start}")]
    for i in range(start, start + n):
        records.append(trace(f"g{i}", f"g{start}", f"m{i % 3}", 3, labels=labels_of("ann1", "VEV")))
    do_import(jsonl(*records))
    judge_labels(study, "gpt", {f"g{i}": "VVE" for i in range(start, start + n)})


@pytest.mark.parametrize("which", range(4))
def test_api_lists_use_a_constant_number_of_queries(study, do_import, owner, django_assert_max_num_queries, which):
    from agreement import calibration

    _grow(study, do_import, 0, 3)
    calibration.do_create_calibration(study, name="c0", reference="human", candidates=["judge:gpt"], size=3)
    url = urls(study)[which]
    client = api(owner)
    with django_assert_max_num_queries(60) as small:
        assert client.get(url).status_code == 200
    _grow(study, do_import, 10, 40)
    for i in range(1, 4):
        calibration.do_create_calibration(study, name=f"c{i}", reference="human", candidates=["judge:gpt"], size=30)
    with django_assert_max_num_queries(len(small.captured_queries)):
        assert client.get(url).status_code == 200
