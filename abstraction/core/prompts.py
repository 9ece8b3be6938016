"""The chat prompts of direct prompting (DP) and chain-of-thought (CoT), spec §5, exactly as the
released data and the authors' inference code build them. The default texts below are also the
built-in prompt templates a study gets (abstraction.services.ensure_templates), so a study may
version its own system prompts; rendering takes the texts as arguments."""

from __future__ import annotations

from collections.abc import Sequence

from abstraction.core.generators import Instance

MODES = ("dp", "cot")

SYSTEM_DP = (
    "The task is to identify patterns and discover rules from the provided examples, then answer a question. "
    "The symbols in the question may not have their usual meanings, so carefully analyze the rules and "
    "expressions before providing your final answer in the format: 'Answer: The answer is {your answer}. '."
)
SYSTEM_COT = (
    "The task is to identify patterns and discover rules from the provided examples, then answer a question. "
    "The symbols in the question may not have their usual meanings, so carefully analyze the rules and "
    "expressions before providing your final answer in the format: 'Answer: The answer is {your answer}.'. "
    "Use step-by-step reasoning to explain your answer, even if examples only provide direct answers."
)
SYSTEM_MA_DP = (
    "You must always provide your answer in the following format:\n\nAnswer: The answer is {your answer}.\n\n"
    "This is mandatory and non-negotiable. Ensure that the ENTIRE final response adheres to this format."
)
COT_CUE = "Let's think step by step. \n\n"


def user_turn(hint: str, question: str) -> str:
    return f"{hint}Question: {question}\n\n"


def assistant_turn(answer: str) -> str:
    return f"Answer: The answer is {answer}.\n\n"


def gsm8k_cot(question: str, exemplars: Sequence[dict]) -> str:
    """The 8-shot GSM8K prompt of Wei et al.: "Q: ... A: ... The answer is N." blocks, then the question."""
    blocks = "".join(f"Q: {e['question']}\nA: {e['answer']}\n\n" for e in exemplars)
    return f"{blocks}Q: {question}\nA:\n"


def messages(inst: Instance, mode: str, *, system_dp: str = SYSTEM_DP, system_cot: str = SYSTEM_COT,
             system_ma: str = SYSTEM_MA_DP, gsm8k_exemplars: Sequence[dict] = ()) -> list[dict[str, str]]:
    """The chat messages of one item: system, the worked examples as (user, assistant) turns, the
    question. NBR's base hint goes in front of every user turn and after the DP system prompt; CoT
    replaces every system prompt (GSM8K's too, as the repository's code does) and appends the cue."""
    if mode not in MODES:
        raise ValueError(f"unknown prompting mode {mode!r}; choose dp or cot")
    if inst.category == "MA":
        if mode == "dp":
            return [{"role": "system", "content": system_ma}, {"role": "user", "content": inst.question}]
        return [{"role": "system", "content": system_cot},
                {"role": "user", "content": gsm8k_cot(inst.question, gsm8k_exemplars)}]
    system = system_dp + inst.hint if mode == "dp" else system_cot
    out = [{"role": "system", "content": system}]
    for q, a in inst.examples:
        out.append({"role": "user", "content": user_turn(inst.hint, q)})
        out.append({"role": "assistant", "content": assistant_turn(a)})
    final = user_turn(inst.hint, inst.question)
    out.append({"role": "user", "content": final + COT_CUE if mode == "cot" else final})
    return out
