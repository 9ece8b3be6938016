
from faithfulness.core import anytime
from faithfulness.management.commands._common import FaithfulnessCommand
from faithfulness.running import do_start_anytime
from faithfulness.summaries import anytime_summary, thinking_budget_summary


class Command(FaithfulnessCommand):
    help = ("Anytime profile of a subject model: truncate each generated trace at every budget of a grid and force "
            "an answer (a trace that ended within the budget keeps its own), then print Acc(b) and AUC_any. "
            "--wait follows it to the end (exit 1 unless it succeeded).")

    def add_kind_arguments(self, parser):
        super().add_kind_arguments(parser)
        parser.add_argument("--budgets", default=anytime.DEFAULT_TOKEN_GRID,
                            help=f"tokens:B1,B2,...,full, steps:B1,...,full, or thinking:B1,...,full (the thought "
                                 f"cut at B thinking tokens, closed, the answer forced; default "
                                 f"{anytime.DEFAULT_TOKEN_GRID})")

    def handle(self, *args, **opts):
        anytime.parse_grid(opts["budgets"])
        self.run_kind(opts, lambda subject, queue: do_start_anytime(
            subject, grid=opts["budgets"], mode=opts["mode"], queue=queue, force=opts["force"],
            budget_usd=opts["budget"], limit=opts["limit"], cohort=opts["cohort"]))

    def print_summary(self, record) -> None:
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
