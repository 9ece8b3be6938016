"""Adapters from public dataset shapes (docs/import-format.md, "Adapters"):
GSM8K (problems and the OpenAI example model solutions), PRM800K,
ProcessBench and TRL stepwise supervision."""

from __future__ import annotations

import json
import re
from itertools import islice
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model

from annotation.importing.adapters import PROCESSBENCH_ANNOTATOR, TRL_ANNOTATOR
from annotation.models import Problem, Step, StepLabel, Trace, TraceReview
from tests.conftest import jsonl

pytestmark = pytest.mark.django_db

from tests.data_paths import GSM8K_SOLUTIONS as SOLUTIONS  # noqa: E402
from tests.data_paths import GSM8K_TEST_HEAD as TEST  # noqa: E402

User = get_user_model()



def head(path: Path, n: int) -> bytes:
    with path.open("rb") as fh:
        return b"".join(islice(fh, n))


def verdicts(trace: Trace, annotator: str) -> dict[int, str]:
    return dict(
        StepLabel.objects.filter(step__trace=trace, kind="human", annotator__username=annotator).values_list(
            "step__index", "verdict"
        )
    )


# --- gsm8k-solutions --------------------------------------------------------------

MODELS = ("6b_finetuning", "6b_verification", "175b_finetuning", "175b_verification")


def test_gsm8k_solutions_imports_problems_skeletons_and_four_traces_each(do_import):
    data = head(SOLUTIONS, 3)
    rows = [json.loads(line) for line in data.splitlines()]
    report = do_import(data, "gsm8k-solutions")
    assert report.rejected == []
    assert report.read == 3
    assert (report.problems_created, report.traces_created) == (3, 12)

    assert sorted(Problem.objects.values_list("problem_id", flat=True)) == [
        "gsm8k-test-0000",
        "gsm8k-test-0001",
        "gsm8k-test-0002",
    ]
    expected_steps = 0
    for n, row in enumerate(rows):
        p = Problem.objects.get(problem_id=f"gsm8k-test-{n:04d}")
        assert p.statement == row["question"]
        truth = row["ground_truth"].split("\n")
        assert truth[-1].startswith("A: ")
        assert p.gold_answer == truth[-1][3:].strip().replace(",", "")
        assert p.domain == "arithmetic" and p.tags == ["gsm8k"]
        # Every reference line before "A:" is a skeleton step; its <<...>> is the check.
        skeleton = list(p.approved_skeleton.steps.order_by("position"))
        assert p.l_gold == len(truth) - 1 == len(skeleton)
        for line, sk in zip(truth[:-1], skeleton, strict=True):
            calcs = re.findall(r"<<([^<>]*)>>", line)
            assert "<<" not in sk.text and ">>" not in sk.text
            assert sk.text == re.sub(r"<<[^<>]*>>", "", line).strip()
            assert sk.check_expr == calcs[-1]

        traces = {t.model: t for t in Trace.objects.filter(problem=p)}
        assert set(traces) == set(MODELS)
        for model in MODELS:
            t, sol = traces[model], row[model]
            assert t.trace_id == f"gsm8k-test-{n:04d}/{model}"
            assert t.raw == sol["solution"]
            lines = [ln.strip() for ln in sol["solution"].split("\n") if ln.strip()]
            assert lines[-1].startswith("A:")
            steps = list(t.steps.order_by("index"))
            assert [s.text for s in steps] == lines[:-1]
            assert all(t.raw[s.start : s.end] == s.text for s in steps)
            assert t.n_steps == len(lines) - 1
            assert t.answer == lines[-1][2:].strip()
            assert t.answer_correct is sol["is_correct"]
            assert t.answer_origin == Trace.AnswerOrigin.IMPORTED
            expected_steps += len(lines) - 1
    assert report.steps_created == expected_steps == Step.objects.count()


def test_gsm8k_solutions_reimport_is_idempotent(do_import):
    data = head(SOLUTIONS, 3)
    do_import(data, "gsm8k-solutions")
    counts = (Problem.objects.count(), Trace.objects.count(), Step.objects.count())
    report = do_import(data, "gsm8k-solutions")
    assert report.rejected == [] and report.committed
    assert (report.problems_created, report.traces_created, report.steps_created) == (0, 0, 0)
    assert report.unchanged == 15  # 3 problems + 12 traces
    assert (Problem.objects.count(), Trace.objects.count(), Step.objects.count()) == counts


