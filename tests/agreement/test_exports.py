"""Label, agreement and PRM exports: round trips through a fresh study,
the manifest (sidecar and job result), every format, CSV cells that cannot
run, export jobs through the API and the web, and who may download what."""

from __future__ import annotations

import csv
import io
import json
from collections import defaultdict

import pyarrow.parquet as pq
import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from annotation import services as annotation_services
from annotation.models import Job, StepLabel, Study
from scoring import exports
from tests.agreement.conftest import judge_labels, labels_of, problem, trace
from tests.conftest import api, jsonl

pytestmark = pytest.mark.django_db
LABEL_FIELDS = ["trace_id", "step", "source", "annotator", "verdict", "skeleton_refs", "confidence", "reason"]


def run(**opts) -> str:
    out = io.StringIO()
    call_command("export", study="Study A", stdout=out, stderr=io.StringIO(), **opts)
    return out.getvalue()


def rows_of(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines()]


def fresh_study(owner, name: str = "Study B") -> Study:
    study, _ = annotation_services.do_get_or_create_study(name, owner=owner)
    return study


def test_label_rows_carry_the_documented_fields(worked):
    rows = rows_of(run(what="labels"))
    assert all(list(r)[:8] == LABEL_FIELDS for r in rows)
    assert len(rows) == 20  # 10 human + 10 judge labels
    judge = [r for r in rows if r["source"] == "judge:gpt"]
    assert len(judge) == 10 and judge[0]["annotator"] == "gpt"
    assert {(r["trace_id"], r["step"]): r["confidence"] for r in judge}[("tA", 5)] == 0.91
    human = [r for r in rows if r["source"] == "human"]
    assert {r["annotator"] for r in human} == {"ann1"} and all(r["review_complete"] for r in human)
    assert rows_of(run(what="labels", source="judge:gpt")) == judge
    final = rows_of(run(what="labels", source="final"))
    assert len(final) == 10 and {r["origin"] for r in final} == {"human"}


def test_labels_round_trip_through_a_fresh_study(study, do_import, owner):
    original = [problem("p1", skeleton=True),
                trace("t1", "p1", "m1", 3, labels=labels_of("ann1", "VEN", {1: [1], 3: [2]})
                      + labels_of("ann2", "VVN")),
                trace("t2", "p1", "m2", 2, labels=labels_of("ann1", "EV"))]
    original[1]["labels"][1]["note"] = "=wrong sum"
    original[1]["labels"][0]["confidence"] = 0.8
    assert do_import(jsonl(*original)).committed
    exported = rows_of(run(what="labels"))
    # re-import: the traces without labels, then the exported labels as canonical trace records
    bare = [dict(r, labels=[]) if r["kind"] == "trace" else r for r in original]
    target = fresh_study(owner)
    assert do_import(jsonl(*bare), target=target).committed
    by_trace = defaultdict(list)
    for r in exported:
        by_trace[r["trace_id"]].append({"step": r["step"], "verdict": r["verdict"], "annotator": r["annotator"],
                                        "skeleton_refs": r["skeleton_refs"], "confidence": r["confidence"],
                                        "note": r["reason"] or ""})
    again = [dict(r, labels=by_trace[r["trace_id"]]) for r in original if r["kind"] == "trace"]
    assert do_import(jsonl(*again), target=target).committed
    back = rows_of(io.StringIO(_export("Study B", what="labels")).getvalue())
    keep = LABEL_FIELDS + ["problem_id", "model", "origin", "review_complete"]
    assert [{k: r[k] for k in keep} for r in back] == [{k: r[k] for k in keep} for r in exported]


def _export(study: str, **opts) -> str:
    out = io.StringIO()
    call_command("export", study=study, stdout=out, stderr=io.StringIO(), **opts)
    return out.getvalue()


