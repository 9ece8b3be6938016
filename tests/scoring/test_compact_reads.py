"""The analytics caches read stored scores compactly (scoring.storage.read_compact, issue 33: the score job's
cache warm within 1 GB at a million traces) and show exactly what the reading of every row as Python objects
showed: the same table from the reader, and the same warmed leaderboards, hazard, lucky-guess and recovery
figures, pages and CSV exports, on a study with several models, domains and label sources."""

from __future__ import annotations

import io
import random
import re
from typing import Any

import numpy as np
import pandas as pd
import pytest
from django.core.cache import cache
from django.core.management import call_command
from django.urls import reverse

from scoring import analytics, score_jobs, services, sources, storage
from scoring.core import aggregate
from scoring.core.aggregate import answer_process_quadrants, box_statistics, first_error_histogram, to_records
from scoring.core.hazard import hazard_from_scores
from scoring.models import ScoreSet
from tests.conftest import jsonl
from tests.scoring.conftest import add_judge_labels, adjudicate
from tests.scoring.thought_fixtures import seed_thinking

pytestmark = pytest.mark.django_db

MODELS = ["m-alpha", "m-beta", "m-gamma"]
SCATTER = 25  # fewer than the study's traces, so the scatter's sample is drawn


def _records(rng: random.Random) -> tuple[bytes, dict[str, list[str]]]:
    """Problems in two domains (half with a skeleton), traces of three models (a few empty), complete and
    partial human reviews; and the judge's verdicts on every step."""
    problems = []
    for i in range(8):
        problem: dict[str, Any] = {"kind": "problem", "problem_id": f"p{i}", "statement": f"{i}+1?",
                                   "gold_answer": str(i + 1), "domain": "arith" if i % 2 else "alg"}
        if i % 2 == 0:
            problem["skeleton"] = [{"text": f"{i}+1={i + 1}"}, {"text": f"answer {i + 1}"}]
        problems.append(problem)
    traces, judged = [], {}
    for k in range(90):
        model = MODELS[k % 3]
        n = 0 if k % 17 == 0 else rng.randint(1, 6)
        verdicts = [rng.choice(["valid", "valid", "valid", "invalid", "neutral"]) for _ in range(n)]
        trace: dict[str, Any] = {"kind": "trace", "problem_id": f"p{k % 8}", "model": model, "trace_id": f"t{k}",
                                 "steps": [f"step {j} of t{k}" for j in range(n)], "answer": "1",
                                 "answer_correct": rng.random() < 0.6}
        labels = []
        if n and k % 3 != 2:  # complete reviews, by one annotator or two (who may disagree)
            labels += [{"step": j + 1, "verdict": v, "annotator": "ann1"} for j, v in enumerate(verdicts)]
            if k % 2:
                labels += [{"step": j + 1, "verdict": rng.choice(["valid", "invalid"]), "annotator": "ann2"}
                           for j in range(n)]
        elif n and k % 4 == 0:  # a partial review
            labels.append({"step": 1, "verdict": verdicts[0], "annotator": "ann1"})
        if labels:
            trace["labels"] = labels
        traces.append(trace)
        if n:
            judged[f"t{k}"] = [rng.choice(["valid", "valid", "invalid", "neutral"]) for _ in range(n)]
    return jsonl(*problems, *traces), judged


@pytest.fixture
def many(study, do_import, owner):
    data, judged = _records(random.Random(33))
    report = do_import(data)
    assert report.committed, report.rejected
    add_judge_labels(study, "mech", judged)
    seed_thinking(study)  # two more models, thinking ones (recoveries); "mech" becomes the primary judge
    adjudicate(study, owner, "t1", 1, "invalid")
    cache.clear()
    return study