def test_gsm8k_solutions_rejects_a_line_without_ground_truth(do_import):
    data = head(SOLUTIONS, 1) + jsonl({"question": "What?"})
    report = do_import(data, "gsm8k-solutions")
    assert report.rejected == [{"line": 2, "reason": 'missing "ground_truth"'}]
    assert Problem.objects.count() == 0 and Trace.objects.count() == 0


def test_gsm8k_solutions_rejects_a_reference_without_a_final_answer(do_import):
    report = do_import(jsonl({"question": "What?", "ground_truth": "1 + 1 = 2"}), "gsm8k-solutions")
    assert [r["line"] for r in report.rejected] == [1]
    assert "final answer" in report.rejected[0]["reason"]


# --- gsm8k ------------------------------------------------------------------------


def test_gsm8k_imports_problems_only_with_gold_from_the_hashes_line(do_import):
    data = head(TEST, 3)
    rows = [json.loads(line) for line in data.splitlines()]
    report = do_import(data, "gsm8k")
    assert report.rejected == []
    assert (report.problems_created, report.traces_created) == (3, 0)
    assert Trace.objects.count() == 0
    for n, row in enumerate(rows):
        p = Problem.objects.get(problem_id=f"gsm8k-test-{n:04d}")
        lines = row["answer"].split("\n")
        assert lines[-1].startswith("#### ")
        assert p.gold_answer == lines[-1][5:].strip().replace(",", "")
        assert p.statement == row["question"]
        texts = list(p.approved_skeleton.steps.order_by("position").values_list("text", flat=True))
        assert texts == [re.sub(r"<<[^<>]*>>", "", ln).strip() for ln in lines[:-1]]
    assert Problem.objects.get(problem_id="gsm8k-test-0000").gold_answer == "18"


def test_gsm8k_problems_and_model_solutions_share_problem_ids(do_import):
    do_import(head(TEST, 3), "gsm8k")
    report = do_import(head(SOLUTIONS, 3), "gsm8k-solutions")
    assert report.rejected == []
    assert (report.problems_created, report.traces_created, report.unchanged) == (0, 12, 3)
    assert Problem.objects.count() == 3


def test_gsm8k_rejects_an_answer_without_the_hashes_line(do_import):
    report = do_import(jsonl({"question": "Q?", "answer": "It is 4."}), "gsm8k")
    assert [r["line"] for r in report.rejected] == [1]
    assert Problem.objects.count() == 0


# --- prm800k ----------------------------------------------------------------------

PRM_QUESTION = "How many vertical asymptotes does the graph of $y=\\frac{2}{x^2+x-6}$ have?"


def completion(text: str, rating: int | None, flagged: bool = False) -> dict:
    return {"text": text, "rating": rating, "flagged": flagged}


PRM_PHASE2 = {
    "labeler": "340d89bc-f5b7-45e9-b272-909ba68ee363",
    "timestamp": "2022-07-17T16:56:51.323252",
    "generation": 9,
    "is_quality_control_question": False,
    "is_initial_screening_question": False,
    "question": {
        "problem": PRM_QUESTION,
        "ground_truth_answer": "2",
        "ground_truth_solution": "The denominator factors as (x-2)(x+3) ...",
        "pre_generated_steps": ["The denominator factors.", "Two zeros.", "# Answer\n\n2"],
        "pre_generated_answer": "2",
        "pre_generated_verifier_score": 0.98,
    },
    "label": {
        "steps": [
            {"completions": [completion("The denominator factors as $(x+3)(x-2)$.", 1)], "human_completion": None,
             "chosen_completion": 0},
            {"completions": [completion("So it is zero at $x=-3$ and $x=2$.", 0),
                             completion("Hmm.", -1)], "human_completion": None, "chosen_completion": 0},
            {"completions": [completion("# Answer\n\n2", 1)], "human_completion": None, "chosen_completion": 0},
        ],
        "total_time": 93211,
        "finish_reason": "solution",
    },
}

