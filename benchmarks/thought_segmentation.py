"""How the segmenters cut real reasoning-model outputs (docs/import-format.md, "Segmentation that follows
reasoning moves").

For the R1-distill traces (``reasoning-traces/math-r1distill-thoughtanchors``, 40 traces, the thought
opened by the prompt) and gpt-oss-120b on GSM8K (``reasoning-traces/gsm8k-gptoss120b-mdevalcot``, 1,319
records, the thought in a separate field), both channels are segmented as an import does
(``reasonlib.thinking.parse_channels``): the thought by each thought segmenter, the answer by ``lines``
(a study's default). Printed per data set and segmenter:

* steps per thought: median, 90th percentile, and the longest step (characters); thoughts of one step;
* bare-delimiter steps: a step that is only ``\\[``, ``\\]``, ``$$``, ``\\begin{..}`` or ``\\end{..}`` (target 0);
* formula fragments: a step that starts by continuing a formula (``=``, ``+``, ``\\times`` ...) or holds one
  half of a display (unbalanced ``\\[``/``\\]``, odd ``$$``, ``\\begin`` without its ``\\end``) (target 0);
* lead-ins alone: a step ending in ":" followed by a step that starts with a formula (and not a move);
* self-corrections starting their own step: of the sentences of the thought that open with a move
  marker ("Wait", "Hmm", "But wait", "Alternatively", "Let me check", "Actually", "No,"), how many begin
  a step;
* the time to segment a 200 kB thought (the R1 thoughts repeated).

    python benchmarks/thought_segmentation.py [--data ../shared/data/reasoning-traces]
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from reasonlib import segmentation, thinking  # noqa: E402

THOUGHT_SEGMENTERS = ("paragraphs", "sentences", "moves")
OPEN, CLOSE = re.compile(r"(?<!\\)\\\["), re.compile(r"(?<!\\)\\\]")  # not "\\\\[4pt]" of an aligned environment
BARE = re.compile(r"\\\[|\\\]|\$\$|\\(?:begin|end)\{[^}]*\}")
CONTINUES = re.compile(r"(?:[=+\u00d7\u00f7\u2248]|\\(?:cdot|times|approx)(?![A-Za-z]))")
# A formula a lead-in ending in ":" introduces.
FORMULA = re.compile(r"\\[\[(]|\$\$|\\begin\{|[^\r\n]{0,300}?(?:[=<>≈≤≥]|\\\()|[\s(+-]*\d[\d.,]*\s*[-+*/^×÷(]")
OPENS_MOVE = re.compile(r"(?:But wait|Wait|Hmm|Alternatively|Let me check|Actually|No,)")
# A sentence that opens a move: at the start of the text, of a line, or after a sentence end.
MOVE = re.compile(r"(?:^|(?<=[.!?])[ \t]+|(?<=\n))[ \t]*(?=(?:But wait|Wait|Hmm|Alternatively|Let me check|Actually|No,))",
                  re.MULTILINE)


def fragment(text: str, last: bool = False) -> bool:
    """``last``: the channel's last step, where a display left open is the one the output was cut off in."""
    if CONTINUES.match(text):
        return True
    opens, closes = len(OPEN.findall(text)), len(CLOSE.findall(text))
    if closes > opens or (opens > closes and not last) or text.count("$$") % 2:
        return True
    return len(re.findall(r"\\begin\{", text)) != len(re.findall(r"\\end\{", text))


def load(data: Path) -> dict[str, list[tuple[str | None, thinking.ThinkingSplit]]]:
    r1 = []
    for path in sorted((data / "math-r1distill-thoughtanchors").glob("*/*/problem_*/base_solution.json")):
        raw = json.loads(path.read_text(encoding="utf-8"))["solution"]
        r1.append((raw, thinking.split_thinking(raw, opened=True)))
    gptoss = []
    lines = (data / "gsm8k-gptoss120b-mdevalcot" / "GSM8K_gpt-oss-120b.jsonl").read_text(encoding="utf-8").splitlines()
    for line in lines:
        rec = json.loads(line)
        gptoss.append((rec["response"], thinking.split_thinking(rec["response"], reasoning_field=rec["gcot"])))
    return {"R1-distill (MATH, 40)": r1, "gpt-oss-120b (GSM8K, 1,319)": gptoss}


def report(name: str, items: list[tuple[str | None, thinking.ThinkingSplit]]) -> None:
    print(f"\n{name}")
    print(f"  {'thought segmenter':<18}{'median':>7}{'p90':>6}{'max len':>9}{'1-step':>8}{'bare':>6}{'frag':>6}"
          f"{'lead-in alone':>14}{'moves own step':>16}   answer channel (lines): bare, fragments")
    for method in THOUGHT_SEGMENTERS:
        counts, longest, single, bare, frag, moves, own, lead_ins = [], 0, 0, 0, 0, 0, 0, 0
        answer_bare = answer_frag = 0
        for raw, split in items:
            steps = thinking.parse_channels(raw, split, "lines", method)
            counts.append(len(steps.thought))
            single += len(steps.thought) == 1
            starts = {s.start for s in steps.thought}
            for k, s in enumerate(steps.thought):
                longest = max(longest, len(s.text))
                bare += bool(BARE.fullmatch(s.text))
                frag += fragment(s.text, k == len(steps.thought) - 1)
                if s.text.endswith(":") and k + 1 < len(steps.thought):
                    after = steps.thought[k + 1].text
                    lead_ins += bool(FORMULA.match(after)) and not OPENS_MOVE.match(after)
            for m in MOVE.finditer(split.thought):
                moves += 1
                own += m.end() in starts
            for k, s in enumerate(steps.answer):
                answer_bare += bool(BARE.fullmatch(s.text))
                answer_frag += fragment(s.text, k == len(steps.answer) - 1)
        counts.sort()
        p90 = counts[min(len(counts) - 1, int(0.9 * len(counts)))]
        print(f"  {method:<18}{statistics.median(counts):>7g}{p90:>6}{longest:>9,}{single:>8,}{bare:>6}{frag:>6}"
              f"{lead_ins:>14}{f'{own}/{moves}':>16}   {answer_bare}, {answer_frag}")


def timing(items: list[tuple[str | None, thinking.ThinkingSplit]]) -> None:
    text = "\n\n".join(split.thought for _, split in items)
    text = (text * (200_000 // len(text) + 1))[:200_000]
    one_line = text.replace("\n", " ")
    for label, t in (("200 kB R1 thought", text), ("200 kB without a line break", one_line)):
        for method in ("moves", "sentences", "paragraphs", "lines"):
            started = time.perf_counter()
            n = len(segmentation.segment(t, method))
            print(f"  {label}, {method}: {n:,} steps in {time.perf_counter() - started:.3f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    # ../shared beside the repository (a worktree sits one folder deeper).
    default = next((p / "shared" / "data" / "reasoning-traces" for p in (ROOT.parent, ROOT.parent.parent)
                    if (p / "shared" / "data" / "reasoning-traces").is_dir()), None)
    parser.add_argument("--data", type=Path, default=default, required=default is None)
    args = parser.parse_args()
    sets = load(args.data)
    for name, items in sets.items():
        report(name, items)
    print("\ntiming")
    timing(sets["R1-distill (MATH, 40)"])


if __name__ == "__main__":
    main()