def _old_leaderboard(score_set: ScoreSet, group: str) -> dict[str, dict]:
    """scoring.analytics.scored_leaderboard as it was before read_compact: every row of every page column."""
    frame = storage.read_scores(score_set, columns=[*storage.PAGE_COLUMNS, "l_gold"])
    table = aggregate.leaderboard(frame, group_col=group)
    out = {}
    sizes = frame.groupby(group)["n_steps"].agg(scored="size", verified=lambda s: int((s >= 1).sum()))
    no_skel = frame["l_gold"].fillna(0).to_numpy() <= 0
    without = pd.Series(no_skel, index=frame.index).groupby(frame[group]).sum()
    for rec in to_records(table):
        key = rec.pop(group)
        rec["scored"] = int(sizes.loc[key, "scored"])
        rec["verified"] = int(sizes.loc[key, "verified"])
        rec["without_skeleton"] = int(without.get(key, 0))
        out[key] = rec
    return out


def _old_summary(score_set: ScoreSet, tau: float, model: str = "") -> dict[str, Any]:
    """scoring.analytics.summary as it was before read_compact (one groupby per table, every page column)."""
    frame = storage.read_scores(score_set, model=model)
    out: dict[str, Any] = {"n": int(len(frame))}
    out["hazard_all"] = to_records(hazard_from_scores(frame))
    out["hazard"] = {str(m): to_records(hazard_from_scores(g)) for m, g in frame.groupby("model", sort=True)}
    out["histogram"] = to_records(first_error_histogram(frame, "model"))
    dist, quadrants = {}, {}
    for m, g in frame.groupby("model", sort=True):
        dist[str(m)] = {metric: box_statistics(g[metric].to_numpy(dtype=float, na_value=np.nan))
                        for metric in ("process", "holistic", "s_hcrs")}
        quadrants[str(m)] = answer_process_quadrants(g["answer_correct"].to_numpy(dtype=bool),
                                                     g["process"].to_numpy(dtype=float), tau)
    out["distributions"] = dist
    out["quadrants"] = quadrants
    out["relative_hazard"] = {str(m): analytics._relative_hazard(g) for m, g in frame.groupby("model", sort=True)}
    out["relative_hazard_all"] = analytics._relative_hazard(frame)
    # The recovery table's code is the pages' (only where its recovered errors are parsed moved).
    out["recovery"] = analytics._recovery(analytics._recoveries(score_set), frame)
    pick = np.arange(len(frame))
    if len(frame) > SCATTER:
        pick = np.sort(np.random.default_rng(0).choice(len(frame), SCATTER, replace=False))
    sample = frame.iloc[pick]
    out["scatter"] = {"shown": int(len(sample)), "points": {
        str(m): {"process": g["process"].round(4).tolist(), "answer_correct": g["answer_correct"].astype(int).tolist()}
        for m, g in sample.groupby("model", sort=True)}}
    return out


def _sets(study) -> list[ScoreSet]:
    return list(ScoreSet.objects.filter(study=study, profile__is_current=True).select_related("profile")
                .order_by("source", "profile__name"))


@pytest.mark.parametrize("chunk_rows", [7, 20_000])
def test_the_compact_reader_reads_what_read_scores_reads(many, chunk_rows):
    score_jobs.recompute(many, warm=False)
    columns = storage.VALUE_COLUMNS
    for score_set in _sets(many):
        for model, domain in [("", ""), ("m-beta", ""), ("", "arith"), ("reasoner", "")]:
            full = storage.read_scores(score_set, model=model, domain=domain, columns=columns)
            compact = storage.read_compact(score_set, columns, labels=("trace", "model", "domain"), model=model,
                                           domain=domain, chunk_rows=chunk_rows)
            assert list(compact.columns) == ["trace", "model", "domain", *columns, "complete"]
            pd.testing.assert_frame_equal(compact, full[list(compact.columns)], check_exact=True)
    assert storage.read_compact(_sets(many)[0], columns, model="nobody").empty


def test_by_group_gives_groupbys_groups_in_its_order():
    frame = pd.DataFrame({"model": np.array(["b", "a", "c", "a", "b", "", "a"], dtype=object),
                          "x": pd.array([1, None, 3, 4, 5, 6, 7], dtype="Int64")})
    ours = list(analytics.by_group(frame, "model"))
    theirs = list(frame.groupby("model", sort=True))
    assert [k for k, _ in ours] == [k for k, _ in theirs] == ["", "a", "b", "c"]
    for (_, a), (_, b) in zip(ours, theirs, strict=True):
        pd.testing.assert_frame_equal(a, b, check_exact=True)
    assert list(analytics.by_group(frame.iloc[:0], "model")) == []