PRM_PHASE1 = {
    "labeler": "e90a38f3-3135-4465-87af-3e6322e3d772",
    "timestamp": "2022-06-01T10:00:00.000000",
    "generation": None,
    "is_quality_control_question": False,
    "is_initial_screening_question": False,
    "question": {"problem": "What is $1+2+3$?", "ground_truth_answer": "6"},
    "label": {
        "steps": [
            # chosen_completion picks the second completion
            {"completions": [completion("1+2 = 4.", -1), completion("1+2 = 3.", 1)], "human_completion": None,
             "chosen_completion": 1},
            # phase 1: the labeler rejected the model's step and wrote their own
            {"completions": [completion("3+3 = 7.", -1)],
             "human_completion": {"text": "3+3 = 6.", "rating": None, "source": "human", "flagged": False,
                                  "corrected_rating": None},
             "chosen_completion": None},
            # the last step: nothing chosen, the labeler found an error
            {"completions": [completion("So the sum is 6, or maybe", 0), completion("So the answer is 7.", -1),
                             completion("So it is 8.", -1)], "human_completion": None, "chosen_completion": None},
        ],
        "total_time": 5000,
        "finish_reason": "found_error",
    },
}


def test_prm800k_follows_the_chosen_completions_with_the_labelers_ratings(do_import):
    report = do_import(jsonl(PRM_PHASE2), "prm800k")
    assert report.rejected == []
    assert (report.problems_created, report.traces_created, report.steps_created, report.labels_created) == (1, 1, 3, 3)
    p = Problem.objects.get()
    assert p.statement == PRM_QUESTION and p.gold_answer == "2" and p.tags == ["prm800k"]
    t = Trace.objects.get()
    assert list(t.steps.order_by("index").values_list("text", flat=True)) == [
        "The denominator factors as $(x+3)(x-2)$.",
        "So it is zero at $x=-3$ and $x=2$.",
        "# Answer\n\n2",
    ]
    assert t.model == "prm800k-gen9"
    assert t.answer == "2"  # the "# Answer" step's
    assert t.answer_correct is True and t.answer_origin == Trace.AnswerOrigin.AUTOMATIC
    assert verdicts(t, PRM_PHASE2["labeler"]) == {1: "valid", 2: "neutral", 3: "valid"}
    assert t.meta["finish_reason"] == "solution"
    assert t.meta["generation"] == 9
    labeler = User.objects.get(username=PRM_PHASE2["labeler"])
    assert labeler.is_active is False
    assert TraceReview.objects.get(trace=t, annotator=labeler).complete is True


def test_prm800k_phase1_human_completions_and_a_found_error_step(do_import):
    report = do_import(jsonl(PRM_PHASE1), "prm800k")
    assert report.rejected == []
    t = Trace.objects.get()
    assert list(t.steps.order_by("index").values_list("text", flat=True)) == [
        "1+2 = 3.",  # chosen_completion 1
        "3+3 = 6.",  # the labeler's own step
        "So the answer is 7.",  # the first -1 completion of the last step
    ]
    assert verdicts(t, PRM_PHASE1["labeler"]) == {1: "valid", 2: "valid", 3: "invalid"}
    assert t.meta["finish_reason"] == "found_error"
    assert t.meta["human_written_steps"] == [2]
    assert t.model == "prm800k"
    # the labelling stopped at an error before any "# Answer" step: no answer, not "7" read from step 3
    assert (t.answer, t.answer_correct) == ("", None)


def test_prm800k_a_trace_cut_at_its_first_error_states_no_answer_not_the_full_solutions(do_import):
    """Phase 2: the pre-generated solution reaches "# Answer 2", but the labeler stopped at its error in step 2;
    the trace's steps stop there, so its answer is none (was the full solution's "2", marked correct)."""
    record = json.loads(json.dumps(PRM_PHASE2))
    record["label"]["steps"] = record["label"]["steps"][:2]
    record["label"]["steps"][1]["chosen_completion"] = None
    record["label"]["finish_reason"] = "found_error"
    assert do_import(jsonl(record), "prm800k").rejected == []
    t = Trace.objects.get()
    assert t.n_steps == 2 and t.steps.order_by("index").last().text == "Hmm."  # the -1 completion
    assert (t.answer, t.answer_correct) == ("", None)
    assert t.meta["pre_generated_answer"] == "2" and t.meta["finish_reason"] == "found_error"


def test_prm800k_takes_the_answer_from_the_answer_step_without_a_pre_generated_answer(do_import):
    record = json.loads(json.dumps(PRM_PHASE2))
    del record["question"]["pre_generated_answer"]
    record["label"]["steps"][2]["completions"][0]["text"] = "# Answer\n\n3"
    do_import(jsonl(record), "prm800k")
    t = Trace.objects.get()
    assert t.answer == "3"
    assert t.answer_correct is False


