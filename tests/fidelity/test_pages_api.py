"""The fidelity pages, REST endpoints and export: members see, outsiders get 404, trace text is escaped."""

from __future__ import annotations

import json

import pytest
from django.core.management import call_command

from fidelity.models import FidelityRun, Output
from fidelity.report import report
from fidelity.running import do_start_run, run_inline
from fidelity.suites import do_create_suite

pytestmark = pytest.mark.django_db
ALL = ["perturbation", "counterfactual", "backward"]


@pytest.fixture
def finished(problems, subject):
    study = problems(2)
    suite = do_create_suite(study, "s", axes=ALL).suite
    record = do_start_run(suite, subject, axes=ALL, queue=False)
    run_inline(record)
    return record


def test_the_report_page_shows_the_four_axes_and_the_ranked_table(client, owner, finished):
    client.force_login(owner)
    page = client.get(f"/fidelity/runs/{finished.pk}/").content.decode()
    assert "Four-axis summary" in page and "Token Shuffle" in page and "Difficulty" in page
    assert 'data-chart="chart-fp"' in page and "tfidf-cosine" in page
    listing = client.get(f"/studies/{finished.suite.study_id}/fidelity/").content.decode()
    assert "Models side by side" in listing and f"run {finished.pk}" in listing
    # Every abbreviated column is spelled out: a title on the header and a legend under the table.
    for abbr, words in (("CP", "change propagation"), ("RA", "reasoning adaptation"), ("AA", "answer adjustment"),
                        ("SC", "step consistency"), ("T̂", "transitivity"), ("Halluc.", "hallucination")):
        assert f'">{abbr}</abbr>' in listing and f"<strong>{abbr}</strong> {words}" in listing, abbr
    assert '<abbr title="Change Propagation' in page


def test_the_item_view_escapes_trace_text_and_highlights_changed_numbers(client, member, finished):
    p0 = finished.suite.study.problems.get(problem_id="p0")
    out = Output.objects.filter(fid_run=finished, role="forward", problem__fidelity_variant__strategy="multiplier",
                                problem__fidelity_variant__original=p0).get()
    Output.objects.filter(pk=out.pk).update(text=out.text + "\n<script>alert(1)</script>")
    client.force_login(member)
    page = client.get(f"/fidelity/runs/{finished.pk}/items/{p0.pk}/").content.decode()
    assert "<script>alert(1)</script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "<mark>" in page and "review trace" in page


def test_an_outsider_sees_nothing(client, outsider, finished):
    client.force_login(outsider)
    assert client.get(f"/fidelity/runs/{finished.pk}/").status_code == 404
    assert client.get(f"/api/v1/fidelity-runs/{finished.pk}/").status_code == 404
    assert client.get(f"/api/v1/studies/{finished.suite.study_id}/fidelity-runs/").status_code == 404


def test_the_api_gives_the_report_and_the_rows(client, member, finished):
    client.force_login(member)
    data = client.get(f"/api/v1/fidelity-runs/{finished.pk}/").json()
    assert data["summary"]["golds_derived"] == 6 and len(data["perturbation"]) == 5
    assert data["counterfactual"]["overall"]["n"] == 6
    rows = client.get(f"/api/v1/fidelity-runs/{finished.pk}/items/").json()
    assert sum(r["role"] == "original" for r in rows) == 3  # p0, p1 and the wordless problem


def test_the_api_refuses_bad_input_with_the_field(client, owner, member, finished):
    client.force_login(member)
    url = f"/api/v1/studies/{finished.suite.study_id}/fidelity-runs/"
    assert client.post(url, {"model": "tiny"}, content_type="application/json").status_code == 403
    client.force_login(owner)
    r = client.post(url, {"model": "tiny", "problems": "first:zero"}, content_type="application/json")
    assert r.status_code == 400 and r.json()["errors"][0]["field"] == "problems"
    r = client.post(url, {"model": "nope"}, content_type="application/json")
    assert r.status_code == 400 and r.json()["errors"][0]["field"] == "model"
    r = client.post(url, {"model": "tiny", "axes": "up"}, content_type="application/json")
    assert r.status_code == 400 and r.json()["errors"][0]["field"] == "axes"