def test_prm_training_rows_round_trip_through_the_trl_importer(worked, owner, do_import):
    rows = rows_of(run(what="prm-training"))
    assert [list(r) for r in rows] == [["prompt", "completions", "labels", "meta"]] * 2
    by_id = {r["meta"]["trace_id"]: r for r in rows}
    assert by_id["tA"]["labels"] == [True] * 5
    assert by_id["tB"]["labels"] == [False, False, False, True, True]  # neutral counts as a correct step
    assert by_id["tA"]["completions"][0] == "tA step 1: x = 0" and by_id["tA"]["prompt"] == "What is p1?"
    target = fresh_study(owner)
    text = "".join(json.dumps(r) + "\n" for r in rows)
    report = do_import(text.encode(), "trl-stepwise", target=target)
    assert report.committed, report.rejected
    again = rows_of(_export("Study B", what="labels"))
    got = {(r["trace_id"], r["step"]): r["verdict"] for r in again}
    want = {(r["meta"]["trace_id"], i + 1): "valid" if ok else "invalid"
            for r in rows for i, ok in enumerate(r["labels"])}
    assert got == want
    assert rows_of(_export("Study B", what="prm-training", source="human")) == [
        dict(r, meta=dict(r["meta"], source="human")) for r in rows]


def test_only_completely_labelled_traces_become_training_rows(study, do_import):
    do_import(jsonl(problem("p"), trace("full", "p", "m", 2, labels=labels_of("a", "VE")),
                    trace("half", "p", "m", 2, labels=labels_of("a", "V")), trace("none", "p", "m", 0)))
    assert [r["meta"]["trace_id"] for r in rows_of(run(what="prm-training", source="human"))] == ["full"]


def test_agreement_exports_in_every_format(worked, tmp_path):
    metrics = rows_of(run(what="agreement", reference="human", candidate="judge:gpt"))
    by_metric = {(r["metric"], r["group"]): r for r in metrics}
    assert by_metric[("percent_agreement", "")]["value"] == pytest.approx(0.7)
    assert by_metric[("percent_agreement", "")]["n"] == 10
    steps = rows_of(run(what="agreement-steps", candidate="judge:gpt"))
    assert len(steps) == 10
    first = steps[0]
    assert (first["trace_id"], first["step"], first["human.verdict"], first["judge:gpt.verdict"]) == (
        "tA", 1, "valid", "valid")
    assert first["step_text"] == "tA step 1: x = 0" and first["agree"] is True
    assert first["judge:gpt.confidence"] == 0.95 and first["judge:gpt.updated_at"]
    assert first["annotator:ann1.verdict"] == "valid"
    traces = rows_of(run(what="agreement-traces"))
    t_b = next(r for r in traces if r["trace_id"] == "tB")
    assert (t_b["human.first_error"], t_b["judge:gpt.first_error"]) == (1, 1)
    assert t_b["human.complete"] is True and isinstance(t_b["judge:gpt.process"], float)
    for what in ("agreement", "agreement-steps", "agreement-traces", "labels", "prm-training", "traces"):
        for fmt in exports.FORMATS:
            out = tmp_path / f"{what}.{fmt}"
            call_command("export", study="Study A", what=what, format=fmt, out=str(out), candidate="judge:gpt",
                         stderr=io.StringIO())
            manifest = json.loads(exports.manifest_path(out).read_text())
            if fmt == "parquet":
                assert pq.read_table(out).num_rows == manifest["counts"]["rows"]
            assert manifest["export"] == {"what": what, "format": fmt, "file": out.name,
                                          "columns": manifest["export"]["columns"]}


def test_the_manifest_says_what_a_paper_cites(worked, tmp_path):
    out = tmp_path / "agreement.jsonl"
    call_command("export", study="Study A", what="agreement", candidate="judge:gpt", seed="4", out=str(out),
                 stderr=io.StringIO())
    m = json.loads(exports.manifest_path(out).read_text())
    assert m["study"] == {"id": worked.pk, "name": "Study A"}
    assert m["profile"]["name"] == "default" and m["profile"]["version"] == 1 and "omega" in m["profile"]["params"]
    assert m["sources"] == ["human", "judge:gpt"]
    assert m["counts"]["rows"] > 1  # one row per metric and group
    assert {k: m["counts"][k] for k in ("steps_compared", "traces_compared", "traces_in_scope")} == {
        "steps_compared": 10, "traces_compared": 2, "traces_in_scope": 2}
    assert m["seed"] == 4 and m["bootstrap"]["n_resamples"] == 1000
    assert m["code_version"] and m["created_at"] and m["generator"] == "ReasonAudit"
    assert m["filters"]["candidate"] == "judge:gpt"
    scores = tmp_path / "scores.csv"  # the score exports get a manifest too
    call_command("export", study="Study A", what="scores", source="human", format="csv", out=str(scores),
                 stderr=io.StringIO())
    sm = json.loads(exports.manifest_path(scores).read_text())
    assert sm["sources"] == ["human"] and sm["profile"]["version"] == 1 and sm["counts"]["rows"] == 2


