from django.core.management.base import CommandError

from fidelity import extractor
from fidelity.imported import pdr
from fidelity.models import FidelityRun, Output, Suite
from fidelity.report import Report, report
from fidelity.suites import link_imports
from judges.models import JudgeConfig
from runs.cli import KindCommand
from subjects.models import SubjectModel


class Command(KindCommand):
    """``run fidelity`` under its own name, plus two things that start no fidelity run: --extract-forms and --pdr."""

    kind = "fidelity"
    noun = "problem"
    help = ("Reasoning-fidelity diagnostics (paper 001): build or extend a suite of seeded variants of the study's "
            "problems (perturbations, counterfactuals) and run a subject model over it (forward traces of originals "
            "and variants, backward reconstructions); the same as run fidelity; --wait follows it and prints the "
            "four-axis summary.")

    def add_kind_parser(self, parser, kind) -> None:
        super().add_kind_parser(parser, kind)
        parser.add_argument("--extract-forms", metavar="JUDGE",
                            help="only extract the logical forms of --model's newest run with this LLM judge "
                                 "configuration's model (the optional extractor of spec §7)")
        parser.add_argument("--pdr", action="store_true",
                            help="only print the performance drop rate per perturbation type of --model's traces on "
                                 "imported (GSM-Plus, MenatQA) or generated variants, with the confusion table")

    def handle(self, *args, **opts):
        study = self.find_study(opts)
        linked = link_imports(study)
        if linked.linked or linked.unmatched:
            self.stdout.write(f"imported variants: {linked.linked} linked to their originals, "
                              f"{len(linked.unmatched)} without an original in the study")
        if opts["pdr"]:
            return self._pdr(study, opts["model"], opts["suite"] if opts["suite"] not in (None, "fidelity") else None)
        if opts["extract_forms"] and not opts["cancel"]:
            subject = SubjectModel.objects.filter(study=study, name=opts["model"]).first()
            if subject is None:
                names = ", ".join(study.subject_models.values_list("name", flat=True)) or "none"
                raise CommandError(f"no subject model named {opts['model']!r} in {study.name!r} "
                                   f"(subject models: {names})")
            return self._extract(study, subject, opts["extract_forms"], opts)
        # Planned in the job, as from the browser and the API: the job makes the suite's variants and picks the
        # items (fidelity.running.plan_run_items); --wait follows it and prints the suite report from its params.
        super().handle(*args, **opts)

    def print_summary(self, record: FidelityRun) -> None:
        """The run as planned (its job made the variants and picked the problems), the suite report, the summary."""
        record.job.refresh_from_db()
        self.stdout.write(self.describe(record))
        self._suite_report(record.suite.name, record.job.params.get("suite_report"))
        self._summary(report(record))

    def describe(self, record) -> str:
        if not isinstance(record, FidelityRun):  # the forms extraction's Run
            return super().describe(record)
        items = f"{record.job.total} problem(s)" if record.run.chunks.exists() else "problems planned in its job"
        return (f"fidelity run {record.pk} (job {record.job.pk}): {record.subject.name} v{record.config_version} "
                f"on {items}, axes {', '.join(record.axes)}")

    def _suite_report(self, suite: str, made: dict | None) -> None:
        if made is None:  # planning failed: the job's error says why
            return
        skipped = made["skipped"]
        self.stdout.write(f"suite {suite}: {made['variants_created']} new variant(s), {made['variants_kept']} kept; "
                          f"counterfactual golds {made['golds_derived_total']} derived, {made['golds_unknown_total']} "
                          f"unknown (lenient AA); {sum(skipped.values())} skipped")
        for reason, n in sorted(skipped.items()):
            self.stdout.write(f"  skipped {n}: {reason}")

    def _extract(self, study, subject, judge_name: str, opts: dict) -> None:
        judge = JudgeConfig.objects.filter(study=study, name=judge_name).first()
        if judge is None:
            raise CommandError(f"no judge configuration named {judge_name!r}")
        record = FidelityRun.objects.filter(subject=subject).select_related("suite", "run").order_by("-pk").first()
        if record is None:
            raise CommandError(f"subject model {subject.name} has no fidelity run")
        self.noun = "trace"
        run, job = self.start_and_follow(
            lambda queue: extractor.do_start_extraction(record, judge, force=opts["force"] == "true", queue=queue),
            opts, label=f"forms {judge.name}")
        if job is not None:
            n = Output.objects.filter(fid_run=record, forms_source=extractor.source_name(judge)).count()
            self.stdout.write(f"{job.status}: logical forms of {n} forward trace(s) of fidelity run {record.pk} by "
                              f"{extractor.source_name(judge)}; {job.failed} failed")
        self.exit_status(job)

    def _pdr(self, study, model: str, suite_name: str | None) -> None:
        suite = None
        if suite_name:
            suite = Suite.objects.filter(study=study, name=suite_name).first()
            if suite is None:
                raise CommandError(f"no suite named {suite_name!r}")
        rows = pdr(study, model, suite=suite)
        if not rows:
            raise CommandError(f"no (original, variant) pair with checked traces of {model!r} on both")
        self.stdout.write(f"{'perturbation type':<32}{'n':>4}{'acc(orig)':>10}{'acc(var)':>10}{'PDR':>8}"
                          f"{'both':>6}{'seed only':>10}{'var only':>9}{'neither':>8}")
        for r in rows:
            drop = "-" if r.pdr is None else f"{r.pdr:.3f}"
            self.stdout.write(f"{r.perturbation:<32}{r.n:>4}{r.acc_original:>10.3f}{r.acc_variant:>10.3f}{drop:>8}"
                              f"{r.both:>6}{r.seed_only:>10}{r.variant_only:>9}{r.neither:>8}")

    def _summary(self, rep: Report) -> None:
        def f(x):
            return "-" if x is None else f"{x:.4f}"

        s = rep.summary
        self.stdout.write("four-axis summary:")
        self.stdout.write(f"  consistency {f(s['consistency'])}  transitivity T^ {f(s['transitivity'])}  "
                          f"overall reasoning {f(s['overall_reasoning'])}")
        self.stdout.write(f"  counterfactual ({s['pairs']} pairs): CP {f(s['cp_value'])} (diff {f(s['cp_diff'])})  "
                          f"RA {f(s['ra'])}  AA {f(s['aa'])}  SC {f(s['sc'])}; golds derived {s['golds_derived']}, "
                          f"unknown {s['golds_unknown']}")
        self.stdout.write(f"  robustness (mean over perturbations) {f(s['robustness_mean'])}; F {f(s['faithfulness_mean'])}"
                          f"  P {f(s['plausibility_mean'])}  hallucination {f(s['hallucination_rate'])}")
        self.stdout.write("perturbation                EMdrop   CoTdrop  SemCons  ReasCons ConfDeg  Robust   "
                          "BL_EM    Var_EM   BL_CoT   Var_CoT  n")
        for r in rep.perturbation:
            self.stdout.write(f"  {r.strategy:<24}" + " ".join(f"{v:8.4f}" for v in (
                r.em_drop, r.cot_drop, r.sem, r.reason, r.conf_drop, r.robustness, r.bl_em, r.var_em, r.bl_cot,
                r.var_cot)) + f"  {r.n}")
