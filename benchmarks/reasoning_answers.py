"""The app's reading of real reasoning-model answers against an independent reading (docs/import-format.md,
"Answers as reasoning models write them").

* gpt-oss-120b on the whole GSM8K test set (``reasoning-traces/gsm8k-gptoss120b-mdevalcot``, 1,319
  records): the app's verdict is what an import gives -- ``reasonlib.thinking`` splits the record (the
  ``gcot`` as the separate reasoning field, ``response`` as the answer channel), the answer channel's
  final answer is read (``thinking.parse_channels``, the lines segmenter, as a study's default) and
  checked against the gold number with ``reasonlib.answers.check_answer``.
* The independent reading shares no code with the app (no ``reasonlib`` import in ``reference``): it
  looks only at the closing zone of the answer (after the last "answer" marker or ``\\boxed``, else the
  last line that holds a number), joins thousands separators, and collects every number there (the
  bold ones, when some are bold). It never chooses between numbers: one distinct value equal to the gold
  is "correct", one distinct value different from it "incorrect", anything else "unclear". Every
  unclear record and every record where it and the app disagree was read by hand; the verdicts are in
  ``tests/data/thinking/gptoss_answer_hand_verdicts.jsonl`` (a hand verdict replaces the automatic one).
* DeepSeek-R1-Distill on 10 MATH problems (``reasoning-traces/math-r1distill-thoughtanchors``, 40
  traces): the app's verdict against the published ``is_correct``.

    python benchmarks/reasoning_answers.py [--data ../shared/data/reasoning-traces] [--list]

``--list`` prints the records that need a hand verdict (unclear or disagreeing) and have none yet.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter
from fractions import Fraction
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from reasonlib import answers, thinking  # noqa: E402

GPTOSS = "gsm8k-gptoss120b-mdevalcot/GSM8K_gpt-oss-120b.jsonl"
R1 = "math-r1distill-thoughtanchors"
HAND = ROOT / "tests" / "data" / "thinking" / "gptoss_answer_hand_verdicts.jsonl"


# -- the independent reading (no reasonlib) ------------------------------------------------------------

_SEPARATOR = re.compile(r"(?<=\d)(?:\{,\}|,\\!|,|\\,|[\u2009\u202f\u00a0])(?=\d{3}(?!\d))")
_MARKER = re.compile(r"answer|\\boxed", re.IGNORECASE)
_NUM = re.compile(r"-?\d+(?:\.\d+)?")
_BOLD = re.compile(r"\*\*([^*]+)\*\*")


def _value(token: str) -> Fraction:
    return Fraction(token)


def reference(response: str, gold: str) -> tuple[str, str]:
    """("correct" | "incorrect" | "unclear", the zone read)."""
    text = _SEPARATOR.sub("", response.strip())
    markers = list(_MARKER.finditer(text))
    if markers:
        zone = text[markers[-1].start():]
    else:
        lines = [line for line in text.splitlines() if re.search(r"\d", line)]
        zone = lines[-1] if lines else ""
    zone = zone[:400]
    bold = [n for span in _BOLD.findall(zone) for n in _NUM.findall(span)]
    values = {_value(n) for n in (bold or _NUM.findall(zone))}
    if len(values) != 1:
        return "unclear", zone
    return ("correct" if values == {_value(gold)} else "incorrect"), zone


# -- the app --------------------------------------------------------------------------------------------


def app_verdict(response: str, reasoning: str, gold: str) -> tuple[str, str | None]:
    split = thinking.split_thinking(response, reasoning_field=reasoning)
    found = thinking.parse_channels(response, split, "lines", "paragraphs").final_answer
    verdict = answers.check_answer(found, gold) if found else None
    return {True: "correct", False: "incorrect", None: "undecided"}[verdict], found


def gold_number(solution: str) -> str:
    return solution.split("####")[-1].strip().replace(",", "")


def gptoss(data: Path, listing: bool) -> None:
    hand = {}
    if HAND.exists():
        for line in HAND.read_text(encoding="utf-8").splitlines():
            if line.strip():
                row = json.loads(line)
                hand[row["index"]] = row
    table: Counter[tuple[str, str]] = Counter()
    auto_table: Counter[tuple[str, str]] = Counter()
    todo = 0
    records = [json.loads(line) for line in (data / GPTOSS).read_text(encoding="utf-8").splitlines()]
    for i, rec in enumerate(records):
        gold = gold_number(rec["answer"])
        app, found = app_verdict(rec["response"], rec["gcot"], gold)
        ref, zone = reference(rec["response"], gold)
        auto_table[(app, ref)] += 1
        final = hand[i]["verdict"] if i in hand else ref
        table[(app, final)] += 1
        if listing and i not in hand and (ref == "unclear" or ref != app):
            todo += 1
            print(f"=== {i} gold={gold} app={app} {found!r} ref={ref}\nQ: {rec['question']}\nZONE: {zone!r}\n"
                  f"TAIL: {rec['response'][-400:]!r}\n")
    n = len(records)
    print(f"gpt-oss-120b GSM8K: {n} records; hand verdicts {len(hand)}" + (f"; still to read {todo}" if listing else ""))
    print("automatic independent reading (before hand verdicts):")
    _print_table(auto_table, ("correct", "incorrect", "unclear"))
    print("app vs the independent reading with hand verdicts:")
    _print_table(table, ("correct", "incorrect", "unclear"))
    agree = table[("correct", "correct")] + table[("incorrect", "incorrect")]
    undecided = sum(v for (a, _), v in table.items() if a == "undecided")
    unclear = sum(v for (_, r), v in table.items() if r == "unclear")
    print(f"agreement {agree}/{n} = {agree / n:.4f}; app undecided {undecided} ({undecided / n:.2%}); "
          f"reference unclear left {unclear}")
    app_acc = sum(v for (a, _), v in table.items() if a == "correct") / n
    ref_acc = sum(v for (_, r), v in table.items() if r == "correct") / n
    print(f"answer accuracy: app {app_acc:.3f}, independent reading {ref_acc:.3f}")


def _print_table(table: Counter[tuple[str, str]], cols: tuple[str, ...]) -> None:
    print("  app \\ reference  " + "".join(f"{c:>11}" for c in cols))
    for row in ("correct", "incorrect", "undecided"):
        print(f"  {row:<17}" + "".join(f"{table[(row, c)]:>11}" for c in cols))


def r1(data: Path) -> None:
    agree = total = 0
    for path in sorted((data / R1).glob("*/*/problem_*/base_solution.json")):
        sol = json.loads(path.read_text(encoding="utf-8"))
        problem = json.loads((path.parent / "problem.json").read_text(encoding="utf-8"))
        # The prompt opened the thought ("... Solution: \n<think>\n"): the solution starts inside it.
        split = thinking.split_thinking(sol["solution"], opened=True)
        found = thinking.parse_channels(sol["solution"], split, "lines", "paragraphs").final_answer
        verdict = answers.check_answer(found, problem["gt_answer"]) if found else None
        total += 1
        agree += verdict is sol["is_correct"]
        if verdict is not sol["is_correct"]:
            print(f"  R1 disagreement: {path.parent}: {found!r} vs {problem['gt_answer']!r} -> {verdict}")
    print(f"R1-distill MATH: app verdict equals the published is_correct for {agree}/{total}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    # ../shared beside the repository (a worktree sits one folder deeper).
    default = next((p / "shared" / "data" / "reasoning-traces" for p in (ROOT.parent, ROOT.parent.parent)
                    if (p / "shared" / "data" / "reasoning-traces").is_dir()), None)
    parser.add_argument("--data", type=Path, default=default, required=default is None)
    parser.add_argument("--list", action="store_true", help="print the records that still need a hand verdict")
    args = parser.parse_args()
    r1(args.data)
    gptoss(args.data, args.list)


if __name__ == "__main__":
    main()