def test_csv_cells_that_could_run_are_neutralized(study, do_import, tmp_path):
    do_import(jsonl(problem("p"), trace("=cmd|x", "p", "@model", 1, labels=labels_of("+ann", "V"))))
    judge_labels(study, "gpt", {"=cmd|x": "E"}, reasons={("=cmd|x", 1): "-1 is wrong"})
    out = tmp_path / "labels.csv"
    call_command("export", study="Study A", what="labels", format="csv", out=str(out), stderr=io.StringIO())
    rows = list(csv.DictReader(out.open()))
    assert {r["trace_id"] for r in rows} == {"'=cmd|x"}
    assert {r["model"] for r in rows} == {"'@model"}
    assert {r["annotator"] for r in rows} == {"'+ann", "gpt"}
    assert next(r for r in rows if r["source"] == "judge:gpt")["reason"] == "'-1 is wrong"
    assert next(r for r in rows if r["source"] == "human")["skeleton_refs"] == "[]"


def test_a_large_label_export_streams_in_parquet_row_groups(study, do_import, tmp_path, monkeypatch):
    monkeypatch.setattr(exports, "ROW_GROUP_ROWS", 7)
    do_import(jsonl(problem("p"), *[trace(f"t{i}", "p", "m", 4, labels=labels_of("a", "VVEN")) for i in range(10)]))
    out = tmp_path / "labels.parquet"
    call_command("export", study="Study A", what="labels", format="parquet", out=str(out), stderr=io.StringIO())
    f = pq.ParquetFile(out)
    assert f.metadata.num_rows == 40 and f.metadata.num_row_groups == 6
    assert str(f.schema_arrow.field("skeleton_refs").type) == "list<element: int64>"


def test_bad_requests_are_clear_errors(worked):
    with pytest.raises(CommandError, match="--candidate: no judge named 'nope'"):
        run(what="agreement", candidate="judge:nope")
    with pytest.raises(CommandError, match="--source: unknown label source"):
        run(what="labels", source="robots")
    with pytest.raises(CommandError, match="--calibration: no calibration study 'x'"):
        run(what="labels", calibration="x")


# ---------------------------------------------------------------------------
# Export jobs: API, web, downloads, permissions
# ---------------------------------------------------------------------------
def queue(client, study, capture, **body):
    with capture(execute=True):
        return client.post(f"/api/v1/studies/{study.pk}/exports/", body, format="json")


def test_an_export_job_gives_a_download_and_its_manifest(worked, owner, django_capture_on_commit_callbacks):
    r = queue(api(owner), worked, django_capture_on_commit_callbacks, what="agreement", candidate="judge:gpt",
              format="csv")
    assert r.status_code == 202 and r.json()["kind"] == "export"
    job = api(owner).get(f"/api/v1/jobs/{r.json()['id']}/").json()
    assert job["status"] == "succeeded", job["error"]
    result = job["result"]
    assert result["rows"] == result["manifest"]["counts"]["rows"] > 1 and result["format"] == "csv"
    assert result["manifest"]["sources"] == ["human", "judge:gpt"] and result["manifest"]["profile"]["version"] == 1
    assert result["download_url"] == f"http://testserver/api/v1/exports/{job['id']}/download/"
    body = b"".join(api(owner).get(result["download_url"]).streaming_content).decode()
    assert body.startswith("reference,candidate,profile,profile_version,seed,metric,group,value")
    manifest = json.loads(b"".join(api(owner).get(result["manifest_url"]).streaming_content))
    assert manifest["export"]["file"] == result["filename"] and manifest["counts"]["rows"] == result["rows"]