def test_the_export_writes_rows_and_a_manifest(finished, tmp_path):
    out = tmp_path / "f.csv"
    call_command("export", "--study", finished.suite.study.name, "--what", "fidelity", "--model", "tiny",
                 "--format", "csv", "--out", str(out))
    text = out.read_text()
    assert text.splitlines()[0].startswith("run,suite,subject_model")
    manifest = json.loads((tmp_path / "f.csv.manifest.json").read_text())
    prov = manifest["fidelity"]["provenance"]
    assert prov["suite_seed"] == 0 and prov["generator_version"] and prov["code_version"]
    assert manifest["counts"]["originals"] == 3
    pq = tmp_path / "f.parquet"
    call_command("export", "--study", finished.suite.study.name, "--what", "fidelity", "--format", "parquet",
                 "--out", str(pq))
    import pandas as pd
    from_csv, from_parquet = pd.read_csv(out), pd.read_parquet(pq)
    assert len(from_csv) == len(from_parquet) == 3 + finished.suite.variants.count()
    assert set(from_parquet["role"]) == {"original", "variant"}
    assert FidelityRun.objects.count() == 1


def test_the_api_run_list_is_a_fixed_number_of_queries(client, member, finished, subject, django_assert_max_num_queries):
    for _ in range(3):  # more runs must not mean more queries
        run_inline(do_start_run(finished.suite, subject, axes=["perturbation"], queue=False))
    client.force_login(member)
    with django_assert_max_num_queries(8):
        rows = client.get(f"/api/v1/studies/{finished.suite.study_id}/fidelity-runs/").json()
    assert len(rows) == 4


def test_without_a_run_the_export_gives_the_imported_traces_metrics(study, do_import, tmp_path):
    from tests.conftest import jsonl
    do_import(jsonl({"kind": "problem", "problem_id": "q", "statement": "Tom has 3 apples and buys 2. How many?",
                     "gold_answer": "5", "skeleton": [{"text": "Tom has 3 + 2 = 5 apples.", "check": "3+2=5"}]},
                    {"kind": "trace", "problem_id": "q", "model": "imp", "raw": "Tom has 3 + 2 = 5 apples.\nAnswer: 5"}))
    out = tmp_path / "f.jsonl"
    call_command("export", "--study", study.name, "--what", "fidelity", "--out", str(out))
    row = json.loads(out.read_text().splitlines()[0])
    assert row["role"] == "imported" and row["em"] == 1 and row["step_sim"] == 1.0 and row["consistency"] is None


def test_the_reports_table_1_and_table_2_download_with_the_pages_numbers(client, member, finished):
    # Issue 23 item 10: each table the page shows is downloadable as CSV and Parquet.
    import io

    import pandas as pd

    client.force_login(member)
    page = client.get(f"/fidelity/runs/{finished.pk}/").content.decode()
    study = finished.suite.study_id
    for what in ("fidelity-table1", "fidelity-table2"):
        assert f"what={what}&amp;run={finished.pk}&amp;format=csv" in page
    rep = report(finished)
    base = f"/studies/{study}/analytics/export/?run={finished.pk}&what="
    t1 = pd.read_csv(io.StringIO(client.get(base + "fidelity-table1&format=csv").content.decode()))
    assert t1["strategy"].tolist() == [r.strategy for r in rep.perturbation]
    assert t1["robustness"].tolist() == pytest.approx([r.robustness for r in rep.perturbation])
    t2 = pd.read_parquet(io.BytesIO(client.get(base + "fidelity-table2&format=parquet").content))
    overall = t2.loc[t2["grouping"] == "all"].iloc[0]
    assert overall["n"] == rep.counterfactual.overall.n
    assert overall["cp_value"] == pytest.approx(rep.counterfactual.overall.cp_value)
    assert set(t2["grouping"]) == {"all", "strategy", "magnitude", "complexity"}
