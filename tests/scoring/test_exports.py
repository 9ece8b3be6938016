"""Exports: the export command (every implemented --what, every format,
stdout by default), CSV cells that cannot run as formulas, Parquet round
trips, and a clear error for kinds another issue will add."""

from __future__ import annotations

import csv
import io
import json

import pandas as pd
import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from scoring import exports, score_jobs
from tests.conftest import jsonl
from tests.scoring.test_api import HAZARD_FIELDS, SCORE_FIELDS

# docs/exports.md: the leaderboard export's columns (not the endpoint's: an interval is two columns, no metric twice).
LEADERBOARD_FIELDS = ["model", "traces", "scored", "without_skeleton", "answer_accuracy", "process_mean",
                      "process_ci_low", "process_ci_high", "s_prm_mean", "holistic_mean", "holistic_ci_low",
                      "holistic_ci_high", "lucky_guess_rate", "svr", "vsr"]

pytestmark = pytest.mark.django_db


@pytest.fixture
def scored(seeded):
    score_jobs.recompute(seeded, warm=False)
    return seeded


def run(**opts) -> str:
    out = io.StringIO()
    call_command("export", study="Study A", stdout=out, **opts)
    return out.getvalue()


def test_it_neutralizes_formula_cells_but_not_numbers():
    assert exports.neutralize("=HYPERLINK(1)") == "'=HYPERLINK(1)"
    for text in ("+1", "-x", "@SUM(A1)", "\tcmd", "\rcmd"):
        assert exports.neutralize(text) == "'" + text
    assert exports.neutralize("model-a") == "model-a"
    # Leading blanks and line breaks are skipped by spreadsheets: still a formula (issue 20).
    for text in (" =1+1", "\n=1+1", "\t+1", "  -2+3", " \r\n@SUM(A1)", "\u00a0=1"):
        assert exports.neutralize(text) == "'" + text
    assert exports.neutralize("  model a") == "  model a"
    table = exports.Table(["name", "value", "ci", "flag"], [
        {"name": "=cmd|' /C calc'!A0", "value": -1.5, "ci": [-0.5, 2.0], "flag": None},
        {"name": "-2", "value": -3, "ci": None, "flag": True},
    ])
    text = io.StringIO()
    exports.write_csv(table, text)
    rows = list(csv.reader(io.StringIO(text.getvalue())))
    assert rows[1] == ["'=cmd|' /C calc'!A0", "-1.5", "[-0.5, 2.0]", ""]
    assert rows[2] == ["'-2", "-3", "", "true"]  # the text "-2" is neutralized, the number -3 is not


def test_a_model_named_like_a_formula_is_neutralized_in_the_leaderboard_csv(study, do_import, tmp_path):
    do_import(jsonl({"kind": "problem", "problem_id": "p", "statement": "s", "gold_answer": "1"},
                    {"kind": "trace", "problem_id": "p", "model": "=1+1", "steps": ["a"], "answer": "1",
                     "labels": [{"step": 1, "verdict": "valid", "annotator": "a"}]}))
    score_jobs.recompute(study, warm=False)
    out = tmp_path / "lb.csv"
    call_command("export", study="Study A", what="leaderboard", format="csv", out=str(out), stderr=io.StringIO())
    rows = list(csv.DictReader(out.open()))
    assert rows[0]["model"] == "'=1+1"
    assert list(rows[0]) == LEADERBOARD_FIELDS


def test_score_export_rows_carry_exactly_the_documented_fields(scored):
    rows = [json.loads(line) for line in run(what="scores").splitlines()]
    assert [list(r) for r in rows] == [SCORE_FIELDS] * 3
    assert {(r["trace_id"], r["source"], r["profile"]) for r in rows} == {
        ("t1", "final", "default"), ("t3", "final", "default"), ("t5", "final", "default")}
    t1 = next(r for r in rows if r["trace_id"] == "t1")
    assert t1["first_error"] == 2 and t1["s_base"] == 5.0 and t1["lucky_guess"] is True
    empty = next(r for r in rows if r["trace_id"] == "t5")
    assert empty["s_base"] is None and empty["first_error"] is None and empty["empty"] is True


