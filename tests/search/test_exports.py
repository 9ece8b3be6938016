"""The tables of the search pages as files (search.export_kinds): the search's traces, the cohorts,
two cohorts compared, a scanner's validation and answers -- on the pages, in the command, with
manifests, and refused where the page refuses."""

from __future__ import annotations

import csv
import io
import json

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.urls import reverse

from annotation import services as study_services
from annotation.models import Membership
from scoring import exports
from search import scanners, services
from search.export_kinds import ANSWER_FIELDS, COMPARE_FIELDS, SEARCH_FIELDS, VALIDATION_FIELDS
from search.models import ScanLabel
from tests.conftest import signed_in
from tests.search.conftest import label

pytestmark = pytest.mark.django_db


def rows_of(response) -> list[dict[str, str]]:
    assert response.status_code == 200, response.content[:300]
    return list(csv.DictReader(io.StringIO(b"".join(getattr(response, "streaming_content", [response.content]))
                                           .decode())))


@pytest.fixture
def scanned(scanner):
    """The conftest's scanner, run once over the four traces."""
    scanners.run_inline(scanners.do_start_scan(scanner, queue=False))
    return scanner


def test_the_search_pages_download_the_traces_they_match(study, owner, traces):
    client = signed_in(owner)
    url = reverse("search-download", args=[study.pk])
    rows = rows_of(client.get(url, {"q": "wait", "format": "csv"}))
    assert [r["trace_id"] for r in rows] == ["t1", "t3"]
    assert list(rows[0]) == SEARCH_FIELDS
    assert rows[0]["review_url"] == reverse("trace", args=[traces["t1"].pk])
    assert rows[0]["answer_correct"] == "true" and rows[0]["n_steps"] == "3"
    # Combined with a filter, exactly as the page reads it.
    rows = rows_of(client.get(url, {"q": "wait", "model": "m2", "format": "csv"}))
    assert [r["trace_id"] for r in rows] == ["t3"]
    # The manifest names the query and the code version.
    manifest = client.get(url, {"q": "wait", "model": "m2", "format": "csv", "manifest": "1"}).json()
    assert manifest["filters"] == {"query": "q=wait&model=m2"} and manifest["counts"]["rows"] == 1
    assert manifest["code_version"] and manifest["export"]["columns"] == SEARCH_FIELDS
    # Parquet and JSONL carry the same rows.
    body = client.get(url, {"q": "wait", "format": "jsonl"}).content.decode().splitlines()
    assert [json.loads(line)["trace_id"] for line in body] == ["t1", "t3"]
    assert client.get(url, {"q": "wait", "format": "parquet"}).status_code == 200
    # The page links to it with its own query.
    page = client.get(reverse("search", args=[study.pk]), {"q": "wait", "model": "m2"}).content.decode()
    assert "what=search&amp;q=wait&amp;model=m2&amp;format=csv" in page


def test_bad_input_is_a_400_naming_the_parameter(study, owner, traces):
    client = signed_in(owner)
    url = reverse("search-download", args=[study.pk])
    r = client.get(url, {"answer_correct": "maybe"})
    assert r.status_code == 400 and b"answer_correct" in r.content
    assert client.get(url, {"format": "xls"}).status_code == 400
    r = client.get(url, {"what": "traces"})
    assert r.status_code == 400 and b"what: choose one of" in r.content
    r = client.get(url, {"what": "cohort-compare", "cohort": "1"})
    assert r.status_code == 400 and b"no cohort 1 in this study" in r.content
    r = client.get(url, {"what": "scanner-validation", "scanner": "nope"})
    assert r.status_code == 400 and b"no scanner &#x27;nope&#x27; in this study" in r.content


def test_outsiders_get_404_and_blinded_annotators_the_pages_refusals(study, owner, member, outsider, traces):
    url = reverse("search-download", args=[study.pk])
    assert signed_in(outsider).get(url, {"q": "wait"}).status_code == 404
    label(traces["t1"], 2, verdict="invalid", user=owner, reason="owner's note")
    annotator = signed_in(member)
    # The study is blind: an annotator searches by their own labels only, in files as on the page.
    assert annotator.get(url, {"source": "human", "verdict": "invalid"}).status_code == 403
    assert rows_of(annotator.get(url, {"source": "mine", "verdict": "invalid"})) == []
    assert [r["trace_id"] for r in rows_of(annotator.get(url, {"q": "check"}))] == ["t1", "t4"]
    # Notes are searched only where the member sees them: the owner's note is not a match for her.
    assert rows_of(annotator.get(url, {"q": "owner"})) == []
    assert [r["trace_id"] for r in rows_of(signed_in(owner).get(url, {"q": "owner"}))] == ["t1"]


