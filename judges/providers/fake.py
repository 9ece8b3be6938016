"""A deterministic judge for tests and demos without a model server.

A step is invalid when its text contains "WRONG" (any case), else valid;
the model name may force one verdict for every step ("all-valid",
"all-invalid", "all-neutral"), and "fail" fails every trace."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from judges.providers.base import Control, JudgeProvider, LabelOut, TraceInput, TraceOutcome


class FakeProvider(JudgeProvider):
    def judge(self, traces: Sequence[TraceInput], control: Control) -> Iterator[TraceOutcome]:
        forced = self.config.model.removeprefix("all-") if self.config.model.startswith("all-") else None
        for trace in traces:
            if control.stop_reason():
                return
            if self.config.model == "fail":
                yield TraceOutcome(trace.trace_pk, "failed", reason="the fake judge fails every trace")
                continue
            labels = [
                LabelOut(k, forced or ("invalid" if "wrong" in text.lower() else "valid"), [], 0.5, "fake verdict")
                for k, text in enumerate(trace.steps, start=1)
            ]
            yield TraceOutcome(trace.trace_pk, "ok", labels=labels, answer_correct=True)
