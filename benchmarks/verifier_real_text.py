"""The mechanistic verifier on real text it was not tuned on (issue 30): how often it calls a step
"invalid" that is not wrong.

* ProcessBench (Zheng et al., arXiv:2412.06559): every split file found in the data folder
  (``gsm8k.json``, ``math.json``, ``olympiadbench.json``, ``omnimath.json``). The verifier's
  prediction for a solution is its first invalid step (none: -1); printed per split are the correct
  solutions (label -1) it flags, the erroneous ones whose first error it finds, the F1 of the two
  accuracies (ProcessBench's formula), the erroneous ones it flags at a step before their first
  error (a step the annotators accepted) and, with ``--list``, the claims behind those two kinds
  of flag.
* Real thinking: the thoughts of DeepSeek-R1-Distill (40 MATH traces) and gpt-oss-120b (1,319 GSM8K
  traces) cut into steps by ``thought_steps`` (lines, long lines into sentences: a segmentation of our
  own, so the count does not move with the app's segmenter); printed are the steps called invalid.
  The hand-checked sample of those steps, with a verdict for each, is tests/data/thinking/
  verifier_invalid_sample.jsonl; tests/judges/mechanistic/test_real_thoughts.py computes the
  precision from it.

    python benchmarks/verifier_real_text.py [--data /work/shared/data] [--list]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from reasonlib.verifier.verdicts import check_step  # noqa: E402

SPLITS = ("gsm8k", "math", "olympiadbench", "omnimath")
SAMPLE = Path(__file__).resolve().parent.parent / "tests" / "data" / "thinking" / "verifier_invalid_sample.jsonl"

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z(\\$])")


def thought_steps(thought: str) -> list[str]:
    """Non-empty lines; a line longer than 300 characters is cut after each sentence."""
    steps = []
    for line in thought.split("\n"):
        line = line.strip()
        if not line:
            continue
        steps.extend(s for s in (_SENTENCE_END.split(line) if len(line) > 300 else [line]) if s.strip())
    return steps


def first_invalid(steps: list[str]) -> tuple[int, str]:
    for k, step in enumerate(steps):
        result = check_step(step)
        if result.verdict == "invalid":
            return k, result.reason
    return -1, ""


def processbench(path: Path, listing: bool) -> None:
    items = json.loads(path.read_text(encoding="utf-8"))
    n_err = n_cor = hit_err = hit_cor = 0
    flagged = []
    early = []  # erroneous solutions flagged before the step ProcessBench marks as the first error
    for item in items:
        pred, reason = first_invalid(item["steps"])
        if item["label"] == -1:
            n_cor += 1
            hit_cor += pred == -1
            if pred != -1:
                flagged.append((item["id"], pred, reason))
        else:
            n_err += 1
            hit_err += pred == item["label"]
            if 0 <= pred < item["label"]:
                early.append((item["id"], pred, reason))
    acc_err, acc_cor = 100 * hit_err / n_err, 100 * hit_cor / n_cor
    f1 = 2 * acc_err * acc_cor / (acc_err + acc_cor) if acc_err + acc_cor else 0.0
    print(f"{path.stem:14s} correct solutions flagged {len(flagged)}/{n_cor}; first error found "
          f"{hit_err}/{n_err}; F1 {f1:.1f}; flagged before the first error {len(early)}/{n_err}")
    if listing:
        for item_id, k, reason in flagged + early:
            print(f"    {item_id} step {k}: {reason}")


def thoughts(root: Path) -> list[tuple[str, str]]:
    """(trace id, thought text) of the R1 and gpt-oss files."""
    out = []
    r1 = root / "reasoning-traces" / "math-r1distill-thoughtanchors"
    for path in sorted(r1.glob("*/*/problem_*/base_solution.json")):
        full = json.loads(path.read_text(encoding="utf-8"))["full_cot"]
        thought = full.split("<think>", 1)[-1].split("</think>", 1)[0]
        out.append(("/".join(path.parts[-4:-1]), thought))
    oss = root / "reasoning-traces" / "gsm8k-gptoss120b-mdevalcot" / "GSM8K_gpt-oss-120b.jsonl"
    with oss.open(encoding="utf-8") as f:
        for i, line in enumerate(f):
            out.append((f"gptoss/gsm8k-test-{i:04d}", json.loads(line)["gcot"]))
    return out


def real_thoughts(root: Path, listing: bool) -> None:
    n_steps = 0
    flagged = []
    for trace_id, thought in thoughts(root):
        for k, step in enumerate(thought_steps(thought)):
            n_steps += 1
            result = check_step(step)
            if result.verdict == "invalid":
                flagged.append((trace_id, k, step, result.reason))
    r1 = sum(1 for t, *_ in flagged if not t.startswith("gptoss"))
    print(f"thought steps  {n_steps}; invalid {len(flagged)} (R1 {r1}, gpt-oss {len(flagged) - r1})")
    with SAMPLE.open(encoding="utf-8") as f:
        hand = {(r["trace"], r["step"]): r["hand"] for r in map(json.loads, f)}
    known = [hand.get((t, k)) for t, k, _, _ in flagged]
    errors = known.count("error")
    print(f"               read by hand ({SAMPLE.name}): {len(known) - known.count(None)} of them, "
          f"{errors} errors; precision of invalid {errors / max(1, len(flagged)):.2f} "
          f"(steps not in the sample count as wrong)")
    if listing:
        for trace_id, k, step, reason in flagged:
            print(f"    {trace_id} step {k}: {reason}\n        {step[:300]!r}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=Path("/work/shared/data"))
    ap.add_argument("--list", action="store_true", help="print every flagged claim")
    args = ap.parse_args()
    for split in SPLITS:
        path = args.data / "processbench" / f"{split}.json"
        if path.exists():
            processbench(path, args.list)
        else:
            print(f"{split:14s} not found: {path}")
    real_thoughts(args.data, args.list)


if __name__ == "__main__":
    main()
