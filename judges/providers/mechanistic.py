"""The built-in judge: annotation.judges.mechanistic checks the arithmetic
each step shows, and refers a step to the skeleton steps whose check result
one of its true claims derives."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from annotation.judges.mechanistic import StepCheck, check_step, check_value
from judges.providers.base import Control, JudgeProvider, LabelOut, TraceInput, TraceOutcome

__all__ = ["MechanisticProvider", "StepCheck", "check_step", "check_value"]


class MechanisticProvider(JudgeProvider):
    # No requests to wait for: large chunks keep the per-chunk queries few.
    chunk_size = 1000

    def judge(self, traces: Sequence[TraceInput], control: Control) -> Iterator[TraceOutcome]:
        for trace in traces:
            if control.stop_reason():
                return
            checks = [check for _text, check in trace.skeleton]
            labels = []
            for k, text in enumerate(trace.steps, start=1):
                result = check_step(text, checks)
                labels.append(LabelOut(k, result.verdict, list(result.skeleton_refs), result.confidence, result.reason))
            yield TraceOutcome(trace.trace_pk, "ok", labels)