def test_export_permissions(worked, owner, member, outsider, adjudicator, django_capture_on_commit_callbacks):
    cap = django_capture_on_commit_callbacks
    assert api().post(f"/api/v1/studies/{worked.pk}/exports/", {"what": "labels"}).status_code == 401
    assert queue(api(outsider), worked, cap, what="labels").status_code == 404
    # label and agreement exports: owners and adjudicators only, blind or not
    for what in ("labels", "agreement", "agreement-steps", "agreement-traces", "prm-training", "traces"):
        r = queue(api(member), worked, cap, what=what)
        assert r.status_code == 403 and "owners and adjudicators" in r.json()["detail"]
    Study.objects.filter(pk=worked.pk).update(blind=False)
    assert queue(api(member), worked, cap, what="labels").status_code == 403
    assert queue(api(adjudicator), worked, cap, what="labels").status_code == 202
    owners = queue(api(owner), worked, cap, what="labels").json()
    url = f"/api/v1/exports/{owners['id']}/download/"
    assert api().get(url).status_code == 401
    assert api(outsider).get(url).status_code == 404
    assert api(member).get(url).status_code == 403  # an annotator cannot fetch the owner's label file either
    assert api(owner).get(url).status_code == 200
    # score exports stay open to members (annotators of blind studies get only their finished traces)
    scores = queue(api(member), worked, cap, what="scores")
    assert scores.status_code == 202
    assert api(member).get(f"/api/v1/exports/{scores.json()['id']}/download/").status_code == 200
    assert queue(api(owner), worked, cap, what="nope").json()["errors"][0]["field"] == "what"
    bad = queue(api(owner), worked, cap, what="agreement", candidate="judge:nope")
    assert bad.status_code == 400 and bad.json()["errors"][0]["field"] == "candidate"


def test_a_blind_annotator_cannot_download_labels_on_the_sync_link_either(client, worked, member):
    client.force_login(member)
    r = client.get(reverse("scoring-export", args=[worked.pk]) + "?what=labels&format=jsonl")
    assert r.status_code == 403 and b"owners and adjudicators" in r.content


def test_a_running_export_is_not_downloadable_yet(worked, owner):
    job = Job.objects.create(study=worked, kind=Job.Kind.EXPORT, params={"what": "labels", "format": "jsonl"},
                             created_by=owner)
    r = api(owner).get(f"/api/v1/exports/{job.pk}/download/")
    assert r.status_code == 409 and r.json()["detail"] == "the export is queued"


def test_the_web_export_job_page(client, worked, owner, member, django_capture_on_commit_callbacks):
    client.force_login(owner)
    with django_capture_on_commit_callbacks(execute=True):
        r = client.post(reverse("scoring-export-create", args=[worked.pk]),
                        {"what": "agreement-steps", "format": "parquet", "candidate": "judge:gpt"})
    assert r.status_code == 302
    page = client.get(r["Location"])
    assert page.status_code == 200 and b"Download" in page.content and b"code_version" in page.content
    job = Job.objects.get(study=worked, kind=Job.Kind.EXPORT)
    download = client.get(reverse("scoring-export-download", args=[worked.pk, job.pk]))
    assert download.status_code == 200 and download["Content-Disposition"].startswith("attachment")
    client.force_login(member)
    r = client.post(reverse("scoring-export-create", args=[worked.pk]), {"what": "labels", "format": "csv"})
    assert r.status_code == 403
    assert client.get(reverse("scoring-export-download", args=[worked.pk, job.pk])).status_code == 403


def test_a_job_whose_creator_lost_the_role_fails(worked, owner, adjudicator, django_capture_on_commit_callbacks):
    from scoring.export_jobs import do_queue_export, run_export_job

    job = do_queue_export(worked, worked.memberships.get(user=adjudicator), {"what": "labels"},
                                            user=adjudicator)
    annotation_services.do_add_member(worked, adjudicator.username, "annotator")
    run_export_job(job.pk)
    job.refresh_from_db()
    assert job.status == "failed" and "owners and adjudicators" in job.error
    assert StepLabel.objects.filter(step__trace__study=worked).count() == 20  # nothing touched



