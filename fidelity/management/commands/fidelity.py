import sys

from django.core.management.base import BaseCommand, CommandError

from annotation.management.commands._progress import Bar
from annotation.models import Job, Study
from fidelity import extractor, services
from fidelity.core.selection import SYNTAX, FilterError
from fidelity.models import FidelityRun, Output, Suite
from judges.models import JudgeConfig
from reasonaudit.celery import app as celery_app
from runs import cli, engine
from subjects.models import SubjectModel


class Command(BaseCommand):
    requires_system_checks: list[str] = []
    help = ("Reasoning-fidelity diagnostics (paper 001): build or extend a suite of seeded variants of the study's "
            "problems (perturbations, counterfactuals) and run a subject model over it (forward traces of originals "
            "and variants, backward reconstructions); --wait follows it and prints the four-axis summary.")

    def add_arguments(self, parser):
        parser.add_argument("--study", required=True)
        parser.add_argument("--model", required=True, help="subject model name")
        parser.add_argument("--suite", default="fidelity", help="suite name (default: fidelity)")
        parser.add_argument("--axes", default=services.DEFAULT_AXES,
                            help="comma-separated: perturbation, counterfactual, backward, imported (the variants an "
                                 "import linked: --suite gsm-plus or menatqa)")
        parser.add_argument("--per-problem", type=int, default=1, help="variants per strategy and problem (K)")
        parser.add_argument("--problems", default="all", help=f"which originals: {SYNTAX}")
        parser.add_argument("--seed", type=int, default=0, help="the suite's seed (a new suite only)")
        parser.add_argument("--force", action="store_true", help="ask again even where a cached answer exists")
        parser.add_argument("--budget", type=float, help="stop once the estimated cost reaches this many USD")
        parser.add_argument("--wait", action="store_true", help="show progress, wait, print the summary")
        parser.add_argument("--extract-forms", metavar="JUDGE",
                            help="only extract the logical forms of --model's newest run with this LLM judge "
                                 "configuration's model (the optional extractor of spec §7)")
        parser.add_argument("--pdr", action="store_true",
                            help="only print the performance drop rate per perturbation type of --model's traces on "
                                 "imported (GSM-Plus, MenatQA) or generated variants, with the confusion table")

    def handle(self, *args, **opts):
        study = Study.objects.filter(name=opts["study"]).first()
        if study is None:
            raise CommandError(f"no study named {opts['study']!r}")
        linked = services.link_imports(study)
        if linked.linked or linked.unmatched:
            self.stdout.write(f"imported variants: {linked.linked} linked to their originals, "
                              f"{len(linked.unmatched)} without an original in the study")
        if opts["pdr"]:
            return self._pdr(study, opts["model"], opts["suite"] if opts["suite"] != "fidelity" else None)
        subject = SubjectModel.objects.filter(study=study, name=opts["model"]).select_related("prompt_template").first()
        if subject is None:
            names = ", ".join(study.subject_models.values_list("name", flat=True)) or "none"
            raise CommandError(f"no subject model named {opts['model']!r} in {study.name!r} (subject models: {names})")
        if opts["extract_forms"]:
            return self._extract(study, subject, opts["extract_forms"], opts["force"])
        try:
            axes = services.parse_axes(opts["axes"])
            made = services.do_create_suite(study, opts["suite"], axes=axes, per_problem=opts["per_problem"],
                                            problems=opts["problems"], seed=opts["seed"])
        except (ValueError, FilterError) as exc:
            raise CommandError(str(exc)) from None
        skipped = sum(made.skipped.values())
        self.stdout.write(f"suite {made.suite.name}: {made.created} new variant(s), {made.existing} kept; "
                          f"counterfactual golds {made.derived_total} derived, {made.unknown_total} unknown "
                          f"(lenient AA); "
                          f"{skipped} skipped")
        for reason, n in sorted(made.skipped.items()):
            self.stdout.write(f"  skipped {n}: {reason}")
        eager = celery_app.conf.task_always_eager
        try:
            fid_run = services.do_start_run(made.suite, subject, axes=axes, problems=opts["problems"],
                                            force=opts["force"], budget_usd=opts["budget"], queue=not eager)
        except (services.RunConflict, ValueError, FilterError) as exc:
            raise CommandError(str(exc)) from None
        job = fid_run.job
        self.stdout.write(f"fidelity run {fid_run.pk} (job {job.pk}): {subject.name} v{fid_run.config_version} on "
                          f"{job.total} problem(s), axes {', '.join(axes)}")
        if not (opts["wait"] or eager):
            self.stdout.write(f"queued; the report: /fidelity/runs/{fid_run.pk}/")
            return
        job = cli.to_the_end(job, label=f"fidelity {subject.name}", unit="problem",
                             show=sys.stderr.isatty() or opts["wait"],
                             run_here=(lambda bar: services.run_inline(fid_run, progress=bar)) if eager else None)
        fid_run.run.refresh_from_db()
        self.stdout.write(f"{job.status}: {job.done} of {job.total} problems done, {job.failed} failed; "
                          f"{cli.usage(fid_run.run)}")
        if job.error:
            self.stderr.write(job.error)
        self._summary(services.report(fid_run))
        if job.status != Job.Status.SUCCEEDED:
            sys.exit(1)

    def _extract(self, study, subject, judge_name: str, force: bool) -> None:
        judge = JudgeConfig.objects.filter(study=study, name=judge_name).first()
        if judge is None:
            raise CommandError(f"no judge configuration named {judge_name!r}")
        fid_run = FidelityRun.objects.filter(subject=subject).select_related("suite", "run").order_by("-pk").first()
        if fid_run is None:
            raise CommandError(f"subject model {subject.name} has no fidelity run")
        try:
            run = extractor.do_start_extraction(fid_run, judge, force=force, queue=not celery_app.conf.task_always_eager)
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        bar = Bar(f"forms {judge.name}", unit="trace", unit_scale=False, enabled=sys.stderr.isatty())
        job = engine.run_inline(run, progress=bar) if celery_app.conf.task_always_eager else cli.follow(run.job, bar)
        bar.close()
        n = Output.objects.filter(fid_run=fid_run, forms_source=extractor.source_name(judge)).count()
        self.stdout.write(f"{job.status}: logical forms of {n} forward trace(s) of fidelity run {fid_run.pk} by "
                          f"{extractor.source_name(judge)}; {job.failed} failed")
        if job.status != Job.Status.SUCCEEDED:
            sys.exit(1)

    def _pdr(self, study, model: str, suite_name: str | None) -> None:
        suite = None
        if suite_name:
            suite = Suite.objects.filter(study=study, name=suite_name).first()
            if suite is None:
                raise CommandError(f"no suite named {suite_name!r}")
        rows = services.pdr(study, model, suite=suite)
        if not rows:
            raise CommandError(f"no (original, variant) pair with checked traces of {model!r} on both")
        self.stdout.write(f"{'perturbation type':<32}{'n':>4}{'acc(orig)':>10}{'acc(var)':>10}{'PDR':>8}"
                          f"{'both':>6}{'seed only':>10}{'var only':>9}{'neither':>8}")
        for r in rows:
            pdr = "-" if r.pdr is None else f"{r.pdr:.3f}"
            self.stdout.write(f"{r.perturbation:<32}{r.n:>4}{r.acc_original:>10.3f}{r.acc_variant:>10.3f}{pdr:>8}"
                              f"{r.both:>6}{r.seed_only:>10}{r.variant_only:>9}{r.neither:>8}")

    def _summary(self, rep: services.Report) -> None:
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
