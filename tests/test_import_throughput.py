"""What the import does to be fast must not change what it stores: raw id
look-ups in chunks, the remembered answer checks, value adaptation memoised by
repr, the skeleton links written by executemany, and the garbage collector's
frozen start-up heap."""

from __future__ import annotations

import gc

import pytest
from django.db import connection

from annotation import bulk
from annotation.importing import pipeline
from annotation.models import Problem, Skeleton, Step, Trace
from reasonlib import answers
from tests.conftest import jsonl

pytestmark = pytest.mark.django_db


def problem(pid: str = "p1", **kw) -> dict:
    return {"kind": "problem", "problem_id": pid, "statement": f"Statement of {pid}?", "gold_answer": "18", **kw}


def trace(pid: str = "p1", **kw) -> dict:
    return {"kind": "trace", "problem_id": pid, "model": "m1", **kw}


@pytest.fixture
def counted_checks(monkeypatch) -> list[tuple[str, str]]:
    """The real check_answer, with its calls recorded."""
    calls: list[tuple[str, str]] = []
    real = answers.check_answer

    def spy(predicted, gold, timeout=5.0):
        calls.append((predicted, gold))
        return real(predicted, gold, timeout=timeout)

    monkeypatch.setattr(answers, "check_answer", spy)
    return calls


def test_answer_checks_are_decided_once_per_answer_and_gold(do_import, counted_checks):
    report = do_import(
        jsonl(
            problem("p1", gold_answer="18"),
            problem("p2", gold_answer="20"),
            *[trace("p1", trace_id=f"a{k}", steps=["9 * 2 = 18"], answer="18") for k in range(3)],
            trace("p2", trace_id="b0", steps=["9 * 2 = 18"], answer="18"),
            trace("p1", trace_id="c0", steps=["x"], answer="\\frac{36}{2}"),
            trace("p1", trace_id="c1", steps=["y"], answer="\\frac{36}{2}"),
        )
    )
    assert report.rejected == []
    verdicts = dict(Trace.objects.values_list("trace_id", "auto_answer_correct"))
    # The same answer is right for one gold answer and wrong for the other.
    assert verdicts == {"a0": True, "a1": True, "a2": True, "b0": False, "c0": True, "c1": True}
    assert sorted(counted_checks) == [("18", "18"), ("18", "20"), ("\\frac{36}{2}", "18")]


def test_a_full_answer_check_memo_is_emptied_and_verdicts_stay_right(do_import, counted_checks, monkeypatch):
    monkeypatch.setattr(pipeline, "ANSWER_CHECK_MEMO", 2)
    answers = ["18", "18", "17.0", "17.0", "19", "18"]
    do_import(jsonl(problem(), *[trace(trace_id=f"t{k}", steps=["s"], answer=a) for k, a in enumerate(answers)]))
    verdicts = dict(Trace.objects.values_list("trace_id", "auto_answer_correct"))
    assert verdicts == {f"t{k}": a == "18" for k, a in enumerate(answers)}
    # Fewer calls than traces (hits), more than distinct answers (the memo was emptied).
    assert len(set(answers)) < len(counted_checks) < len(answers)


def test_look_ups_in_small_chunks_find_every_row_and_reimport_is_unchanged(do_import, monkeypatch):
    monkeypatch.setattr(bulk, "LOOKUP_CHUNK", 3)
    records = [problem(f"p{k}") for k in range(7)]
    records += [trace(f"p{k}", trace_id=f"t{k}", steps=[f"step {k}", "done"]) for k in range(7)]
    first = do_import(jsonl(*records))
    assert (first.problems_created, first.traces_created, first.steps_created) == (7, 7, 14)
    for t in Trace.objects.select_related("problem"):
        assert t.problem.problem_id == "p" + t.trace_id[1:]
        assert list(t.steps.order_by("index").values_list("text", flat=True)) == [f"step {t.trace_id[1:]}", "done"]
    second = do_import(jsonl(*records))
    assert (second.problems_created, second.traces_created, second.unchanged, second.rejected) == (0, 0, 14, [])


def test_meta_values_that_print_alike_in_json_stay_distinct(do_import):
    metas = [{"x": 1}, {"x": 1.0}, {"x": True}, {"x": "1"}, {"b": 2, "a": 1}, {"a": 1, "b": 2}, {}]
    do_import(jsonl(problem(), *[trace(trace_id=f"t{k}", steps=["s"], meta=m) for k, m in enumerate(metas)],
                    trace(trace_id="extra", steps=["s"], source="web")))
    stored = dict(Trace.objects.values_list("trace_id", "meta"))
    for k, m in enumerate(metas):
        assert stored[f"t{k}"] == m and type(stored[f"t{k}"].get("x")) is type(m.get("x"))
        if connection.vendor != "postgresql":  # jsonb keeps its own key order
            assert list(stored[f"t{k}"]) == list(m)  # key order as in the file
    assert stored["extra"] == {"source": "web"}  # unknown keys are kept in meta
    assert pipeline.NO_META == {}


