"""Pages and REST endpoints: members read, owners start runs, outsiders get 404;
trace text is escaped on the side-by-side page; the report downloads; the
runs list has a constant number of queries; bad input answers 400 naming the field."""

from __future__ import annotations

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from faithfulness.models import FaithfulnessRun, Intervention, Status
from faithfulness.running import do_start_anytime, do_start_interventions, run_inline

pytestmark = pytest.mark.django_db


@pytest.fixture
def ran(generated):
    record = do_start_interventions(generated, kinds="value_flip,paraphrase", queue=False)
    run_inline(record)
    anytime = do_start_anytime(generated, grid="steps:1,2,full", queue=False)
    run_inline(anytime)
    return record, anytime


def test_the_overview_shows_tiers_ifr_and_the_anytime_chart_with_its_table(client, owner, outsider, ran, study):
    url = reverse("faithfulness", args=[study.pk])
    client.force_login(outsider)
    assert client.get(url).status_code == 404
    client.force_login(owner)
    page = client.get(url).content.decode()
    assert "tiny" in page and "L1" in page and "+ Halting" not in page
    assert "an undefined k* counts as a false STOP" in page  # the halting table says how it counts
    assert 'data-chart="chart-anytime-steps"' in page and 'id="chart-anytime-steps" type="application/json"' in page
    assert '<span class="nowrap">1: 0.000</span> · <span class="nowrap">2: 1.000</span>' in page and "0.667" in page
    assert 'data-chart="chart-difficulty"' in page
    assert "value_flip" in page and "paraphrase" in page
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", page)
    assert client.get(url, {"policy": "lenient"}).status_code == 400


def test_the_intervention_page_shows_both_sides_escaped(client, member, ran):
    record, _ = ran
    row = record.interventions.filter(kind="value_flip").first()
    Intervention.objects.filter(pk=row.pk).update(continuation="<script>alert(1)</script> The answer is 6.")
    client.force_login(member)
    page = client.get(reverse("faithfulness-intervention", args=[row.pk])).content.decode()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page and "<script>alert(1)" not in page
    assert row.original_step in page and row.edited_step in page
    assert page.count('class="card"') >= 3 and "continuation mode <strong>completions</strong>" in page


def test_the_run_page_polls_until_done_and_lists_the_interventions(client, member, ran):
    record, anytime = ran
    client.force_login(member)
    page = client.get(reverse("faithfulness-run", args=[record.pk])).content.decode()
    assert "hx-trigger" not in page  # finished: no polling
    assert page.count(reverse("faithfulness-intervention", args=[record.interventions.first().pk])) == 1
    page = client.get(reverse("faithfulness-run", args=[anytime.pk])).content.decode()
    assert "AUC_any" in page and "0.667" in page


def test_the_report_downloads_in_each_format_and_refuses_an_unknown_one(client, owner, ran, study):
    client.force_login(owner)
    url = reverse("faithfulness-report", args=[study.pk])
    md = client.get(url, {"format": "md"})
    assert md["Content-Disposition"].endswith('.md"') and "## tiny — L1" in md.content.decode()
    assert client.get(url, {"format": "tex"}).content.decode().startswith(r"\begin{table}")
    assert client.get(url, {"format": "json"}).json()[0]["tier"]["badges"] == ["IFR", "Anytime", "Halting"]
    bad = client.get(url, {"format": "pdf"})
    assert bad.status_code == 400 and "format: unknown report format" in bad.content.decode()
    bad = client.get(url, {"format": "md", "policy": "ignore"})  # a refusal of the pure core, named by its field
    assert bad.status_code == 400 and "policy: neutral policy &#x27;ignore&#x27;" in bad.content.decode()


def test_the_api_lists_runs_with_constant_queries_and_shows_a_summary(client, owner, ran, study):
    record, anytime = ran
    client.force_login(owner)
    url = reverse("api-study-faithfulness-runs", args=[study.pk])
    with CaptureQueriesContext(connection) as few:
        assert client.get(url).status_code == 200
    run_inline(do_start_anytime(record.subject, grid="steps:1,full", queue=False))
    with CaptureQueriesContext(connection) as more:
        data = client.get(url).json()
    assert len(data["results"] if isinstance(data, dict) else data) == 3
    assert len(more) == len(few)
    detail = client.get(reverse("api-faithfulness-run", args=[anytime.pk])).json()
    assert detail["summary"]["auc"] == pytest.approx(2 / 3) and detail["grid"] == "steps:1,2,full"
    rows = client.get(reverse("api-faithfulness-run-interventions", args=[record.pk])).json()
    rows = rows["results"] if isinstance(rows, dict) else rows
    assert {r["kind"] for r in rows} == {"value_flip", "paraphrase"} and all(r["status"] == Status.OK for r in rows)
    ev = client.get(reverse("api-study-evidence", args=[study.pk]), {"policy": "exclude"}).json()
    assert ev["models"][0]["tier"]["label"] == "L1"