def test_hazard_leaderboard_and_lucky_guess_exports(scored):
    hazard = [json.loads(line) for line in run(what="hazard", source="human").splitlines()]
    assert [list(r) for r in hazard] == [["model", *HAZARD_FIELDS]] * len(hazard)
    board = [json.loads(line) for line in run(what="leaderboard", profile="no-penalties").splitlines()]
    assert [r["model"] for r in board] == ["m1", "m2", "m3"] and list(board[0]) == LEADERBOARD_FIELDS
    lucky = [json.loads(line) for line in run(what="lucky-guesses", model="m2").splitlines()]
    assert [r["trace_id"] for r in lucky] == ["t3"]


def test_the_leaderboard_export_has_each_figure_once_in_scalar_columns_with_the_endpoints_values(scored, owner):
    from rest_framework.test import APIClient

    board = [json.loads(line) for line in run(what="leaderboard").splitlines()]
    assert all(list(r) == LEADERBOARD_FIELDS for r in board)
    assert not any(col.startswith("s_hcrs") for col in board[0])  # Process = S_HCRS where both exist: once
    client = APIClient()
    client.force_authenticate(owner)
    api = {r["model"]: r for r in client.get(f"/api/v1/studies/{scored.pk}/leaderboard/").json()["results"]}
    for row in board:
        same = api[row["model"]]
        for metric in ("process", "holistic"):
            ci = same[f"{metric}_ci"]
            assert [row[f"{metric}_ci_low"], row[f"{metric}_ci_high"]] == (ci if ci is not None else [None, None])
            assert row[f"{metric}_mean"] == same[f"{metric}_mean"]
        assert row["answer_accuracy"] == same["answer_accuracy"] and row["traces"] == same["traces"]
    # One trace per model here: the intervals are by domain (arith holds t1 and t3, both scored).
    (arith,) = [json.loads(line) for line in run(what="leaderboard", group="domain").splitlines()
                if json.loads(line)["domain"] == "arith"]
    assert list(arith)[1:] == LEADERBOARD_FIELDS[1:] and arith["scored"] == 2
    assert arith["process_ci_low"] <= arith["process_mean"] <= arith["process_ci_high"]
    assert arith["process_ci_low"] < arith["process_ci_high"]
    csv_rows = list(csv.reader(io.StringIO(run(what="leaderboard", format="csv"))))
    assert csv_rows[0] == LEADERBOARD_FIELDS and not any(cell.startswith("[") for row in csv_rows for cell in row)


def test_parquet_round_trips(scored, tmp_path):
    out = tmp_path / "scores.parquet"
    call_command("export", study="Study A", what="scores", format="parquet", out=str(out), stderr=io.StringIO())
    frame = pd.read_parquet(out)
    assert list(frame.columns) == SCORE_FIELDS
    expected = pd.DataFrame([json.loads(line) for line in run(what="scores").splitlines()])
    assert frame["trace_id"].tolist() == expected["trace_id"].tolist()
    assert frame["process"].tolist() == pytest.approx(expected["process"].tolist())
    assert frame["first_error"].astype("Float64").tolist()[:2] == [2, 1]
    out = tmp_path / "lb.parquet"
    call_command("export", study="Study A", what="leaderboard", format="parquet", out=str(out), stderr=io.StringIO())
    board = pd.read_parquet(out)
    assert list(board.columns) == LEADERBOARD_FIELDS and len(board) == 3


def test_csv_export_to_a_file(scored, tmp_path):
    out = tmp_path / "scores.csv"
    err = io.StringIO()
    call_command("export", study="Study A", what="scores", format="csv", out=str(out), stderr=err)
    assert "wrote 3 scores row(s)" in err.getvalue()
    rows = list(csv.DictReader(out.open()))
    assert list(rows[0]) == SCORE_FIELDS and rows[0]["answer_correct"] == "true"