def test_skeleton_links_are_set_for_new_and_stored_problems(do_import):
    skeleton = [{"text": "a", "check": "1+1=2"}, {"text": "b"}]
    do_import(jsonl(problem("p1", skeleton=skeleton), problem("p2"), problem("p3", skeleton=skeleton[:1],
                                                                               skeleton_status="draft")))
    do_import(jsonl(problem("p2", skeleton=skeleton + [{"text": "c"}])))
    p1, p2, p3 = (Problem.objects.get(problem_id=p) for p in ("p1", "p2", "p3"))
    assert (p1.l_gold, p1.approved_skeleton, p2.l_gold, p2.approved_skeleton) == (
        2, Skeleton.objects.get(problem=p1), 3, Skeleton.objects.get(problem=p2))
    assert (p3.l_gold, p3.approved_skeleton) == (0, None)


def test_the_start_up_heap_is_frozen_only_during_an_import(do_import, monkeypatch):
    seen: list[int] = []
    real = pipeline.validate

    def spy(obj, *args):
        seen.append(gc.get_freeze_count())
        return real(obj, *args)

    monkeypatch.setattr(pipeline, "validate", spy)
    assert gc.get_freeze_count() == 0
    do_import(jsonl(problem(), trace(steps=["a"])))
    assert seen and min(seen) > 0
    assert gc.get_freeze_count() == 0
    # Also when the import fails half-way.
    monkeypatch.setattr(pipeline, "validate", lambda obj, *args: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        do_import(jsonl(problem()))
    assert gc.get_freeze_count() == 0


def test_steps_keep_their_offsets_into_raw(do_import):
    raw = "First 9 * 2 = 18.\n\n  Then it is 18.\nA: 18"
    do_import(jsonl(problem(), trace(trace_id="given", raw=raw, steps=["First 9 * 2 = 18.", "Then it is 18.", "absent"]),
                    trace(trace_id="parsed", raw=raw)))
    for tid in ("given", "parsed"):
        for step in Step.objects.filter(trace__trace_id=tid):
            if step.start is not None:
                assert raw[step.start:step.end] == step.text
    assert Step.objects.get(trace__trace_id="given", index=3).start is None


def test_raw_inserted_labels_reviews_and_history_are_complete_rows(study, django_user_model):
    import io

    from annotation.models import LabelHistory, StepLabel, TraceReview

    actor = django_user_model.objects.create(username="importer")
    labels = [
        {"step": 1, "verdict": "valid", "annotator": "alice", "skeleton_refs": [2, 1, 2], "confidence": 0.75},
        {"step": 2, "verdict": "invalid", "annotator": "alice", "note": "wrong sum"},
        {"step": 2, "verdict": "neutral", "annotator": "bob"},
    ]
    report = pipeline.import_stream(
        study, io.BytesIO(jsonl(problem(), trace(steps=["a", "b"], labels=labels, rating=7))), actor=actor
    )
    assert (report.labels_created, report.rejected) == (3, [])
    rows = {(lab.step.index, lab.annotator.username): lab for lab in StepLabel.objects.select_related("step", "annotator")}
    a1 = rows[(1, "alice")]
    assert (a1.kind, a1.judge_id, a1.verdict, a1.skeleton_refs, a1.confidence, a1.reason, a1.version) == (
        "human", None, "valid", [1, 2], 0.75, "", 1)
    assert (rows[(2, "alice")].reason, rows[(2, "bob")].verdict) == ("wrong sum", "neutral")
    assert all(lab.created_at == lab.updated_at for lab in rows.values())
    for h in LabelHistory.objects.select_related("label"):
        assert (h.kind, h.via, h.actor_id, h.before, h.step_id) == ("human", "import", actor.pk, None, h.label.step_id)
        assert h.after == pipeline.label_snapshot(h.label) and h.source_name == h.label.annotator.username
    assert LabelHistory.objects.count() == 3
    reviews = {r.annotator.username: r for r in TraceReview.objects.select_related("annotator")}
    assert [(r.version, r.complete, r.rating, r.flag, r.skipped, r.updated_via) for r in
            (reviews["alice"], reviews["bob"])] == [(1, True, 7.0, "", False, ""), (1, False, None, "", False, "")]


def test_bulk_inserts_bypass_the_debug_query_log_and_keep_djangos_errors(do_import, settings):
    """Under DEBUG (a development checkout) the debug cursor would log every 200-row INSERT with its values
    spelled out, running a SELECT QUOTE(...) for each on SQLite: the bulk rows go through the backend's own
    cursor instead. What is stored is the same, and a database error is still Django's."""
    from django.db import IntegrityError, reset_queries, transaction

    settings.DEBUG = True
    paragraphs = "\n\n".join(f"Step {k}: {k} + 1 = {k + 1}." for k in range(450))
    reset_queries()
    assert do_import(jsonl(problem(), trace(trace_id="t", raw=f"<think>\n{paragraphs}\n</think>\n\nThe answer is 18.")
                           )).committed
    t = Trace.objects.get(trace_id="t")
    assert t.n_thought_steps == 450 == Step.objects.filter(trace=t, channel="thought").count()
    logged = [q["sql"] for q in connection.queries]
    assert logged and not any("INSERT INTO \"annotation_step\"" in sql for sql in logged)
    row = Step.objects.filter(trace=t, index=1).values_list("trace_id", "index", "text", "start", "end", "channel")
    with pytest.raises(IntegrityError), transaction.atomic():  # (trace, index) is unique
        bulk.insert_rows(Step, ["trace_id", "index", "text", "start", "end", "channel"], list(row))


def test_new_rows_are_never_looked_up_again_whatever_was_imported_before(do_import, monkeypatch):
    """Keys are handed out before the rows are written: the only look-up per batch is whether its trace ids
    exist already (by their own keys), never the new problems, skeletons, traces, steps or labels -- whose
    look-up read every label imported so far on PostgreSQL, at every batch (issue 33)."""
    looked_up: list[tuple[str, str]] = []
    real = bulk.rows_by_key

    def spy(model, key, values, columns, **where):
        looked_up.append((model.__name__, key))
        return real(model, key, values, columns, **where)

    monkeypatch.setattr(pipeline, "rows_by_key", spy)
    monkeypatch.setattr(pipeline, "BATCH_TRACES", 2)
    labels = [{"step": k, "verdict": "valid", "annotator": who} for who in ("ann", "bob") for k in (1, 2)]
    records = [problem(f"p{k}", skeleton=[{"text": "9 * 2 = 18"}], skeleton_status="approved") for k in range(3)]
    records += [trace(f"p{k}", trace_id=f"t{k}", steps=["9 * 2 = 18", "so 18"], answer="18", labels=labels)
                for k in range(3)]
    report = do_import(jsonl(*records))
    assert (report.traces_created, report.labels_created, report.rejected) == (3, 12, [])
    assert set(looked_up) == {("Trace", "trace_id")}
    from annotation.models import LabelHistory, StepLabel

    for label in StepLabel.objects.select_related("step__trace", "annotator"):
        history = LabelHistory.objects.get(label=label)
        assert (history.step_id, history.source_name) == (label.step_id, label.annotator.username)
    for k in range(3):
        skeleton = Skeleton.objects.get(problem__problem_id=f"p{k}")
        assert Problem.objects.get(problem_id=f"p{k}").approved_skeleton_id == skeleton.pk


def test_keys_handed_out_are_never_handed_out_again_nor_taken_by_later_rows(study):
    first = bulk.new_pks(Problem, 3)
    assert len(set(first)) == 3
    bulk.insert_rows(Problem, ["id", "study", "problem_id", "statement", "gold_answer", "l_gold", "created_at",
                               "meta", "tags", "domain"],
                     [(pk, study.pk, f"p{pk}", "s", "1", 0, study.created_at, {}, [], "") for pk in first])
    later = Problem.objects.create(study=study, problem_id="later", statement="s", gold_answer="1")
    second = bulk.new_pks(Problem, 2)
    assert later.pk > max(first) and min(second) > later.pk
    assert bulk.new_pks(Problem, 0) == []


def test_a_skeleton_for_a_problem_imported_before_without_one_is_linked_when_approved(do_import):
    do_import(jsonl(problem("p1"), problem("p2")))
    skeleton = [{"text": "9 * 2 = 18", "check": "9*2=18"}, {"text": "so 18"}]
    report = do_import(jsonl(problem("p1", skeleton=skeleton), problem("p2", skeleton=skeleton, skeleton_status="draft"),
                             problem("p3", skeleton=skeleton)))
    assert (report.problems_created, report.rejected) == (1, [])
    p1, p2, p3 = (Problem.objects.get(problem_id=p) for p in ("p1", "p2", "p3"))
    for p in (p1, p3):
        assert (p.approved_skeleton.problem_id, p.approved_skeleton.status, p.l_gold) == (p.pk, "approved", 2)
        assert list(p.approved_skeleton.steps.values_list("position", "text")) == [(1, "9 * 2 = 18"), (2, "so 18")]
    assert (p2.approved_skeleton, p2.l_gold) == (None, 0)
    assert Skeleton.objects.get(problem=p2).status == "draft"