def test_the_warmed_tables_equal_those_computed_from_every_row(many, monkeypatch):
    monkeypatch.setattr(analytics, "SCATTER_MAX_POINTS", SCATTER)
    score_jobs.recompute(many)  # its last step warms the caches through read_compact
    default = services.default_profile(many)
    tau = default.as_profile().tau
    finals = [s for s in _sets(many) if s.source == sources.FINAL]
    assert {s.profile.name for s in finals} >= set(services.ABLATION_NAMES)
    for score_set in finals:
        warmed = cache.get(analytics._key("leaderboard-v2", score_set, "model", "", ""))
        assert warmed == _old_leaderboard(score_set, "model"), score_set.profile.name
    (main,) = [s for s in finals if s.profile_id == default.pk]
    warmed = cache.get(analytics._key("summary", main, "", "", repr(tau)))
    assert warmed == _old_summary(main, tau)
    # The study has what each table shows: five models, scored traces without a skeleton, thought errors
    # recovered, lucky guesses, a drawn scatter.
    assert set(warmed["hazard"]) == {*MODELS, "plain", "reasoner"}
    assert any(r["recovered"] for r in warmed["recovery"])
    assert any(q["correct_low"] for q in warmed["quadrants"].values())
    assert warmed["scatter"]["shown"] == SCATTER
    assert any(r["without_skeleton"] for r in _old_leaderboard(main, "model").values())
    # What a page asks for that the warm does not fill: other sources, groups and filters, computed anew.
    for score_set in _sets(many):
        assert analytics.scored_leaderboard(score_set, "domain") == _old_leaderboard(score_set, "domain")
        assert analytics.summary(score_set, "m-beta", tau=tau) == _old_summary(score_set, tau, "m-beta")


def _exports(study, kinds: list[tuple[str, dict[str, str]]]) -> dict[str, str]:
    out = {}
    for what, opts in kinds:
        text = io.StringIO()
        call_command("export", study=study.name, what=what, format="csv", stdout=text, **opts)
        out[f"{what} {opts}"] = text.getvalue()
    return out


EXPORTS = [(what, opts) for what in ("leaderboard", "hazard", "relative-hazard", "recovery", "lucky-guesses")
           for opts in ({}, {"source": "human"}, {"model": "m-alpha"})] + [
    ("leaderboard", {"group": "domain"}), ("leaderboard", {"profile": "no-penalties"})]


def test_the_csv_exports_and_pages_equal_those_computed_from_every_row(many, owner, client, monkeypatch):
    monkeypatch.setattr(analytics, "SCATTER_MAX_POINTS", SCATTER)
    score_jobs.recompute(many)
    client.force_login(owner)
    urls = [reverse(name, args=[many.pk]) + query for name in PAGES for query in ("", "?source=human")]
    warmed = _exports(many, EXPORTS)
    warmed_pages = [_page(client, url) for url in urls]

    # The same, with the caches computed anew by the old way of reading (every row as Python objects).
    def read_every_row(score_set, columns, *, labels=("trace", "model"), model="", domain="", **kw):
        return storage.read_scores(score_set, model=model, domain=domain, columns=columns)

    cache.clear()
    monkeypatch.setattr(storage, "read_compact", read_every_row)
    assert _exports(many, EXPORTS) == warmed
    assert [_page(client, url) for url in urls] == warmed_pages


PAGES = ["scoring-leaderboard", "scoring-hazard", "scoring-distributions", "scoring-lucky", "scoring-ablations"]
#: A form's CSRF token is masked anew on each render.
CSRF = re.compile(r"[A-Za-z0-9]{64}")


def _page(client, url: str) -> str:
    response = client.get(url)
    assert response.status_code == 200, url
    return CSRF.sub("<csrf>", response.content.decode())
