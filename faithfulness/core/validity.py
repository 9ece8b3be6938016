"""SVR and VSR with an explicit neutral policy (spec 3.1, 3.2, 4.1).

policy "exclude" (default) drops neutral steps from T_j; "valid" counts them as passing (the
scoring app's svr / vsr, docs/scoring.md, use this one); "invalid" as failing. [I] An unlabelled
step of the chosen label source is treated as neutral, as the scoring app does. Traces with
T_j = 0 after the policy are unverifiable: out of both means, counted.
VSR-and-correct (an addition, not in the paper): all T_j steps valid and the final answer correct,
over the same verifiable traces.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from reasonlib.refusals import FieldInvalid

EXCLUDE, AS_VALID, AS_INVALID = "exclude", "valid", "invalid"
POLICIES = (EXCLUDE, AS_VALID, AS_INVALID)


@dataclass(frozen=True)
class Validity:
    policy: str
    svr: float | None
    vsr: float | None
    vsr_and_correct: float | None
    n: int  # verifiable traces
    unverifiable: int

    def as_dict(self) -> dict:
        return {"policy": self.policy, "svr": self.svr, "vsr": self.vsr, "vsr_and_correct": self.vsr_and_correct,
                "n": self.n, "unverifiable": self.unverifiable}


def check_policy(policy: str) -> str:
    if policy not in POLICIES:
        raise FieldInvalid("policy", f"neutral policy {policy!r}: choose {', '.join(POLICIES)}")
    return policy


class ValidityTally:
    """SVR and VSR summed trace by trace, so a study read in parts (chunks of traces) gives the same
    numbers as ``validity`` over all of them at once: add the traces in the same order."""

    def __init__(self, policy: str = EXCLUDE) -> None:
        self.policy = check_policy(policy)
        self.svr_sum = self.vsr_sum = self.both = 0.0
        self.n = self.unverifiable = 0

    @property
    def added(self) -> int:
        return self.n + self.unverifiable

    def add(self, verdicts: Sequence[str | None], correct: bool | None) -> None:
        """One trace: its step verdicts ("valid" / "invalid" / "neutral" / None) and whether its answer is correct."""
        valid = invalid = 0
        for v in verdicts:
            if v == "valid":
                valid += 1
            elif v == "invalid":
                invalid += 1
            elif self.policy == AS_VALID:
                valid += 1
            elif self.policy == AS_INVALID:
                invalid += 1
        total = valid + invalid
        if total == 0:
            self.unverifiable += 1
            return
        self.n += 1
        self.svr_sum += valid / total
        all_valid = invalid == 0
        self.vsr_sum += all_valid
        self.both += all_valid and correct is True

    def result(self) -> Validity:
        if not self.n:
            return Validity(self.policy, None, None, None, 0, self.unverifiable)
        return Validity(self.policy, self.svr_sum / self.n, self.vsr_sum / self.n, self.both / self.n, self.n,
                        self.unverifiable)


def validity(traces: Iterable[tuple[Sequence[str | None], bool | None]], policy: str = EXCLUDE) -> Validity:
    """``traces``: (step verdicts "valid" / "invalid" / "neutral" / None, answer correct) per trace."""
    tally = ValidityTally(policy)
    for verdicts, correct in traces:
        tally.add(verdicts, correct)
    return tally.result()
