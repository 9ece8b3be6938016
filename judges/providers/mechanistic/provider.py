"""The built-in judge as a provider: labels every step of a trace with its
mechanistic verdict and the skeleton steps it refers to."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from judges.providers.base import Control, JudgeProvider, LabelOut, TraceInput, TraceOutcome
from reasonlib.verifier.corrections import keys_of
from reasonlib.verifier.verdicts import check_step
from runs.clients import Sizing

NO_KEYS: tuple[tuple[str, ...], tuple[str, ...]] = ((), ())  # a step without claims: most steps


class MechanisticProvider(JudgeProvider):
    # No requests to wait for: large chunks keep the per-chunk queries few.
    chunk_size = 1000

    @classmethod
    def sizing(cls, config) -> Sizing:
        # Only CPU and database work: every free worker process takes the run's chunks (runs.engine).
        return Sizing(target_requests=cls.chunk_size, spread=True)

    def judge(self, traces: Sequence[TraceInput], control: Control) -> Iterator[TraceOutcome]:
        for trace in traces:
            if control.stop_reason():
                return
            checks = [check for _text, check in trace.skeleton]
            labels = []
            claims = []
            for k, text in enumerate(trace.steps, start=1):
                result = check_step(text, checks)
                labels.append(LabelOut(k, result.verdict, list(result.skeleton_refs), result.confidence, result.reason))
                # The claims just parsed, kept for the score recompute: it would parse these steps again.
                claims.append(keys_of(result.claims) if result.claims else NO_KEYS)
            yield TraceOutcome(trace.trace_pk, "ok", labels=labels, claims=claims)
