"""A study whose traces think: thought steps (channel "thought", indexes 1..T) before the answer's,
built with the ORM the way the import writes them (annotation.models, CHANNELS.md)."""

from __future__ import annotations

from annotation.models import Problem, Step, StepLabel, Trace
from judges.models import JudgeConfig


def thinking_trace(study, problem, trace_id: str, model: str, thought: list[str], answer: list[str],
                   correct: bool) -> Trace:
    trace = Trace.objects.create(
        study=study, problem=problem, model=model, trace_id=trace_id, thought="\n\n".join(thought),
        raw="\n".join(answer), answer="18", answer_correct=correct, n_steps=len(thought) + len(answer),
        n_thought_steps=len(thought), steps_hash=trace_id,
    )
    Step.objects.bulk_create(
        [Step(trace=trace, index=i, text=t, channel=Step.Channel.THOUGHT) for i, t in enumerate(thought, start=1)]
        + [Step(trace=trace, index=len(thought) + i, text=t, channel=Step.Channel.ANSWER)
           for i, t in enumerate(answer, start=1)]
    )
    return trace


def judge_labels(study, name: str, verdicts: dict[str, list[str]]) -> JudgeConfig:
    judge, _ = JudgeConfig.objects.get_or_create(study=study, name=name, defaults={"provider": "fake"})
    steps = {(s.trace.trace_id, s.index): s for s in Step.objects.filter(trace__study=study).select_related("trace")}
    StepLabel.objects.bulk_create([
        StepLabel(step=steps[(tid, i + 1)], kind=StepLabel.Kind.JUDGE, judge=judge, verdict=v)
        for tid, vs in verdicts.items() for i, v in enumerate(vs)
    ])
    return judge


def seed_thinking(study) -> dict[str, Trace]:
    """r1: error in thought step 2 ("16 - 3 - 4 = 8") recovered at step 4, correct answer;
    r2: error at thought step 1 never corrected, correct answer (a lucky guess on an unrecovered error);
    r3: no thought, answer step wrong."""
    problem = Problem.objects.create(study=study, problem_id="eggs", statement="Janet's eggs?", gold_answer="18")
    traces = {
        "r1": thinking_trace(study, problem, "r1", "reasoner",
                             ["Janet has 16 eggs.", "She keeps 16 - 3 - 4 = 8.", "Hmm, let me check.",
                              "Wait, 16 - 3 - 4 = 9.", "9 * 2 = 18 dollars."],
                             ["9 * 2 = 18", "The answer is 18."], True),
        "r2": thinking_trace(study, problem, "r2", "reasoner",
                             ["16 - 3 = 12", "12 - 4 = 8", "8 * 2 = 16"], ["The answer is 18."], True),
        "r3": thinking_trace(study, problem, "r3", "plain", [], ["16 - 3 - 4 = 9", "9 * 2 = 20"], False),
    }
    judge_labels(study, "mech", {
        "r1": ["valid", "invalid", "neutral", "valid", "valid", "valid", "valid"],
        "r2": ["invalid", "valid", "valid", "valid"],
        "r3": ["valid", "invalid"],
    })
    study.primary_judge = JudgeConfig.objects.get(study=study, name="mech")
    study.save(update_fields=["primary_judge"])
    return traces


THOUGHT_LINES = [
    "Let me think about how many eggs Janet sells.",
    "She has 16 eggs and eats 3, so 16 - 3 = 13.",
    "Wait, she also bakes with 4: 13 - 4 = 9.",
    "Hmm, so 9 eggs at 2 dollars each.",
    "That gives 9 * 2 = 18 dollars.",
]


def long_thought(study, n_thought: int, *, trace_id: str = "r1-long", needle_at: int | None = None) -> Trace:
    """A trace that thinks for ``n_thought`` paragraphs (R1's "Wait, ..." style), then answers in two
    steps; step ``needle_at`` mentions a "marmalade" nothing else does (for the search)."""
    problem, _ = Problem.objects.get_or_create(study=study, problem_id="eggs-long",
                                               defaults={"statement": "Janet's ducks lay 16 eggs ...",
                                                         "gold_answer": "18"})
    thought = [THOUGHT_LINES[i % len(THOUGHT_LINES)] + f" (paragraph {i + 1})" for i in range(n_thought)]
    if needle_at:
        thought[needle_at - 1] = "Maybe she trades some eggs for marmalade? No, ignore that."
    return thinking_trace(study, problem, trace_id, "r1-distill", thought,
                          ["Janet sells 9 eggs at $2: 9 * 2 = 18", "The answer is 18."], True)
