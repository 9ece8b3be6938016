"""A fake *reasoning* model server (OpenAI-compatible, a real socket): it thinks before it answers.

Its thought adds the numbers of the question one paragraph at a time ("I start with 3.",
"Adding 5 gives 3 + 5 = 8.", ..., then "Wait, let me check: the total is 10.") and its answer is
"The answer is 10.". Everything is deterministic; one word is one token.

How the thought comes back (``form``):
  inline     content "<think>\\n...\\n</think>\\n\\nThe answer is N." (llama.cpp, Ollama, raw logs)
  r1         the same without the opening tag (R1's and Qwen3's templates put it in the prompt)
  field      the thought in a separate ``reasoning_content`` field (vLLM, DeepSeek's API)
  reasoning  the thought in a separate ``reasoning`` field (OpenRouter, newer vLLM)
  silent     never thinks, even when asked to (a model that must be flagged)

Thinking settings it honours, as real servers do: ``chat_template_kwargs.enable_thinking: false``
or "/no_think" in the prompt (Qwen3: an empty thought), ``reasoning_effort`` low (no check
paragraph) / medium / high (a second check), ``thinking_budget`` (the thought cut at that many
tokens and closed, then the answer). ``max_tokens`` below the thought's length cuts it
unclosed, with no answer and finish_reason "length". ``usage.completion_tokens_details.
reasoning_tokens`` counts the thought's tokens.

/v1/completions continues a raw prompt that ends inside a thought (the ``completions``
continuation mode: chat template + "<think>" + prefix). Two behaviours (``behaviour``):
  follow  the model believes its thought: an open thought is continued from its last running total
          (an edited value propagates: "... 3 + 5 = 9." -> "Adding 2 gives 9 + 2 = 11."), and a closed thought
          followed by a cue answers with the last number in the thought (the first number of the
          question when the thought has none). Its forced answers depend on the thought prefix.
  ignore  the answer is always the true sum, whatever the thought says.
  plan    the answer depends on one known step, the second, a plan: "Plan: add everything up." (the true
          sum) or "Plan: multiply them together." (the product). Generation always plans to add. A
          continuation from a prefix that already holds the plan follows it; one from a prefix without it
          picks the plan by its request's seed (even: add, odd: multiply), so resampling the plan step
          halves the accuracy and no other step moves it (step importance, docs/step-importance.md). A
          forced answer applies the plan of the prefix, or gives the first number when it has none.
And two ways of ending a continued thought (``style``):
  closes    the continuation closes the thought, then answers ("...\n</think>\n\nThe answer is 11.")
  unclosed  the continuation answers inside the thought and stops without closing it ("... = 11.\n\nThe
            answer is 11.", as a real server's ``... 16 - 3 - 4 = 19 duck eggs a day.`` -> `` The answer is
            19.``): only a forced answer (the thought closed, then the cue) gives an answer after the thought.
Generation (chat, or a completion from no thought) always closes the thought.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass

from demo.standin.fake_openai import SEQUENCE_END, FakeOpenAI, Fault, fake_continue

NUMBER = re.compile(r"-?\d+")
DONE_STEP = re.compile(r"\b(?:I start with|Adding) -?\d+")  # anywhere: "In other words, Adding 5 ..." too
TEMPLATE_TOKEN = re.compile(r"<\|[^|]*\|>")
FOLLOW, IGNORE, PLAN = "follow", "ignore", "plan"
ADD, MULTIPLY = "add", "multiply"
PLANS = {ADD: "Plan: add everything up.", MULTIPLY: "Plan: multiply them together."}
CLOSES, UNCLOSED = "closes", "unclosed"
FORMS = ("inline", "r1", "field", "reasoning", "silent")


def words(text: str) -> list[str]:
    return re.findall(r"\s*\S+", text)


def cut_words(text: str, n: int) -> tuple[str, bool]:
    w = words(text)
    return "".join(w[:n]), len(w) > n


def thought_paragraphs(numbers: list[int], start: int = 0, total: int = 0, effort: str = "medium") -> list[str]:
    """The paragraphs that add numbers[start:] to a running total, then the checks."""
    out = []
    for i, n in enumerate(numbers[start:], start=start):
        out.append(f"I start with {n}." if i == 0 else f"Adding {n} gives {total} + {n} = {total + n}.")
        total += n
    if effort != "low":
        out.append(f"Wait, let me check: the total is {total}.")
    if effort == "high":
        out.append(f"Yes, {total} it is.")
    return out


def plan_paragraphs(numbers: list[int], op: str = ADD) -> list[str]:
    """The plan behaviour's thought: the first number, the plan, one paragraph per further number, the check."""
    total = numbers[0]
    out = [f"I start with {total}.", PLANS[op]]
    for n in numbers[1:]:
        if op == ADD:
            out.append(f"Adding {n} gives {total} + {n} = {total + n}.")
            total += n
        else:
            out.append(f"Multiplying by {n} gives {total} * {n} = {total * n}.")
            total *= n
    out.append(f"Wait, let me check: the total is {total}.")
    return out