def test_prm800k_problems_are_shared_between_labelers_and_traces_are_not(do_import):
    other = json.loads(json.dumps(PRM_PHASE2))
    other["labeler"] = "another-labeler"
    other["timestamp"] = "2022-07-18T00:00:00"
    report = do_import(jsonl(PRM_PHASE2, other), "prm800k")
    assert report.rejected == []
    assert (report.problems_created, report.traces_created) == (1, 2)
    again = do_import(jsonl(PRM_PHASE2, other), "prm800k")
    assert (again.problems_created, again.traces_created, again.unchanged) == (0, 0, 4)


def test_prm800k_rejects_a_chosen_completion_out_of_range(do_import):
    bad = json.loads(json.dumps(PRM_PHASE2))
    bad["label"]["steps"][1]["chosen_completion"] = 5
    report = do_import(jsonl(PRM_PHASE1, bad), "prm800k")
    assert [r["line"] for r in report.rejected] == [2]
    assert "step 2" in report.rejected[0]["reason"] and "out of range" in report.rejected[0]["reason"]
    assert Trace.objects.count() == 0 and Problem.objects.count() == 0


@pytest.mark.parametrize(
    "step",
    [
        {"completions": [completion("a", 1)], "chosen_completion": "0"},
        {"completions": ["not an object"], "chosen_completion": None},
        {"completions": [completion("a", 1)], "human_completion": None, "chosen_completion": 0.5},
    ],
)
def test_prm800k_rejects_a_step_of_the_wrong_shape_with_its_line(do_import, step):
    bad = json.loads(json.dumps(PRM_PHASE1))
    bad["label"]["steps"][0] = step
    report = do_import(jsonl(PRM_PHASE2, bad), "prm800k")
    assert [r["line"] for r in report.rejected] == [2]
    assert "shape" in report.rejected[0]["reason"]
    assert Trace.objects.count() == 0 and Problem.objects.count() == 0


def test_prm800k_rejects_a_record_without_a_question(do_import):
    report = do_import(jsonl({"labeler": "x", "label": {"steps": []}}), "prm800k")
    assert report.rejected == [{"line": 1, "reason": 'missing "question"'}]


# --- processbench -----------------------------------------------------------------


def pb(id_: str, label: int, n: int = 4, **kw) -> dict:
    rec = {
        "id": id_,
        "generator": "Qwen2-7B-Instruct",
        "problem": f"Problem {id_}?",
        "steps": [f"{id_} step {k}" for k in range(1, n + 1)],
        "final_answer_correct": label == -1,
        "label": label,
    }
    rec.update(kw)
    return rec


def check_processbench(study_traces: dict[str, Trace]) -> None:
    t = study_traces["processbench/gsm8k-1"]
    assert verdicts(t, PROCESSBENCH_ANNOTATOR) == {1: "valid", 2: "invalid"}  # steps 3-4 unlabelled
    assert t.n_steps == 4
    assert t.answer_correct is False and t.answer_origin == Trace.AnswerOrigin.IMPORTED
    assert t.model == "Qwen2-7B-Instruct"
    t = study_traces["processbench/gsm8k-2"]
    assert verdicts(t, PROCESSBENCH_ANNOTATOR) == {1: "valid", 2: "valid", 3: "valid", 4: "valid"}
    assert t.answer_correct is True
    t = study_traces["processbench/gsm8k-3"]
    assert verdicts(t, PROCESSBENCH_ANNOTATOR) == {1: "invalid"}
    reviews = {r.trace.trace_id: r.complete for r in TraceReview.objects.select_related("trace")}
    # ProcessBench's protocol stops at the earliest error: such a review is
    # complete (its first error is determined; issue 23 item 4b).
    assert reviews == {"processbench/gsm8k-1": True, "processbench/gsm8k-2": True, "processbench/gsm8k-3": True}


def test_processbench_jsonl_labels_steps_up_to_the_first_error(do_import):
    report = do_import(jsonl(pb("gsm8k-1", 1), pb("gsm8k-2", -1), pb("gsm8k-3", 0)), "processbench")
    assert report.rejected == []
    assert (report.problems_created, report.traces_created, report.steps_created, report.labels_created) == (3, 3, 12, 7)
    check_processbench({t.trace_id: t for t in Trace.objects.all()})
    assert not User.objects.get(username=PROCESSBENCH_ANNOTATOR).is_active


def test_processbench_json_array_imports_the_same(do_import):
    data = json.dumps([pb("gsm8k-1", 1), pb("gsm8k-2", -1), pb("gsm8k-3", 0)], indent=2).encode()
    report = do_import(b"\n  " + data, "processbench")
    assert report.rejected == []
    assert report.read == 3
    check_processbench({t.trace_id: t for t in Trace.objects.all()})