def test_kinds_of_another_issue_and_bad_input_are_clear_errors(scored, monkeypatch):
    # labels, agreement and prm-training exist now (tests/agreement); a planned kind nobody registered yet:
    monkeypatch.setattr(exports, "PLANNED", (*exports.PLANNED, "future-kind"))
    with pytest.raises(CommandError, match="--what future-kind is not implemented yet"):
        run(what="future-kind")
    with pytest.raises(CommandError, match="--profile: no profile named 'nope'"):
        run(what="scores", profile="nope")
    with pytest.raises(CommandError, match="no study named"):
        call_command("export", study="nowhere", what="scores")
    with pytest.raises(CommandError, match="parquet is binary"):
        run(what="scores", format="parquet")


def test_another_app_can_register_an_export_kind(scored, monkeypatch):
    monkeypatch.setattr(exports, "_REGISTRY", dict(exports._REGISTRY))

    @exports.register("agreement")
    def agreement(request):
        return exports.Table(["reference", "candidate"], [{"reference": request.reference,
                                                           "candidate": request.candidate}])

    assert json.loads(run(what="agreement", reference="human", candidate="judge:x")) == {
        "reference": "human", "candidate": "judge:x"}


def test_the_download_links_of_the_pages(client, owner, member, outsider, scored):
    url = reverse("scoring-export", args=[scored.pk])
    client.force_login(outsider)
    assert client.get(url, {"what": "scores"}).status_code == 404
    client.force_login(member)
    # Scores read every source's labels: a blind study's annotator is refused them (annotation.gate).
    assert client.get(url, {"what": "scores", "format": "jsonl"}).status_code == 403
    assert client.get(url, {"what": "labels"}).status_code == 403  # annotators may not export every source's labels
    client.force_login(owner)
    response = client.get(url, {"what": "hazard", "format": "csv", "source": "human"})
    assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")
    assert response.content.decode().splitlines()[0] == ",".join(["model", *HAZARD_FIELDS])
    parquet = client.get(url, {"what": "leaderboard", "format": "parquet"})
    assert list(pd.read_parquet(io.BytesIO(parquet.content)).columns) == LEADERBOARD_FIELDS
    # The file's name, a bad format named, and the manifest of the same file (scoring.exports.download).
    assert response["Content-Disposition"] == f'attachment; filename="{scored.name.replace(" ", "-")}-hazard.csv"'
    bad = client.get(url, {"what": "hazard", "format": "xls"})
    assert bad.status_code == 400 and b"format: choose one of jsonl, csv, parquet" in bad.content
    manifest = client.get(url, {"what": "hazard", "format": "csv", "source": "human", "manifest": "1"}).json()
    assert manifest["export"]["what"] == "hazard" and manifest["export"]["columns"] == ["model", *HAZARD_FIELDS]


def test_the_hazard_csv_is_the_pages_tables_with_a_model_column(client, owner, scored):
    """The page shows one table per model; the CSV holds the same rows, each with its model (it once pooled
    every model into one table with no model column)."""
    client.force_login(owner)
    for query in ({"source": "human"}, {"source": "human", "model": "m1"}):
        page = client.get(reverse("scoring-hazard", args=[scored.pk]), query)
        tables = page.context["by_model"]
        assert tables and (len(tables) > 1 or "model" in query)
        csv_text = client.get(reverse("scoring-export", args=[scored.pk]),
                              {"what": "hazard", "format": "csv", **query}).content.decode()
        got = [(r["model"], int(r["step"]), int(r["at_risk"]), int(r["events"]), float(r["survival"]))
               for r in csv.DictReader(io.StringIO(csv_text))]
        assert got == [(m, r["step"], r["at_risk"], r["events"], pytest.approx(r["survival"]))
                       for m, table in tables.items() for r in table]