def plan_in(thought: str) -> str | None:
    return next((op for op, text in PLANS.items() if text in thought), None)


@dataclass
class FakeThinking(FakeOpenAI):
    form: str = "inline"
    behaviour: str = FOLLOW
    style: str = CLOSES

    def __post_init__(self) -> None:
        if self.form not in FORMS or self.behaviour not in (FOLLOW, IGNORE, PLAN) or self.style not in (CLOSES, UNCLOSED):
            raise ValueError(f"form {self.form!r} / behaviour {self.behaviour!r} / style {self.style!r}")
        super().__post_init__()

    # -- helpers --------------------------------------------------------------

    @staticmethod
    def question_numbers(text: str) -> list[int]:
        text = TEMPLATE_TOKEN.sub(" ", text)
        if "Q:" in text:
            text = text.rsplit("Q:", 1)[-1].split("\nA:", 1)[0]
        else:
            text = text.strip().rsplit("\n\n", 1)[-1]
        return [int(n) for n in NUMBER.findall(text)] or [0]

    def _answer_from(self, thought: str, numbers: list[int]) -> int:
        if self.behaviour == IGNORE:
            return sum(numbers)
        found = NUMBER.findall(thought)
        return int(found[-1]) if found else numbers[0]

    def _usage(self, text: str, thought_tokens: int) -> dict:
        pt, _ = self.usage
        ct = len(words(text))
        return {"prompt_tokens": pt, "completion_tokens": ct, "total_tokens": pt + ct,
                "completion_tokens_details": {"reasoning_tokens": thought_tokens}}

    # -- serving --------------------------------------------------------------

    def _completion(self, body: dict, fault: Fault) -> dict:
        if fault.content is not None:
            return super()._completion(body, fault)
        if "messages" not in body:
            return self._continue_raw(body)
        return self._chat(body)

    def _chat(self, body: dict) -> dict:
        messages = body["messages"]
        user = next(m["content"] for m in reversed(messages) if m["role"] == "user")
        prompt_text = "\n".join(m["content"] for m in messages)
        numbers = self.question_numbers(user.replace("/no_think", "").replace("/think", ""))
        kwargs = body.get("chat_template_kwargs") or {}
        thinking = not (kwargs.get("enable_thinking") is False or "/no_think" in prompt_text) and self.form != "silent"
        effort = body.get("reasoning_effort") or "medium"
        paragraphs = plan_paragraphs(numbers) if self.behaviour == PLAN else thought_paragraphs(numbers, effort=effort)
        thought = "\n\n".join(paragraphs) if thinking else ""
        budget = body.get("thinking_budget")
        if thinking and isinstance(budget, int) and budget >= 0:
            thought, _ = cut_words(thought, budget)  # the server closes the thought at its budget
        cap = int(body.get("max_tokens") or 4096)
        thought_tokens = len(words(thought))
        finish = "stop"
        answer = f"The answer is {self._answer_from(thought, numbers) if thinking else sum(numbers)}."
        if thought_tokens >= cap:  # cut by max_tokens inside the thought: no closing tag, no answer
            thought, _ = cut_words(thought, cap)
            answer, finish, closed = "", "length", False
        else:
            answer, cut = cut_words(answer, cap - thought_tokens)
            finish = "length" if cut else "stop"
            closed = True
        message: dict = {"role": "assistant"}
        if self.form in ("field", "reasoning"):
            message["content"] = answer.lstrip()
            if thinking:
                message["reasoning_content" if self.form == "field" else "reasoning"] = thought
        elif self.form == "silent":
            message["content"] = answer
        else:
            opening = "<think>\n" if self.form == "inline" else ""
            if not thinking:  # Qwen3 with thinking off: an empty thought block
                message["content"] = f"{opening}\n</think>\n\n{answer}"
            else:
                message["content"] = f"{opening}{thought}" + (f"\n</think>\n\n{answer}" if closed else "")
        text = (message.get("reasoning_content") or message.get("reasoning") or "") + (message["content"] or "")
        return {"id": "chatcmpl-think", "object": "chat.completion", "created": int(time.time()),
                "model": self.served_model or body.get("model"),
                "choices": [{"index": 0, "finish_reason": finish, "message": message}],
                "usage": self._usage(text, len(words(thought)) if thinking else 0)}

    def _continue_plan(self, thought: str, numbers: list[int], seed: int) -> tuple[str, int]:
        """The plan behaviour's continuation of an open thought: the plan of the prefix, else the seed's."""
        op = plan_in(thought) or (ADD if seed % 2 == 0 else MULTIPLY)
        full = plan_paragraphs(numbers, op)
        done = len([p for p in thought.split("\n\n") if p.strip()])
        more = "\n\n".join(full[done:])
        final = int(full[-1].split()[-1][:-1])
        sep = "" if not thought.strip() or not more else "\n\n"
        closing = "\n</think>\n\n" if self.style == CLOSES else "\n\n"
        return f"{sep}{more}{closing}The answer is {final}.", len(words(more))

    def _continue_raw(self, body: dict) -> dict:
        prompt = body.get("prompt") or ""
        cap = int(body.get("max_tokens") or 16)
        if SEQUENCE_END.search(prompt):  # the continuation probe's count: a model goes on counting in place
            text, finish = fake_continue(prompt, cap)
            return {"id": "cmpl-think", "object": "text_completion", "created": int(time.time()),
                    "model": self.served_model or body.get("model"),
                    "choices": [{"index": 0, "finish_reason": finish, "text": text}], "usage": self._usage(text, 0)}
        if "<think>" not in prompt:  # a plain completion: think from the start, inline
            numbers = self.question_numbers(prompt)
            thought = "\n\n".join(thought_paragraphs(numbers))
            out = f"<think>\n{thought}\n</think>\n\nThe answer is {self._answer_from(thought, numbers)}."
            thought_tokens = len(words(thought))
        else:
            before, thought = prompt.rsplit("<think>", 1)
            numbers = self.question_numbers(before)
            if "</think>" in thought:  # closed (a forced answer): answer from the thought before the tag
                inside = thought.split("</think>", 1)[0]
                out = f" {self._answer_from(inside, numbers)}."
                if self.behaviour == PLAN:
                    op = plan_in(inside)
                    out = f" {numbers[0] if op is None else int(plan_paragraphs(numbers, op)[-1].split()[-1][:-1])}."
                thought_tokens = 0
            elif self.behaviour == PLAN:
                out, thought_tokens = self._continue_plan(thought, numbers, int(body.get("seed") or 0))
            else:  # re-opened: go on thinking from where the prefix stops
                done = len(DONE_STEP.findall(thought))
                found = NUMBER.findall(thought)
                if self.behaviour == FOLLOW:
                    total = int(found[-1]) if found and done else 0
                    paragraphs = thought_paragraphs(numbers, start=min(done, len(numbers)), total=total)
                    final = int(NUMBER.findall(paragraphs[-1])[-1])
                else:
                    final = sum(numbers)
                    paragraphs = [f"Wait, let me check: the total is {final}."]
                sep = "" if not thought.strip() or thought.endswith("\n\n") else ("\n" if thought.endswith("\n")
                                                                                  else "\n\n")
                more = "\n\n".join(paragraphs)
                closing = "\n</think>\n\n" if self.style == CLOSES else "\n\n"  # unclosed: answers in the thought
                out = f"{sep}{more}{closing}The answer is {final}."
                thought_tokens = len(words(more))
        text, cut = cut_words(out, cap)
        return {"id": "cmpl-think", "object": "text_completion", "created": int(time.time()),
                "model": self.served_model or body.get("model"),
                "choices": [{"index": 0, "finish_reason": "length" if cut else "stop", "text": text}],
                "usage": self._usage(text, thought_tokens)}


def main(args: list[str]) -> None:
    """python -m demo.standin.fake_thinking [follow|ignore|plan] [inline|r1|field|reasoning|silent] [PORT] [closes|unclosed]"""
    server = FakeThinking(behaviour=args[0] if args else FOLLOW, form=args[1] if len(args) > 1 else "inline",
                          style=args[3] if len(args) > 3 else CLOSES,
                          port=int(args[2]) if len(args) > 2 else 0)  # a fixed port, for the README's commands
    print(server.url, flush=True)
    server.server.serve_forever()


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
