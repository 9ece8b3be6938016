from faithfulness.management.commands._common import FaithfulnessCommand
from faithfulness.summaries import ifr_summary


class Command(FaithfulnessCommand):
    help = ("Intervene on causally relevant steps of a subject model's generated traces (value_flip, step_ablation, "
            "paraphrase control, tool_result), re-decode from the edited prefix and print IFR per kind and mode. "
            "The same as run interventions; --wait follows it to the end (exit 1 unless it succeeded).")

    kind = "interventions"

    def summary(self, record) -> None:
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
