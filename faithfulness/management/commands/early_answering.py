from faithfulness.management.commands._common import FaithfulnessCommand
from faithfulness.summaries import early_summary


class Command(FaithfulnessCommand):
    help = ("Early answering of a reasoning model (Lanham et al. 2023): cut each generated trace's thought after "
            "step k (every k, or a grid of fractions), close it and force the answer; print the same-answer curve, "
            "AOC, the decision point and the share of thought after it. The same as run early_answering; --wait "
            "follows it to the end (exit 1 unless it succeeded).")

    kind = "early_answering"

    def summary(self, record) -> None:
        s = early_summary(record)

        def num(v, fmt=".3f"):
            return "—" if v is None else format(v, fmt)

        self.stdout.write(f"grid {s['grid']} ({s['mode']}), traces with a thought {s['traces']}, "
                          f"skipped {s['skipped']}")
        self.stdout.write(f"  {'thought':>8}  {'same answer':>11}")
        for p in s["curve"]:
            self.stdout.write(f"  {p['x']:>8.0%}  {num(p['same'] if p['n'] else None):>11}")
        self.stdout.write(f"AOC = {num(s['aoc'])}; decision point at {num(s['decision_fraction'], '.0%')} of the "
                          f"thought on average ({s['decided']} traces decided); thought after it {num(s['after_share'], '.0%')}")
