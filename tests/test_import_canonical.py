"""The canonical ReasonAudit JSONL import (docs/import-format.md): happy paths,
idempotency and every kind of bad input, through ``import_stream``."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from annotation.models import (
    LabelHistory,
    Membership,
    Problem,
    Skeleton,
    SkeletonStep,
    Step,
    StepLabel,
    Study,
    Trace,
    TraceReview,
)
from tests.conftest import jsonl

pytestmark = pytest.mark.django_db

User = get_user_model()


def problem(pid: str = "p1", **kw) -> dict:
    rec = {"kind": "problem", "problem_id": pid, "statement": f"Statement of {pid}?", "gold_answer": "18"}
    rec.update(kw)
    return rec


def trace(pid: str = "p1", **kw) -> dict:
    rec = {"kind": "trace", "problem_id": pid, "model": "m1"}
    rec.update(kw)
    return rec


SKELETON = [
    {"text": "Eggs left to sell: 16 - 3 - 4 = 9", "check": "16-3-4=9"},
    {"text": "Daily income: 9 * 2 = 18 dollars", "check": "9*2=18"},
    {"text": "So she makes 18 dollars"},
]


def db_counts() -> dict[str, int]:
    return {
        m.__name__: m.objects.count()
        for m in (Problem, Skeleton, SkeletonStep, Trace, Step, StepLabel, TraceReview, LabelHistory, Membership, User)
    }


def assert_nothing_written() -> None:
    assert Problem.objects.count() == 0
    assert Trace.objects.count() == 0
    assert Step.objects.count() == 0
    assert StepLabel.objects.count() == 0


# --- happy path -----------------------------------------------------------------


def test_it_imports_problems_with_approved_and_draft_skeletons(do_import):
    report = do_import(
        jsonl(
            problem("p1", skeleton=SKELETON, domain="arithmetic", tags=["gsm8k"]),
            problem("p2", skeleton=SKELETON[:2], skeleton_status="draft"),
            problem("p3"),
        )
    )
    assert report.rejected == []
    assert report.committed is True
    assert (report.read, report.problems_created) == (3, 3)

    p1 = Problem.objects.get(problem_id="p1")
    assert p1.l_gold == 3
    assert p1.approved_skeleton is not None
    assert p1.approved_skeleton.status == Skeleton.Status.APPROVED
    assert p1.approved_skeleton.version == 1
    assert p1.approved_skeleton.approved_at is not None
    assert p1.domain == "arithmetic" and p1.tags == ["gsm8k"]
    steps = list(p1.approved_skeleton.steps.order_by("position").values_list("position", "text", "check_expr"))
    assert steps == [
        (1, "Eggs left to sell: 16 - 3 - 4 = 9", "16-3-4=9"),
        (2, "Daily income: 9 * 2 = 18 dollars", "9*2=18"),
        (3, "So she makes 18 dollars", ""),
    ]

    p2 = Problem.objects.get(problem_id="p2")
    assert p2.approved_skeleton is None
    assert p2.l_gold == 0
    draft = p2.skeletons.get()
    assert draft.status == Skeleton.Status.DRAFT and draft.approved_at is None
    assert draft.steps.count() == 2

    p3 = Problem.objects.get(problem_id="p3")
    assert p3.skeletons.count() == 0 and p3.approved_skeleton is None and p3.l_gold == 0


def test_it_imports_a_numeric_gold_answer_as_text(do_import):
    report = do_import(jsonl(problem("p1", gold_answer=1200)))
    assert report.rejected == []
    assert Problem.objects.get().gold_answer == "1200"


def test_it_imports_given_steps_with_offsets_into_raw(do_import):
    raw = "Eggs: 16 - 3 - 4 = 9\nMoney: 9 * 2 = 18\nA: 18"
    report = do_import(
        jsonl(problem(), trace(trace_id="t1", raw=raw, steps=["Eggs: 16 - 3 - 4 = 9", "  Money: 9 * 2 = 18 "]))
    )
    assert report.rejected == []
    assert (report.traces_created, report.steps_created) == (1, 2)
    t = Trace.objects.get()
    assert t.trace_id == "t1" and t.n_steps == 2 and t.empty is False
    assert t.answer == "18"  # extracted from raw: no "answer" given
    steps = list(t.steps.order_by("index"))
    assert [s.text for s in steps] == ["Eggs: 16 - 3 - 4 = 9", "Money: 9 * 2 = 18"]
    for s in steps:
        assert raw[s.start : s.end] == s.text


def test_it_imports_given_steps_without_raw_with_null_offsets(do_import):
    do_import(jsonl(problem(), trace(steps=["a = 1", "b = 2"], answer="18")))
    t = Trace.objects.get()
    assert t.raw == "a = 1\nb = 2"
    assert list(t.steps.values_list("index", "text", "start", "end")) == [(1, "a = 1", None, None), (2, "b = 2", None, None)]


def test_it_segments_raw_by_lines_and_drops_the_final_answer_line(do_import):
    raw = "Janet has 16 - 3 - 4 = 9 eggs.\n\n  She makes 9 * 2 = 18 dollars.\nA: 18\n"
    report = do_import(jsonl(problem(), trace(raw=raw)))
    assert report.rejected == []
    t = Trace.objects.get()
    assert t.raw == raw
    assert t.answer == "18"
    steps = list(t.steps.order_by("index"))
    assert [s.text for s in steps] == ["Janet has 16 - 3 - 4 = 9 eggs.", "She makes 9 * 2 = 18 dollars."]
    assert t.n_steps == 2
    for s in steps:
        assert raw[s.start : s.end] == s.text


@pytest.mark.parametrize(
    ("segmenter", "raw", "expected", "answer"),
    [
        ("paragraphs", "First we add.\nStill first.\n\nThen we multiply.\n\nThe answer is 18", ["First we add.\nStill first.", "Then we multiply."], "18"),
        ("markers", "Step 1: add 2 and 2.\nStep 2: multiply by 3.\n#### 12", ["Step 1: add 2 and 2.", "Step 2: multiply by 3."], "12"),
        ("sentences", "We add 2 and 2. That is 4. Times 3 is 12.\nA: 12", ["We add 2 and 2.", "That is 4.", "Times 3 is 12."], "12"),
    ],
)
def test_it_segments_raw_with_the_studys_segmenter(do_import, study, segmenter, raw, expected, answer):
    study.segmenter = segmenter
    study.save()
    report = do_import(jsonl(problem(gold_answer="12"), trace(raw=raw)))
    assert report.rejected == []
    t = Trace.objects.get()
    steps = list(t.steps.order_by("index"))
    assert [s.text for s in steps] == expected
    for s in steps:
        assert raw[s.start : s.end] == s.text
    assert t.answer == answer
    assert t.answer_correct is (answer == "12")


def test_it_splits_a_tagged_output_into_thought_reasoning_and_answer(do_import):
    raw = "<think>let me think about eggs</think>\n<Reasoning>\n16 - 3 - 4 = 9\n9 * 2 = 18\n</Reasoning>\n<Answer>18</Answer>"
    do_import(jsonl(problem(), trace(raw=raw)))
    t = Trace.objects.get()
    assert t.thought == "let me think about eggs"
    assert t.answer == "18"
    steps = list(t.steps.order_by("index"))
    # The thought is a channel of its own, segmented first; the answer channel's steps follow it.
    assert [(s.channel, s.text) for s in steps] == [
        ("thought", "let me think about eggs"), ("answer", "16 - 3 - 4 = 9"), ("answer", "9 * 2 = 18"),
    ]
    assert (t.n_steps, t.n_thought_steps) == (3, 1)
    for s in steps:
        assert t.channel_text(s.channel)[s.start : s.end] == s.text
    assert t.answer_correct is True


@pytest.mark.parametrize(
    ("raw", "answer"),
    [
        ("She makes 9 * 2 = 18.\nSo the value is \\boxed{18}.", "18"),
        ("She makes 9 * 2 = 18.\n#### 18", "18"),
        ("She makes 9 * 2 = 18.\nThe answer is 18", "18"),
        ("She makes 9 * 2 = 17 dollars.\nA: 17", "17"),
    ],
)
def test_it_extracts_the_answer_from_raw(do_import, raw, answer):
    do_import(jsonl(problem(), trace(raw=raw)))
    t = Trace.objects.get()
    assert t.answer == answer
    assert t.answer_correct is (answer == "18")
    assert t.answer_origin == Trace.AnswerOrigin.AUTOMATIC


def test_a_given_answer_wins_over_the_one_in_raw(do_import):
    do_import(jsonl(problem(), trace(raw="x = 1\nA: 17", answer=18)))
    t = Trace.objects.get()
    assert t.answer == "18"
    assert t.answer_correct is True


def test_an_imported_answer_correct_wins_but_the_automatic_check_still_runs(do_import):
    # Issue 23: the file's verdict wins, and the automatic one is kept beside
    # it (the demo read "Automatic check: undecided" for 18 against gold 18).
    do_import(jsonl(problem(), trace(raw="9 * 2 = 18\nA: 18", answer_correct=False)))
    t = Trace.objects.get()
    assert t.answer == "18"
    assert t.answer_correct is False
    assert t.answer_origin == Trace.AnswerOrigin.IMPORTED
    assert t.auto_answer_correct is True


def test_the_automatic_check_compares_answers_by_value(do_import):
    do_import(
        jsonl(
            problem(gold_answer="1200"),
            trace(trace_id="right", raw="It costs 1,200 dollars.", answer="1,200"),
            trace(trace_id="wrong", raw="It costs 1,300 dollars.", answer="1,300"),
        )
    )
    right, wrong = Trace.objects.get(trace_id="right"), Trace.objects.get(trace_id="wrong")
    assert (right.answer_correct, right.auto_answer_correct, right.answer_origin) == (True, True, "automatic")
    assert (wrong.answer_correct, wrong.auto_answer_correct, wrong.answer_origin) == (False, False, "automatic")


def test_without_a_gold_answer_the_answer_is_not_decided(do_import):
    do_import(jsonl(problem(gold_answer=""), trace(raw="x = 18\nA: 18")))
    t = Trace.objects.get()
    assert (t.answer_correct, t.auto_answer_correct, t.answer_origin) == (None, None, Trace.AnswerOrigin.NONE)


@pytest.mark.parametrize("body", [{"steps": []}, {"raw": ""}, {"raw": "  \n\n "}, {"steps": [], "raw": ""}])
def test_an_empty_trace_imports_with_zero_steps_flagged_empty(do_import, body):
    report = do_import(jsonl(problem(), trace(**body)))
    assert report.rejected == []
    assert report.traces_created == 1 and report.steps_created == 0
    t = Trace.objects.get()
    assert t.n_steps == 0 and t.empty is True
    assert Step.objects.count() == 0


def test_unknown_keys_are_kept_in_meta(do_import):
    do_import(
        jsonl(
            problem(source="gsm8k", meta={"split": "test"}),
            trace(steps=["a"], temperature=0.7, meta={"seed": 3}),
        )
    )
    assert Problem.objects.get().meta == {"split": "test", "source": "gsm8k"}
    assert Trace.objects.get().meta == {"seed": 3, "temperature": 0.7}


def test_labels_become_human_labels_reviews_and_history(do_import, study, member):
    report = do_import(
        jsonl(
            problem(skeleton=SKELETON),
            trace(
                trace_id="t1",
                steps=["s1", "s2"],
                labels=[
                    {"step": 1, "verdict": "valid", "skeleton_refs": [2, 1, 1], "annotator": "alice", "confidence": 0.9},
                    {"step": 2, "verdict": "invalid", "annotator": "alice", "note": "wrong product"},
                    {"step": 2, "verdict": "neutral", "annotator": "bob"},
                ],
                rating=6.5,
            ),
        )
    )
    assert report.rejected == []
    assert report.labels_created == 3
    t = Trace.objects.get()
    labels = {
        (lab.annotator.username, lab.step.index): lab
        for lab in StepLabel.objects.select_related("annotator", "step")
    }
    assert set(labels) == {("alice", 1), ("alice", 2), ("bob", 2)}
    assert all(lab.kind == StepLabel.Kind.HUMAN for lab in labels.values())
    assert labels[("alice", 1)].verdict == "valid"
    assert labels[("alice", 1)].skeleton_refs == [1, 2]
    assert labels[("alice", 1)].confidence == 0.9
    assert labels[("alice", 2)].verdict == "invalid" and labels[("alice", 2)].reason == "wrong product"
    assert labels[("bob", 2)].verdict == "neutral"
    # alice is the existing member; her account is reused, not replaced.
    assert labels[("alice", 1)].annotator == member

    reviews = {r.annotator.username: r for r in TraceReview.objects.filter(trace=t).select_related("annotator")}
    assert reviews["alice"].complete is True  # both steps labelled
    assert reviews["alice"].rating == 6.5  # the first annotator gave the rating
    assert reviews["bob"].complete is False  # one of two steps
    assert reviews["bob"].rating is None

    history = list(LabelHistory.objects.all())
    assert len(history) == 3
    assert all(h.before is None and h.via == "import" and h.kind == "human" for h in history)
    assert {(h.source_name, h.after["verdict"]) for h in history} == {
        ("alice", "valid"),
        ("alice", "invalid"),
        ("bob", "neutral"),
    }


def test_a_missing_annotator_is_created_inactive_with_a_membership(do_import, study):
    assert not User.objects.filter(username="carol").exists()
    do_import(jsonl(problem(), trace(steps=["s1"], labels=[{"step": 1, "verdict": "valid", "annotator": "carol"}])))
    carol = User.objects.get(username="carol")
    assert carol.is_active is False
    assert not carol.has_usable_password()
    membership = Membership.objects.get(study=study, user=carol)
    assert membership.role == Membership.Role.ANNOTATOR


def test_an_existing_member_keeps_their_role(do_import, study, owner):
    do_import(jsonl(problem(), trace(steps=["s1"], labels=[{"step": 1, "verdict": "valid", "annotator": owner.username}])))
    assert Membership.objects.get(study=study, user=owner).role == Membership.Role.OWNER


def test_traces_may_come_before_their_problem(do_import):
    report = do_import(
        jsonl(
            trace("p2", trace_id="a", steps=["x"]),
            trace("p1", trace_id="b", steps=["y"]),
            problem("p1"),
            trace("p1", trace_id="c", steps=["z"]),
            problem("p2"),
        )
    )
    assert report.rejected == []
    assert (report.problems_created, report.traces_created) == (2, 3)
    assert {t.trace_id: t.problem.problem_id for t in Trace.objects.select_related("problem")} == {
        "a": "p2",
        "b": "p1",
        "c": "p1",
    }


def test_a_trace_may_reference_a_problem_from_an_earlier_import(do_import):
    do_import(jsonl(problem("p1", gold_answer="7")))
    report = do_import(jsonl(trace("p1", trace_id="t1", steps=["3 + 4 = 7"], answer="7")))
    assert report.rejected == []
    assert (report.problems_created, report.traces_created) == (0, 1)
    t = Trace.objects.get()
    assert t.problem == Problem.objects.get(problem_id="p1")
    assert t.answer_correct is True  # the gold answer of the stored problem


def test_problems_are_scoped_to_their_study(do_import, owner):
    other = Study.objects.create(name="Study B")
    do_import(jsonl(problem("p1")), target=other)
    report = do_import(jsonl(trace("p1", steps=["x"])))
    assert [r["line"] for r in report.rejected] == [1]
    assert "p1" in report.rejected[0]["reason"]


def test_a_second_problem_line_adds_a_skeleton_to_a_stored_problem(do_import):
    do_import(jsonl(problem("p1")))
    report = do_import(jsonl(problem("p1", skeleton=SKELETON[:2])))
    assert report.rejected == []
    p = Problem.objects.get()
    assert p.l_gold == 2 and p.approved_skeleton is not None


# --- idempotency ----------------------------------------------------------------

FULL_FILE = jsonl(
    problem("p1", skeleton=SKELETON),
    problem("p2", skeleton=SKELETON[:1], skeleton_status="draft"),
    trace("p1", trace_id="t1", raw="a\nb\nA: 18", labels=[{"step": 1, "verdict": "valid", "annotator": "alice"}], rating=3),
    trace("p1", model="m2", steps=["c", "d"], answer="17"),
    trace("p2", raw=""),
    trace("p2", steps=["e"], labels=[{"step": 1, "verdict": "invalid", "annotator": "newbie"}]),
)


def test_importing_the_same_file_twice_creates_nothing_the_second_time(do_import):
    first = do_import(FULL_FILE)
    assert first.rejected == []
    assert (first.problems_created, first.traces_created, first.steps_created, first.labels_created) == (2, 4, 5, 2)
    before = db_counts()
    second = do_import(FULL_FILE)
    assert second.rejected == [] and second.committed is True
    assert (second.problems_created, second.traces_created, second.steps_created) == (0, 0, 0)
    assert (second.labels_created, second.labels_updated) == (0, 0)
    assert second.unchanged == 6
    assert second.read == 6
    assert db_counts() == before


def test_a_trace_without_trace_id_is_identified_by_problem_model_and_steps(do_import):
    line = trace(steps=["x = 1", "y = 2"])
    report = do_import(jsonl(problem(), line, line))
    assert report.traces_created == 1 and report.unchanged == 1
    t = Trace.objects.get()
    assert t.trace_id.startswith("p1/m1/")
    # Other steps or another model are another trace.
    report = do_import(jsonl(line, trace(steps=["x = 1", "y = 3"]), trace(model="m2", steps=["x = 1", "y = 2"])))
    assert report.rejected == []
    assert (report.traces_created, report.unchanged) == (2, 1)
    assert Trace.objects.count() == 3


def test_reimporting_with_an_extra_label_adds_only_that_label(do_import):
    one = [{"step": 1, "verdict": "valid", "annotator": "alice"}]
    two = one + [{"step": 2, "verdict": "invalid", "annotator": "alice"}]
    do_import(jsonl(problem(), trace(trace_id="t1", steps=["a", "b"], labels=one)))
    assert StepLabel.objects.count() == 1 and LabelHistory.objects.count() == 1
    report = do_import(jsonl(trace(trace_id="t1", steps=["a", "b"], labels=two)))
    assert report.rejected == []
    assert (report.labels_created, report.labels_updated, report.traces_created, report.unchanged) == (1, 0, 0, 1)
    assert sorted(StepLabel.objects.values_list("step__index", "verdict")) == [(1, "valid"), (2, "invalid")]
    assert LabelHistory.objects.count() == 2
    new = LabelHistory.objects.get(step__index=2)
    assert new.before is None and new.after["verdict"] == "invalid"


def test_reimporting_the_missing_labels_completes_the_review(do_import):
    one = [{"step": 1, "verdict": "valid", "annotator": "alice"}]
    two = one + [{"step": 2, "verdict": "invalid", "annotator": "alice"}]
    do_import(jsonl(problem(), trace(trace_id="t1", steps=["a", "b"], labels=one)))
    assert TraceReview.objects.get().complete is False
    do_import(jsonl(trace(trace_id="t1", steps=["a", "b"], labels=two)))
    assert TraceReview.objects.get().complete is True


def test_reimporting_with_a_new_annotator_gives_them_a_review(do_import):
    do_import(jsonl(problem(), trace(trace_id="t1", steps=["a"], labels=[{"step": 1, "verdict": "valid", "annotator": "alice"}])))
    report = do_import(
        jsonl(trace(trace_id="t1", steps=["a"], labels=[{"step": 1, "verdict": "invalid", "annotator": "dave"}], rating=2))
    )
    assert report.labels_created == 1
    review = TraceReview.objects.get(annotator__username="dave")
    assert review.complete is True and review.rating == 2
    assert TraceReview.objects.get(annotator__username="alice").complete is True


def test_a_trace_repeated_in_one_file_adds_its_labels_and_rating(do_import):
    # export --what traces gives a second annotator's rating as a repeated trace line.
    labels = [{"step": 1, "verdict": "valid", "annotator": "alice"}, {"step": 1, "verdict": "invalid", "annotator": "dave"}]
    report = do_import(jsonl(problem(), trace(trace_id="t1", steps=["a"], labels=labels, rating=9),
                             trace(trace_id="t1", steps=["a"], labels=labels[1:], rating=2),
                             trace(trace_id="t1", steps=["a"], labels=[{"step": 1, "verdict": "neutral",
                                                                        "annotator": "erin"}])))
    assert report.committed and report.traces_created == 1 and report.unchanged == 2
    assert report.labels_created == 3
    assert dict(TraceReview.objects.values_list("annotator__username", "rating")) == {"alice": 9, "dave": 2,
                                                                                      "erin": None}
    assert StepLabel.objects.get(annotator__username="dave").version == 1  # unchanged, not rewritten


def test_reimporting_a_changed_verdict_updates_it_with_history(do_import):
    do_import(jsonl(problem(), trace(trace_id="t1", steps=["a"], labels=[{"step": 1, "verdict": "valid", "annotator": "alice"}])))
    label = StepLabel.objects.get()
    report = do_import(jsonl(trace(trace_id="t1", steps=["a"], labels=[{"step": 1, "verdict": "invalid", "annotator": "alice"}])))
    assert report.rejected == []
    assert (report.labels_created, report.labels_updated) == (0, 1)
    label.refresh_from_db()
    assert StepLabel.objects.count() == 1
    assert label.verdict == "invalid" and label.version == 2
    change = LabelHistory.objects.order_by("pk").last()
    assert change.label == label
    assert change.before["verdict"] == "valid" and change.after["verdict"] == "invalid"
    assert change.via == "import"
    assert LabelHistory.objects.count() == 2


def test_reimporting_an_unchanged_label_writes_no_history(do_import):
    data = jsonl(problem(), trace(trace_id="t1", steps=["a"], labels=[{"step": 1, "verdict": "valid", "annotator": "alice"}]))
    do_import(data)
    report = do_import(data)
    assert (report.labels_created, report.labels_updated) == (0, 0)
    assert LabelHistory.objects.count() == 1


# --- bad input: one reason per line, nothing written ----------------------------


def assert_rejected(report, line: int, *words: str) -> None:
    assert report.committed is False
    assert [r["line"] for r in report.rejected] == [line], report.rejected
    reason = report.rejected[0]["reason"]
    for word in words:
        assert word.lower() in reason.lower(), reason
    assert (report.problems_created, report.traces_created, report.steps_created) == (0, 0, 0)
    assert_nothing_written()


def test_it_rejects_a_line_that_is_not_json(do_import):
    report = do_import(jsonl(problem("p1"), "{not json", trace(steps=["x"])))
    assert_rejected(report, 2, "not valid JSON")


def test_it_rejects_a_line_that_is_not_utf8(do_import):
    data = jsonl(problem("p1")) + b'{"kind": "problem", "problem_id": "\xff\xfe", "statement": "s", "gold_answer": "1"}\n'
    report = do_import(data)
    assert_rejected(report, 2, "UTF-8")


@pytest.mark.parametrize(("line", "kind"), [("[1, 2]", "list"), ("42", "int"), ('"text"', "str"), ("null", "NoneType")])
def test_it_rejects_a_line_that_is_not_a_json_object(do_import, line, kind):
    report = do_import(jsonl(problem("p1"), line))
    assert_rejected(report, 2, "JSON object", kind)


@pytest.mark.parametrize(
    ("record", "key"),
    [
        ({"kind": "problem", "statement": "s", "gold_answer": "1"}, "problem_id"),
        ({"kind": "problem", "problem_id": "p9", "gold_answer": "1"}, "statement"),
        ({"kind": "problem", "problem_id": "p9", "statement": "s"}, "gold_answer"),
        ({"kind": "trace", "model": "m", "steps": ["x"]}, "problem_id"),
        ({"kind": "trace", "problem_id": "p1", "steps": ["x"]}, "model"),
        ({"problem_id": "p1", "statement": "s", "gold_answer": "1"}, "kind"),
    ],
)
def test_it_rejects_a_record_missing_a_required_key(do_import, record, key):
    report = do_import(jsonl(problem("p1"), trace(steps=["fine"]), record))
    assert_rejected(report, 3, f'missing "{key}"')


def test_it_rejects_a_trace_with_neither_raw_nor_steps(do_import):
    report = do_import(jsonl(problem("p1"), trace()))
    assert_rejected(report, 2, '"raw"', '"steps"')


@pytest.mark.parametrize("kind", ["solution", ["problem"], {"a": 1}, 3])
def test_it_rejects_an_unknown_kind(do_import, kind):
    report = do_import(jsonl(problem("p1"), {"kind": kind, "problem_id": "p1"}))
    assert_rejected(report, 2, "unknown kind")


def test_it_rejects_a_trace_whose_problem_is_nowhere(do_import):
    report = do_import(jsonl(problem("p1"), trace("p1", steps=["x"]), trace("ghost", steps=["y"])))
    assert_rejected(report, 3, "ghost", "neither in the file nor in the study")


def test_it_rejects_a_duplicate_problem_id_with_a_different_statement(do_import):
    report = do_import(jsonl(problem("p1"), problem("p1", statement="Something else entirely?")))
    assert_rejected(report, 2, "p1", "different statement")


def test_it_rejects_a_problem_id_already_in_the_study_with_a_different_statement(do_import):
    do_import(jsonl(problem("p1")))
    report = do_import(jsonl(problem("p2"), problem("p1", statement="Changed?")))
    assert report.committed is False
    assert [r["line"] for r in report.rejected] == [2]
    assert "different statement" in report.rejected[0]["reason"]
    assert list(Problem.objects.values_list("problem_id", flat=True)) == ["p1"]


def test_a_duplicate_problem_with_the_same_statement_is_fine(do_import):
    report = do_import(jsonl(problem("p1"), problem("p1")))
    assert report.rejected == []
    assert (report.problems_created, report.unchanged) == (1, 1)
    assert Problem.objects.count() == 1


def test_it_rejects_a_label_on_a_step_that_does_not_exist(do_import):
    labels = [{"step": 3, "verdict": "valid", "annotator": "alice"}]
    report = do_import(jsonl(problem(), trace(steps=["a", "b"], labels=labels)))
    assert_rejected(report, 2, "step 3", "2 steps")


def test_it_rejects_a_label_with_step_zero(do_import):
    report = do_import(jsonl(problem(), trace(steps=["a"], labels=[{"step": 0, "verdict": "valid", "annotator": "a"}])))
    assert_rejected(report, 2, "labels.0.step")


def test_it_rejects_an_invalid_verdict(do_import):
    labels = [{"step": 1, "verdict": "correct", "annotator": "alice"}]
    report = do_import(jsonl(problem(), trace(steps=["a"], labels=labels)))
    assert_rejected(report, 2, "verdict")
    assert StepLabel.objects.count() == 0
    assert not User.objects.filter(username="alice", is_active=False).exists()


def test_it_rejects_two_labels_from_one_annotator_on_one_step(do_import):
    labels = [{"step": 1, "verdict": "valid", "annotator": "alice"}, {"step": 1, "verdict": "invalid", "annotator": "alice"}]
    report = do_import(jsonl(problem(), trace(steps=["a"], labels=labels)))
    assert_rejected(report, 2, "two labels", "alice")


def test_it_rejects_a_rating_without_labels(do_import):
    report = do_import(jsonl(problem(), trace(steps=["a"], rating=5)))
    assert_rejected(report, 2, "rating")


def test_it_rejects_a_rating_out_of_range(do_import):
    labels = [{"step": 1, "verdict": "valid", "annotator": "alice"}]
    report = do_import(jsonl(problem(), trace(steps=["a"], labels=labels, rating=11)))
    assert_rejected(report, 2, "rating")


def test_it_rejects_an_empty_step_in_given_steps(do_import):
    report = do_import(jsonl(problem(), trace(steps=["a", "  "])))
    assert_rejected(report, 2, "step 2 is empty")


def test_it_refuses_a_file_over_the_size_limit(do_import, settings):
    data = jsonl(problem(), trace(steps=["a"]))
    settings.IMPORT_MAX_BYTES = len(data) - 1
    report = do_import(data)
    assert_rejected(report, 0, "over the import limit", f"{len(data) - 1:,}")
    assert report.read == 0
    settings.IMPORT_MAX_BYTES = len(data)
    assert do_import(data).committed is True


def test_it_refuses_an_empty_file(do_import):
    report = do_import(b"")
    assert_rejected(report, 0, "empty")


def test_it_refuses_a_file_with_only_blank_lines(do_import):
    report = do_import(b"\n   \n\t\n\r\n")
    assert_rejected(report, 0, "no records")


def test_it_rejects_a_trace_id_reimported_with_different_steps(do_import):
    do_import(jsonl(problem(), trace(trace_id="t1", steps=["a", "b"])))
    report = do_import(jsonl(problem("p2"), trace(trace_id="t1", steps=["a", "c"])))
    assert report.committed is False
    assert [r["line"] for r in report.rejected] == [2]
    assert 't1' in report.rejected[0]["reason"] and "different steps" in report.rejected[0]["reason"]
    assert list(Step.objects.order_by("index").values_list("text", flat=True)) == ["a", "b"]
    assert not Problem.objects.filter(problem_id="p2").exists()


def test_it_rejects_a_trace_id_repeated_in_one_file_with_different_steps(do_import):
    report = do_import(jsonl(problem(), trace(trace_id="t1", steps=["a"]), trace(trace_id="t1", steps=["b"])))
    assert_rejected(report, 3, "t1", "different steps")


def test_every_bad_line_is_reported_sorted_by_line(do_import):
    report = do_import(
        jsonl(
            trace("ghost", steps=["x"]),  # 1: problem nowhere (found only at the end)
            problem("p1"),  # 2: fine
            "not json",  # 3
            {"kind": "problem", "problem_id": "p2", "statement": "s"},  # 4: no gold_answer
            trace("p1", steps=["a"], labels=[{"step": 1, "verdict": "maybe", "annotator": "x"}]),  # 5
            "[]",  # 6
            trace("p1", steps=["b"]),  # 7: fine
            {"kind": "rubric"},  # 8
        )
    )
    assert [r["line"] for r in report.rejected] == [1, 3, 4, 5, 6, 8]
    reasons = {r["line"]: r["reason"] for r in report.rejected}
    assert "ghost" in reasons[1]
    assert "JSON" in reasons[3]
    assert 'missing "gold_answer"' in reasons[4]
    assert "verdict" in reasons[5]
    assert "object" in reasons[6]
    assert "rubric" in reasons[8]
    assert report.read == 8
    assert_nothing_written()


def test_a_trace_id_conflict_is_reported_even_after_an_earlier_bad_line(do_import):
    do_import(jsonl(problem(), trace(trace_id="t1", steps=["a"])))
    report = do_import(jsonl("not json", trace(trace_id="t1", steps=["changed"])))
    assert report.committed is False
    assert [r["line"] for r in report.rejected] == [1, 2]
    assert "different steps" in report.rejected[1]["reason"]


def test_skip_invalid_keeps_the_good_lines_and_reports_the_bad_ones(do_import):
    report = do_import(
        jsonl(
            problem("p1"),
            "{oops",
            trace("p1", trace_id="good", steps=["a", "b"]),
            trace("ghost", steps=["x"]),
            trace("p1", trace_id="bad", steps=["a"], labels=[{"step": 2, "verdict": "valid", "annotator": "z"}]),
        ),
        skip_invalid=True,
    )
    assert report.committed is True
    assert [r["line"] for r in report.rejected] == [2, 4, 5]
    assert (report.problems_created, report.traces_created, report.steps_created) == (1, 1, 2)
    assert list(Trace.objects.values_list("trace_id", flat=True)) == ["good"]
    assert Step.objects.count() == 2


def test_skip_invalid_drops_a_conflicting_trace_id_but_keeps_the_rest(do_import):
    do_import(jsonl(problem(), trace(trace_id="t1", steps=["a"])))
    report = do_import(jsonl(trace(trace_id="t1", steps=["b"]), trace(trace_id="t2", steps=["c"])), skip_invalid=True)
    assert report.committed is True
    assert [r["line"] for r in report.rejected] == [1]
    assert sorted(Trace.objects.values_list("trace_id", flat=True)) == ["t1", "t2"]
    assert Step.objects.get(trace__trace_id="t1").text == "a"


def test_skip_invalid_drops_a_trace_whose_problem_was_rejected(do_import):
    report = do_import(
        jsonl(problem("p1"), problem("p1", statement="other?"), trace("p1", steps=["x"])),
        skip_invalid=True,
    )
    assert [r["line"] for r in report.rejected] == [2]
    assert Trace.objects.count() == 1 and Problem.objects.count() == 1


# --- batches: the same results when the file spans many write batches ------------


@pytest.fixture
def tiny_batches(monkeypatch):
    from annotation.importing import pipeline

    monkeypatch.setattr(pipeline, "BATCH_TRACES", 2)


def test_small_batches_import_the_same_file_the_same_way(do_import, tiny_batches):
    first = do_import(FULL_FILE)
    assert first.rejected == []
    assert (first.problems_created, first.traces_created, first.steps_created, first.labels_created) == (2, 4, 5, 2)
    before = db_counts()
    second = do_import(FULL_FILE)
    assert (second.traces_created, second.unchanged) == (0, 6)
    assert db_counts() == before


def test_small_batches_with_traces_before_problems_and_repeats(do_import, tiny_batches):
    records = [trace(f"p{k}", trace_id=f"t{k}", steps=[f"s{k}"]) for k in range(5)]
    records += [problem(f"p{k}") for k in range(5)]
    records += [trace("p0", trace_id="t0", steps=["s0"]), trace("p1", steps=["x", "y"]), trace("p1", steps=["x", "y"])]
    report = do_import(jsonl(*records))
    assert report.rejected == []
    assert (report.problems_created, report.traces_created, report.unchanged) == (5, 6, 2)
    assert Step.objects.count() == 7


def test_small_batches_report_conflicts_in_later_batches(do_import, tiny_batches):
    do_import(jsonl(problem(), trace(trace_id="t1", steps=["a"]), trace(trace_id="t2", steps=["b"])))
    report = do_import(
        jsonl("oops", *[trace(trace_id=f"n{k}", steps=[str(k)]) for k in range(4)], trace(trace_id="t2", steps=["c"]))
    )
    assert [r["line"] for r in report.rejected] == [1, 6]
    assert Trace.objects.count() == 2


def test_it_accepts_a_file_that_starts_with_a_utf8_bom(do_import):
    data = "\ufeff".encode() + jsonl({"kind": "problem", "problem_id": "p", "statement": "s", "gold_answer": "1"})
    report = do_import(data)
    assert report.committed and report.problems_created == 1


@pytest.mark.parametrize(("line", "fmt"), [
    ({"question": "Ann has 2 apples?", "ground_truth": "2 #### 2", "model-a": {"solution": "2"}}, "gsm8k-solutions"),
    ({"question": "Ann has 2 apples?", "answer": "2 #### 2"}, "gsm8k"),
    ({"prompt": "q", "completions": ["a"], "labels": [True]}, "trl-stepwise"),
    ({"id": "x", "problem": "q", "steps": ["a"], "label": -1}, "processbench"),
    ({"labeler": "l", "question": {}, "label": {}}, "prm800k"),
])
def test_a_line_of_another_format_is_refused_naming_that_format(do_import, line, fmt):
    """Issue 31: a GSM8K-solutions file uploaded as the default format said only 'missing "kind"' on every line."""
    report = do_import(jsonl(line))
    assert not report.committed
    reason = str(report.rejected)
    assert 'missing "kind"' in reason and f"import the file as {fmt}" in reason


def test_a_line_without_kind_of_no_known_format_gets_no_hint(do_import):
    report = do_import(jsonl({"text": "hello"}))
    reason = str(report.rejected)
    assert 'missing "kind"' in reason and "looks like" not in reason


def test_a_binary_file_is_refused_once_saying_what_it_is(do_import):
    """Issue 31: a PNG uploaded by mistake was "not valid UTF-8 (byte 0)" on each of its binary lines."""
    png = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\n\xff\xfe\n\x00\x01\x02\n"
    report = do_import(png)
    assert not report.committed and len(report.rejected) == 1
    assert "this file is a PNG image, not JSON Lines" in str(report.rejected)
