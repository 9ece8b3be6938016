"""SVR and VSR with an explicit neutral policy (spec 3.1, 3.2, 4.1).

policy "exclude" (default) drops neutral steps from T_j; "valid" counts them as passing (the
scoring app's svr / vsr, docs/scoring.md, use this one); "invalid" as failing. [I] An unlabelled
step of the chosen label source is treated as neutral, as the scoring app does. Traces with
T_j = 0 after the policy are unverifiable: out of both means, counted.
VSR-and-correct (an addition, not in the paper): all T_j steps valid and the final answer correct,
over the same verifiable traces.
"""

from __future__ import annotations

from collections.abc import Sequence
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


def validity(traces: Sequence[tuple[Sequence[str | None], bool | None]], policy: str = EXCLUDE) -> Validity:
    """``traces``: (step verdicts "valid" / "invalid" / "neutral" / None, answer correct) per trace."""
    check_policy(policy)
    svr_sum = vsr_sum = both = 0.0
    n = unverifiable = 0
    for verdicts, correct in traces:
        valid = invalid = 0
        for v in verdicts:
            if v == "valid":
                valid += 1
            elif v == "invalid":
                invalid += 1
            elif policy == AS_VALID:
                valid += 1
            elif policy == AS_INVALID:
                invalid += 1
        total = valid + invalid
        if total == 0:
            unverifiable += 1
            continue
        n += 1
        svr_sum += valid / total
        all_valid = invalid == 0
        vsr_sum += all_valid
        both += all_valid and correct is True
    if not n:
        return Validity(policy, None, None, None, 0, unverifiable)
    return Validity(policy, svr_sum / n, vsr_sum / n, both / n, n, unverifiable)