def test_an_export_queued_under_the_tasks_old_name_still_runs(worked, adjudicator):
    # The task moved from agreement.tasks to scoring.tasks; jobs queued before a deploy wait in the broker under
    # the old name, which stays registered (eager here: queue_task runs the real task in-process).
    from annotation import jobs
    from scoring.export_jobs import do_queue_export

    job = do_queue_export(worked, worked.memberships.get(user=adjudicator), {"what": "labels"}, user=adjudicator)
    jobs.queue_task("agreement.tasks.run_export", job.pk)
    job.refresh_from_db()
    assert job.status == Job.Status.SUCCEEDED, job.error
    assert job.result["rows"] == StepLabel.objects.filter(step__trace__study=worked).count() > 0


def test_the_agreement_export_is_tidy_one_row_per_metric_and_group(worked):
    # Issue 23: the CSV was one row of JSON cells.
    text = run(what="agreement", reference="human", candidate="judge:gpt", format="csv")
    rows = list(csv.DictReader(io.StringIO(text)))
    assert list(rows[0]) == ["reference", "candidate", "profile", "profile_version", "seed", "metric", "group",
                             "value", "ci_low", "ci_high", "n", "undefined"]
    assert all(not (r["value"] or "").startswith(("{", "[")) for r in rows)
    by = {(r["metric"], r["group"]): r for r in rows}
    assert float(by[("kappa", "")]["value"]) == pytest.approx(0.29 / 0.59)
    assert by[("confusion", "reference=valid; candidate=invalid")]["value"] == "1.0"
    assert by[("agreement_by_position", "step 1")]["n"] == "2"
    assert by[("pearson_r", "")]["undefined"].startswith("fewer than 3 paired values")


def test_agreement_steps_keeps_the_compared_steps_with_the_text_to_read_them(study, do_import, owner, tmp_path):
    # Issue 23: all steps came back when few had both labels; no text, reason, note or adjudication reason;
    # adjudicated.* filled with nothing adjudicated; the manifest named filters it did not apply.
    rec = trace("t1", "p1", "m1", 2, labels=labels_of("ann1", "VE"))
    rec["labels"][1]["note"] = "off by one"
    assert do_import(jsonl(problem("p1"), rec, trace("t2", "p1", "m1", 2))).committed
    judge_labels(study, "gpt", {"t1": "VV", "t2": "VV"}, reasons={("t1", 2): "3 + 4 = 7 holds"})
    out = tmp_path / "steps.jsonl"
    call_command("export", study="Study A", what="agreement-steps", format="jsonl", out=str(out),
                 candidate="judge:gpt", stderr=io.StringIO())
    rows = rows_of(out.read_text())
    assert [(r["trace_id"], r["step"]) for r in rows] == [("t1", 1), ("t1", 2)]  # only steps both labelled
    second = rows[1]
    assert (second["reference_verdict"], second["candidate_verdict"], second["agree"]) == ("invalid", "valid", False)
    assert second["step_text"] == "t1 step 2: x = 1"
    assert second["annotator:ann1.reason"] == "off by one" and second["judge:gpt.reason"] == "3 + 4 = 7 holds"
    assert all(r.get("adjudicated.verdict") is None for r in rows)  # nothing adjudicated
    manifest = json.loads(exports.manifest_path(out).read_text())
    assert manifest["counts"]["rows"] == 2 and manifest["counts"]["disagreements"] == 1
    assert manifest["filters"] == {"candidate": "judge:gpt"}
    # an adjudication fills adjudicated.* and the adjudication's reason
    from annotation.models import Step

    step = Step.objects.get(trace__trace_id="t1", index=2)
    StepLabel.objects.create(step=step, kind=StepLabel.Kind.ADJUDICATION, annotator=owner, verdict="valid",
                             reason="the sum is right")
    rows = rows_of(run(what="agreement-steps", candidate="judge:gpt"))
    assert rows[1]["adjudicated.verdict"] == "valid" and rows[1]["adjudication.reason"] == "the sum is right"
    assert rows[0]["adjudicated.verdict"] is None
    traces_out = tmp_path / "traces.jsonl"
    call_command("export", study="Study A", what="agreement-traces", format="jsonl", out=str(traces_out),
                 candidate="judge:gpt", stderr=io.StringIO())
    manifest = json.loads(exports.manifest_path(traces_out).read_text())
    assert "candidate" not in manifest["filters"] and manifest["ignored_options"] == ["candidate"]