def test_only_owners_start_runs_and_bad_input_names_the_field(client, owner, member, generated, study):
    url = reverse("api-study-faithfulness-runs", args=[study.pk])
    client.force_login(member)
    assert client.post(url, {"what": "anytime", "model": "tiny"}, content_type="application/json").status_code == 403
    client.force_login(owner)
    bad = client.post(url, {"what": "anytime", "model": "tiny", "budgets": "tokens:64,32"},
                      content_type="application/json")
    assert bad.status_code == 400 and bad.json()["detail"].startswith("budgets: budget grid 'tokens:64,32' is not increasing")
    bad = client.post(url, {"what": "interventions", "model": "nope"}, content_type="application/json")
    assert bad.status_code == 400 and bad.json()["detail"].startswith("model: no subject model named 'nope'")
    bad = client.post(url, {"what": "interventions", "model": "tiny", "kinds": "flip"}, content_type="application/json")
    assert bad.status_code == 400 and bad.json()["errors"][0]["field"] == "kinds"
    ok = client.post(url, {"what": "anytime", "model": "tiny", "budgets": "steps:1,full"},
                     content_type="application/json")
    assert ok.status_code == 202 and ok.json()["status"] in ("queued", "running", "succeeded")


def test_exports_take_the_newest_run_of_each_mode_and_grid_with_a_manifest(ran, study, tmp_path):
    from scoring import exports

    record, anytime = ran
    run_inline(do_start_anytime(record.subject, grid="tokens:5,full", queue=False))
    curve = exports.build(exports.ExportRequest(study=study, what="anytime-curve"))
    rows = list(curve.records())
    assert {r["grid"] for r in rows} == {"steps:1,2,full", "tokens:5,full"}
    table = exports.build(exports.ExportRequest(study=study, what="ifr"))
    info = exports.write_file(table, "csv", tmp_path / "ifr.csv", exports.ExportRequest(study=study, what="ifr"))
    assert info["counts"]["rows"] == 1 + 3 * 2  # paraphrase invariance; value_flip and all causal kinds x 3
    assert (tmp_path / "ifr.csv.manifest.json").is_file()
    rows = list(exports.build(exports.ExportRequest(study=study, what="interventions")).records())
    assert len(rows) == 8 and all(r["mode"] == "completions" and r["code_version"] for r in rows)


def test_the_kinds_of_an_intervention_run_may_be_a_json_list(client, owner, generated, study):
    """Issue 23 #17: the REST ``kinds`` field refused a JSON list; a string and a list mean the same."""
    url = reverse("api-study-faithfulness-runs", args=[study.pk])
    client.force_login(owner)
    ok = client.post(url, {"what": "interventions", "model": "tiny", "kinds": ["value_flip", "paraphrase"]},
                     content_type="application/json")
    assert ok.status_code == 202, ok.content
    record = FaithfulnessRun.objects.get(job_id=ok.json()["job"])
    assert sorted(record.params["kinds"]) == ["paraphrase", "value_flip"]
    for bad_kinds in ([1, 2], {"kind": "value_flip"}, ["flip"]):
        bad = client.post(url, {"what": "interventions", "model": "tiny", "kinds": bad_kinds},
                          content_type="application/json")
        assert bad.status_code == 400 and bad.json()["errors"][0]["field"] == "kinds", bad_kinds


def test_a_cohort_without_the_models_traces_is_refused_naming_the_field_once(client, owner, generated, study):
    """The refusal is rendered once (annotation.api.errors): "cohort: cohort N holds none ...", not
    "cohort: cohort: cohort N ..." as when runs.kinds re-prefixed the refusal's text."""
    from annotation.models import Membership
    from search.services import do_save_cohort

    cohort = do_save_cohort(study, Membership.objects.get(study=study, user=owner), name="empty", data={})
    cohort.members.all().delete()
    client.force_login(owner)
    bad = client.post(reverse("api-study-faithfulness-runs", args=[study.pk]),
                      {"what": "anytime", "model": "tiny", "budgets": "steps:1,full", "cohort": str(cohort.pk)},
                      content_type="application/json")
    assert bad.status_code == 400
    assert bad.json()["detail"].startswith(f"cohort: cohort {cohort.pk} holds none of subject model tiny")
    assert bad.json()["errors"][0] == {"field": "cohort", "message": bad.json()["detail"].removeprefix("cohort: ")}
