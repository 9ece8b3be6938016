from faithfulness.core import edits
from faithfulness.management.commands._common import FaithfulnessCommand
from faithfulness.running import DEFAULT_SEED, do_start_interventions
from faithfulness.summaries import ifr_summary
from runs import params


class Command(FaithfulnessCommand):
    help = ("Intervene on causally relevant steps of a subject model's generated traces (value_flip, step_ablation, "
            "paraphrase control, tool_result), re-decode from the edited prefix and print IFR per kind and mode. "
            "--wait follows it to the end (exit 1 unless it succeeded).")

    def add_kind_arguments(self, parser):
        super().add_kind_arguments(parser)
        parser.add_argument("--kinds", default=",".join(edits.KINDS), help=f"comma-separated: {', '.join(edits.KINDS)}")
        parser.add_argument("--per-trace", type=params.cli_type("per_trace"), default=3,
                            help=f"at most K target steps per trace (default 3; {params.range_text('per_trace')})")
        parser.add_argument("--seed", type=params.cli_type("seed"), default=DEFAULT_SEED,
                            help="seed of the flipped values")
        parser.add_argument("--channel", choices=["thought", "answer"],
                            help="edit the thought's steps (the continuation re-opens the thought) or the answer's "
                                 "(default: the channel that holds the reasoning: the thought when the traces have one)")

    def handle(self, *args, **opts):
        self.run_kind(opts, lambda subject, queue: do_start_interventions(
            subject, kinds=opts["kinds"], per_trace=opts["per_trace"], seed=opts["seed"], mode=opts["mode"],
            queue=queue, force=opts["force"], budget_usd=opts["budget"], limit=opts["limit"], cohort=opts["cohort"], channel=opts["channel"]))

    def print_summary(self, record) -> None:
        s = ifr_summary(record)
        self.stdout.write(f"traces {s['traces']}, skipped {s['skipped']} "
                          f"({'; '.join(f'{n}: {r}' for r, n in s['skipped_reasons'].items()) or 'none'}); "
                          f"interventions {dict(s['status_counts'])}")

        def fmt(r):
            if r is None or r["value"] is None:
                return "—"
            ci = f" [{r['ci'][0]:.3f}, {r['ci'][1]:.3f}]" if r["ci"] else ""
            return f"{r['value']:.3f}{ci} (N={r['traces']})"

        for r in s["rows"]:
            if "invariance" in r:
                self.stdout.write(f"  {r['kind']:<18} {r['mode']:<12} n={r['interventions']:<4} "
                                  f"invariance {fmt(r['invariance'])}")
            else:
                self.stdout.write(f"  {r['kind']:<18} {r['mode']:<12} n={r['interventions']:<4} "
                                  f"strict {fmt(r['strict'])}  lenient {fmt(r['lenient'])}  "
                                  f"monotone {fmt(r['monotone'])}  (strict computed {r['strict_computed']}, "
                                  f"answers forced {r.get('forced', 0)}, "
                                  f"no answer even when forced {r['no_answer']}: left out)")
