from faithfulness.core import anytime
from faithfulness.management.commands._common import FaithfulnessCommand
from faithfulness.summaries import anytime_summary, thinking_budget_summary


class Command(FaithfulnessCommand):
    help = ("Anytime profile of a subject model: truncate each generated trace at every budget of a grid and force "
            "an answer (a trace that ended within the budget keeps its own), then print Acc(b) and AUC_any. "
            "The same as run anytime; --wait follows it to the end (exit 1 unless it succeeded).")

    kind = "anytime"

    def summary(self, record) -> None:
        s = anytime_summary(record)
        self.stdout.write(f"grid {s['grid']} ({s['mode']}), N = {s['n']}")
        self.stdout.write(f"  {'budget':>8}  {'Acc(b)':>7}  own answer")
        for p in s["points"]:
            acc = "—" if p["acc"] is None else f"{p['acc']:.3f}"
            self.stdout.write(f"  {p['budget']:>8}  {acc:>7}  {p['own_answer']}")
        self.stdout.write(f"AUC_any = {s['auc']:.3f}" if s["auc"] is not None else "AUC_any undefined")
        if s["unit"] == anytime.THINKING:
            t = thinking_budget_summary(record)
            used = ", ".join(f"{u:.0f}" for u in t["thinking_tokens"])
            self.stdout.write(f"mean thinking tokens used per budget: {used}")
            self.stdout.write(f"AUC_think = {t['auc_think']:.3f}" if t["auc_think"] is not None
                              else "AUC_think undefined")