@pytest.mark.parametrize("label", [4, -2, "1", None, 1.5, True])
def test_processbench_rejects_a_bad_label_with_its_entry_number(do_import, label):
    data = json.dumps([pb("a", 1), pb("b", -1), pb("c", label)]).encode()
    report = do_import(data, "processbench")
    assert [r["line"] for r in report.rejected] == [3]
    assert "label" in report.rejected[0]["reason"]
    assert Trace.objects.count() == 0 and Problem.objects.count() == 0


def test_processbench_rejects_a_broken_json_array(do_import):
    report = do_import(b'[{"id": "a",\n "label": }]', "processbench")
    assert len(report.rejected) == 1
    assert report.rejected[0]["line"] == 2
    assert "not valid JSON" in report.rejected[0]["reason"]


# --- trl-stepwise -----------------------------------------------------------------


def test_trl_stepwise_rows_become_traces_with_true_false_labels(do_import):
    rows = [
        {"prompt": "What is 2+2?", "completions": ["2+2 = 4.", "So 4."], "labels": [True, True]},
        {"prompt": "What is 3*3?", "completions": ["3*3 = 6.", "So 6."], "labels": [False, False]},
        {"prompt": "What is 2+2?", "completions": ["2+2 = 5."], "labels": [False]},
    ]
    report = do_import(jsonl(*rows), "trl-stepwise")
    assert report.rejected == []
    assert (report.problems_created, report.traces_created, report.steps_created) == (2, 3, 5)
    by_first_step = {t.steps.get(index=1).text: t for t in Trace.objects.all()}
    assert verdicts(by_first_step["2+2 = 4."], TRL_ANNOTATOR) == {1: "valid", 2: "valid"}
    assert verdicts(by_first_step["3*3 = 6."], TRL_ANNOTATOR) == {1: "invalid", 2: "invalid"}
    assert verdicts(by_first_step["2+2 = 5."], TRL_ANNOTATOR) == {1: "invalid"}
    # Without a trace id the identity is the steps: re-import changes nothing.
    again = do_import(jsonl(*rows), "trl-stepwise")
    assert (again.traces_created, again.labels_created, again.labels_updated) == (0, 0, 0)


@pytest.mark.parametrize(
    "row",
    [
        {"prompt": "P?", "completions": ["a", "b"], "labels": [True]},
        {"prompt": "P?", "completions": ["a"], "labels": [True, False]},
        {"prompt": "P?", "completions": "a", "labels": [True]},
    ],
)
def test_trl_stepwise_rejects_mismatched_lengths(do_import, row):
    good = {"prompt": "Q?", "completions": ["x"], "labels": [True]}
    report = do_import(jsonl(good, row), "trl-stepwise")
    assert [r["line"] for r in report.rejected] == [2]
    assert "same length" in report.rejected[0]["reason"]
    assert Trace.objects.count() == 0


def test_trl_stepwise_rejects_labels_that_are_not_booleans(do_import):
    report = do_import(jsonl({"prompt": "P?", "completions": ["a"], "labels": [1]}), "trl-stepwise")
    assert [r["line"] for r in report.rejected] == [1]
    assert "true/false" in report.rejected[0]["reason"]


def test_an_unknown_format_is_refused(do_import):
    report = do_import(jsonl({"prompt": "P?"}), "alpaca")
    assert report.committed is False
    assert [r["line"] for r in report.rejected] == [0]
    assert "unknown format" in report.rejected[0]["reason"]


@pytest.mark.parametrize(("verdicts", "n", "complete"), [
    ({1: "valid", 2: "valid", 3: "valid"}, 3, True),
    ({1: "valid", 2: "invalid"}, 4, True),  # stops at the earliest error: ProcessBench's protocol
    ({1: "invalid"}, 4, True),
    ({1: "valid", 2: "valid"}, 4, False),  # stopped without an error
    ({2: "invalid"}, 4, False),  # step 1 unknown
    ({1: "invalid", 2: "invalid"}, 4, False),  # went on past the first error, then stopped
])
def test_an_imported_review_is_complete_when_every_step_or_the_steps_to_the_first_error_are_labelled(
        verdicts, n, complete):
    from annotation.importing.pipeline import review_complete

    assert review_complete(verdicts, n, to_first_error=True) is complete
    # Without a first-error protocol only a review of every step is complete.
    assert review_complete(verdicts, n) is (len(verdicts) == n)