def test_cohorts_and_their_comparison_download_as_tidy_tables(study, owner, traces):
    m = Membership.objects.get(study=study, user=owner)
    a = services.do_save_cohort(study, m, name="=waits", data={"q": "wait"})  # a name a spreadsheet would run
    b = services.do_save_cohort(study, m, name="m1", data={"model": "m1"})
    client = signed_in(owner)
    url = reverse("search-download", args=[study.pk])
    rows = rows_of(client.get(url, {"what": "cohorts"}))
    assert [(r["name"], r["n_traces"]) for r in rows] == [("'=waits", "2"), ("m1", "2")]
    assert json.loads(rows[0]["query"]) == {"q": "wait"}
    # A cohort's traces are the search for it.
    assert [r["trace_id"] for r in rows_of(client.get(url, {"cohort": a.pk}))] == ["t1", "t3"]
    rows = rows_of(client.get(url, {"what": "cohort-compare", "cohort": a.pk, "versus": b.pk}))
    assert list(rows[0]) == COMPARE_FIELDS
    got = {(r["cohort"], r["measure"]): r for r in rows}
    accuracy = got[(str(a.pk), "answer_accuracy")]
    assert accuracy["n"] == "2" and float(accuracy["estimate"]) == 1.0 and accuracy["interval"] == "wilson 95%"
    assert float(accuracy["ci_low"]) < 1.0 and float(accuracy["ci_high"]) == pytest.approx(1.0)
    assert float(got[(str(b.pk), "answer_accuracy")]["estimate"]) == 0.5
    assert got[(str(a.pk), "shared_traces")]["n"] == "1"  # t1 is in both
    assert got[(str(a.pk), "traces_of_model:m2")]["n"] == "1"
    # The compare page names its intervals' resamples, seed and code version, and links the file.
    page = client.get(reverse("search-cohort-compare", args=[a.pk]), {"b": b.pk}).content.decode()
    assert "1000 resamples, seed 0" in page and f"versus={b.pk}" in page
    # A cohort of another study is not found.
    other, _ = study_services.do_get_or_create_study("Other", owner=owner)
    c = services.do_save_cohort(other, Membership.objects.get(study=other, user=owner), name="x", data={})
    r = client.get(url, {"what": "cohort-compare", "cohort": a.pk, "versus": c.pk})
    assert r.status_code == 400 and b"no cohort" in r.content


def test_a_scanners_validation_and_answers_download_with_their_provenance(study, owner, member, traces, scanned):
    scanner = scanned
    for trace_id, answer in (("t1", True), ("t2", False), ("t3", False), ("t4", False)):
        scanners.do_answer(scanner, traces[trace_id], owner, answer)
    client = signed_in(owner)
    url = reverse("search-download", args=[study.pk])
    rows = rows_of(client.get(url, {"what": "scanner-validation", "scanner": scanner.pk}))
    assert list(rows[0]) == VALIDATION_FIELDS and [r["split"] for r in rows] == ["dev", "test"]
    report = scanners.validation_report(scanner)
    for r in rows:
        v = report[r["split"]]
        assert (int(r["traces"]), int(r["tp"]), int(r["fp"]), int(r["fn"]), int(r["tn"])) == (v.n, v.tp, v.fp, v.fn,
                                                                                              v.tn)
        assert r["bootstrap_resamples"] == "2000" and r["bootstrap_seed"] == "0" and r["judge"] == "gpt"
    assert sum(int(r["traces"]) for r in rows) == 4
    listed = rows_of(client.get(url, {"what": "scanners"}))
    assert [(r["name"], r["yes"], r["no"], r["judge_version"]) for r in listed] == [("waits", "2", "2", "1")]
    # By name too, from the command.
    out = io.StringIO()
    call_command("export", study=study.name, what="scanner-validation", scanner="waits", format="csv", stdout=out)
    assert [r["split"] for r in csv.DictReader(io.StringIO(out.getvalue()))] == ["dev", "test"]
    answers = {r["trace_id"]: r for r in rows_of(client.get(url, {"what": "scanner-answers", "scanner": scanner.pk}))}
    assert list(next(iter(answers.values()))) == ANSWER_FIELDS
    assert answers["t1"]["answer"] == "true" and answers["t1"]["cited_steps"] == "2"
    assert answers["t2"]["uncited"] == "true" and answers["t2"]["person_answer"] == "false"
    assert answers["t3"]["split"] in ScanLabel.Split.values
    page = client.get(scanner.get_absolute_url()).content.decode()
    assert "2000 resamples of the split's traces, seed 0" in page and "what=scanner-validation" in page
    # A blinded annotator sees neither the validation table nor the scanner's answers (issue 29, L1; the
    # page hides them too).
    annotator = signed_in(member)
    assert annotator.get(url, {"what": "scanner-validation", "scanner": scanner.pk}).status_code == 403
    assert annotator.get(url, {"what": "scanner-answers", "scanner": scanner.pk}).status_code == 403


def test_the_export_command_runs_a_search_with_its_manifest(study, owner, traces, tmp_path):
    out = tmp_path / "waits.csv"
    call_command("export", study=study.name, what="search", query="q=wait or hmm&answer_correct=true",
                 format="csv", out=out, stderr=io.StringIO())
    assert [r["trace_id"] for r in csv.DictReader(out.open())] == ["t1", "t3"]
    manifest = json.loads(exports.manifest_path(out).read_text())
    assert manifest["filters"] == {"query": "q=wait+or+hmm&answer_correct=true"}
    # The command line is no member: its own labels or reviews are nobody's.
    with pytest.raises(CommandError, match="needs_review: the command line searches as no member"):
        call_command("export", study=study.name, what="search", query="needs_review=true", format="csv",
                     stdout=io.StringIO())
    label(traces["t4"], 1, verdict="invalid", user=owner)
    out = io.StringIO()
    call_command("export", study=study.name, what="search", query="source=annotator:olivia&verdict=invalid",
                 format="csv", stdout=out)
    assert [r["trace_id"] for r in csv.DictReader(io.StringIO(out.getvalue()))] == ["t4"]
    with pytest.raises(CommandError, match="answer_correct"):
        call_command("export", study=study.name, what="search", query="answer_correct=maybe", format="csv",
                     stdout=io.StringIO())
