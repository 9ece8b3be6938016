"""What every command that starts a run of model calls shares (RunCommand): the
study, ``--force``, ``--budget``, ``--wait``, ``--cancel``, starting through the
kind's service, following the job to its end with a progress bar (``--wait``
follows a worker for every kind; with Celery eager the work runs here), the
report with the run's usage line, and exit status 1 unless every item succeeded.

``KindCommand`` is that command generated from a declared kind (runs.kinds): ``manage.py run KIND`` and
its aliases (``judge``, ``generate``) take one option per parameter of the kind's serializer, with its
label, help, range, choices and default, and validate through the serializer, as the runs page and the
REST API do."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Iterable
from typing import Any

from django.core.management.base import CommandError
from rest_framework import serializers

from annotation import jobs
from annotation.commands import RefusingCommand
from annotation.management.commands._progress import Bar
from annotation.models import Job, Study
from runs import engine, kinds, params
from runs.clients import client_for
from runs.engine import ACTIVE, RunConflict
from runs.models import Run


def follow(job: Job, bar: Bar) -> Job:
    """Poll a queued job until it ends, drawing its live progress. Ctrl-C stops
    waiting, not the job."""
    last, changed = None, time.monotonic()
    try:
        while True:
            job.refresh_from_db()
            progress = jobs.live_progress(job)
            bar(progress["done"], progress["total"])
            if job.finished:
                return job
            if progress != last:
                last, changed = progress, time.monotonic()
            elif time.monotonic() - changed > engine.lease_seconds():
                # No progress for a whole lease: a worker may have died with our chunk
                # (a live worker renews its lease, so its chunk is left alone).
                engine.resume_stalled()
                changed = time.monotonic()
            time.sleep(0.5)
    except KeyboardInterrupt:
        bar.close()
        raise CommandError(f"stopped waiting; job {job.pk} goes on (cancel it with --cancel)") from None


def to_the_end(job: Job, *, label: str, unit: str, show: bool, run_here: Callable[[Bar], Job] | None = None) -> Job:
    """Draw a progress bar until a run's job ends: the work done in this process by ``run_here`` (Celery
    eager, or a command that runs its own work), else the worker's progress followed."""
    bar = Bar(label, unit=unit, unit_scale=False, enabled=show)
    try:
        return run_here(bar) if run_here is not None else follow(job, bar)
    finally:
        bar.close()


def usage(run: Run) -> str:
    """Requests, cache hits, tokens and cost; with calls whose tokens the server
    never reported, the cost is a lower bound ("+")."""
    unknown = f" (+ unknown in {run.unknown_token_calls} calls)" if run.unknown_token_calls else ""
    return (f"{run.requests} requests, {run.cache_hits} cache hits, {run.prompt_tokens}+{run.completion_tokens} tokens"
            f"{unknown}, ${run.cost_usd:.4f}{'+' if run.unknown_token_calls else ''}")


def run_of(row: Any) -> Run:
    """The engine's Run of a kind's row (a kind without a row of its own uses the Run itself)."""
    return row if isinstance(row, Run) else row.run


class RunCommand(RefusingCommand):
    """A command that starts (or cancels) runs of one kind. A subclass adds its own arguments in
    ``add_kind_arguments`` and calls ``start_and_follow`` with a function that starts the run through
    the kind's service; ``describe`` and ``report`` say what was started and what it did."""

    requires_system_checks: list[str] = []
    noun = "item"  # what an item is, in the progress bar and the report
    done_word = "done"  # "4 of 4 traces judged"
    # A command whose stdout is data (scan prints its validation report there as JSON, for scripts and jq)
    # writes the run's lines (what was started, "queued", the report) to stderr instead.
    data_on_stdout = False

    def say(self, line: str) -> None:
        (self.stderr if self.data_on_stdout else self.stdout).write(line)

    def add_arguments(self, parser) -> None:
        parser.add_argument("--study", required=True)
        self.add_kind_arguments(parser)
        parser.add_argument("--force", action="store_true", help="ask again even where a cached answer exists")
        parser.add_argument("--budget", type=params.cli_type("budget_usd"),
                            help=f"stop once the estimated cost reaches this many USD ({params.range_text('budget_usd')})")
        parser.add_argument("--wait", action="store_true", help="show progress and wait for the end (a worker does the work)")
        parser.add_argument("--cancel", action="store_true", help="cancel the run in progress instead")

    def add_kind_arguments(self, parser) -> None:  # noqa: B027 - a kind may have none
        pass

    def find_study(self, opts: dict) -> Study:
        study = Study.objects.filter(name=opts["study"]).first()
        if study is None:
            raise CommandError(f"no study named {opts['study']!r}")
        return study

    def cancel_runs(self, rows: Iterable[Any], what: str) -> None:
        rows = list(rows)
        if not rows:
            self.say(f"{what} has no run in progress")
        for row in rows:
            job = jobs.cancel(row.job)
            self.say(f"run {row.pk} (job {job.pk}): {'cancelled' if job.finished else 'cancel requested'}")

    def describe(self, row: Any) -> str:
        return f"{run_of(row).kind} run {row.pk} (job {row.job.pk}): {row.job.total} {self.noun}s"

    def report(self, row: Any) -> str:
        """The kind's own figures, after the run ended ("" for none)."""
        return ""

    def start_and_follow(self, start: Callable[[bool], Any], opts: dict, *, label: str,
                         errors: tuple[type[Exception], ...] = ()) -> tuple[Any, Job | None]:
        """Start a run with ``start(queue)``; without --wait (and not eager) say it is queued and return
        (row, None); else follow it to the end, print the report, and return (row, the ended job)."""
        from reasonaudit.celery import app as celery_app

        eager = celery_app.conf.task_always_eager
        try:
            row = start(not eager)
        except (RunConflict, ValueError, *errors) as exc:
            raise CommandError(str(exc)) from None
        run = run_of(row)
        self.say(self.describe(row))
        if not (opts["wait"] or eager):
            self.say(f"queued; follow it with --wait, or on the web page of job {row.job.pk}")
            return row, None
        job = to_the_end(row.job, label=label, unit=self.noun, show=sys.stderr.isatty() or opts["wait"],
                         run_here=(lambda bar: engine.run_here(run, progress=bar)) if eager else None)
        row.refresh_from_db()
        run.refresh_from_db()
        extra = self.report(row)
        self.say(f"{job.status}: {job.done} of {job.total} {self.noun}s {self.done_word}, {job.failed} failed; "
                 f"{extra + '; ' if extra else ''}{usage(run)}")
        for note, n in run.notes.items():
            self.stderr.write(f"warning: {note} ({n} {self.noun}{'s' if n != 1 else ''})")
        if job.error:
            self.stderr.write(job.error)
        return row, job

    @staticmethod
    def exit_status(job: Job | None) -> None:
        """Exit 1 unless the run succeeded (failed, partial or cancelled)."""
        if job is not None and job.status != Job.Status.SUCCEEDED:
            sys.exit(1)


# --------------------------------------------------------------------------
# Commands generated from a declared kind


#: Older spellings the commands keep accepting (``--budget`` came before the parameter was ``budget_usd``).
ALIASES = {"budget_usd": ("--budget",)}


def option(name: str) -> str:
    return f"--{name.replace('_', '-')}"


def _checked_by(f: serializers.Field) -> Callable[[str], Any]:
    """An argparse ``type`` that refuses what the serializer field refuses, with its message."""

    def parse(text: str) -> Any:
        try:
            f.run_validation(text)
        except serializers.ValidationError as exc:
            messages = exc.detail if isinstance(exc.detail, list) else [exc.detail]
            raise argparse.ArgumentTypeError(" ".join(str(m) for m in messages)) from None
        return text  # the serializer validates the text again with the others (one validation)

    parse.__name__ = "value"
    return parse


def _help(name: str, f: serializers.Field) -> str:
    text = f"{kinds.label_of(name, f)}: {f.help_text or ''}".rstrip(": ")
    if f.required:
        text += " (required)"
    elif f.default not in (serializers.empty, None, "", False):
        default = ",".join(map(str, f.default)) if isinstance(f.default, (list, tuple)) else f.default
        text += f" (default: {default})"
    return text.replace("%", "%%")


def add_parameter_options(parser: argparse.ArgumentParser, kind: kinds.RunKind) -> None:
    """One option per parameter of the kind's serializer, the shared ones last. Every default is None:
    what is not given is not sent, so the serializer's default applies, as on the page and in the API."""
    for name, f in kinds.input_fields(kind, None).items():
        flags = [option(name), *ALIASES.get(name, ())]
        common: dict[str, Any] = {"dest": name, "default": None, "help": _help(name, f)}
        if isinstance(f, serializers.BooleanField) and not f.allow_null:
            parser.add_argument(*flags, action="store_const", const="true", **common)
        elif isinstance(f, serializers.BooleanField):
            parser.add_argument(*flags, choices=["true", "false"], **common)
        elif isinstance(f, serializers.ChoiceField):
            parser.add_argument(*flags, choices=[str(c) for c in f.choices], **common)
        elif isinstance(f, serializers.ListField):
            parser.add_argument(*flags, metavar="A,B,...", **common)
        else:
            metavar = "N" if isinstance(f, (serializers.IntegerField, serializers.FloatField)) else "TEXT"
            parser.add_argument(*flags, type=_checked_by(f), metavar=metavar, **common)


def parameters(kind: kinds.RunKind, opts: dict[str, Any]) -> dict[str, Any]:
    """The options given, as the serializer takes them (a list parameter from its comma-separated text)."""
    data: dict[str, Any] = {}
    for name, f in kinds.input_fields(kind, None).items():
        value = opts.get(name)
        if value is None:
            continue
        data[name] = [v.strip() for v in value.split(",") if v.strip()] if isinstance(f, serializers.ListField) else value
    return data


def refusal(exc: serializers.ValidationError) -> CommandError:
    """A refusal of the serializer or the service as the command says it: by the option's name."""
    detail = exc.detail if isinstance(exc.detail, dict) else {"non_field_errors": exc.detail}
    lines = []
    for name, messages in detail.items():
        for message in messages if isinstance(messages, list) else [messages]:
            lines.append(str(message) if name == "non_field_errors" else f"{option(str(name))}: {message}")
    return CommandError("; ".join(lines))


def _asked(run: Run, given: dict[str, Any]) -> bool:
    """Whether ``run`` was asked with the parameters ``given`` (``--cancel --judge J`` cancels J's runs only):
    what its job keeps of the request (runs.kinds), else of its own params (older runs); a parameter it
    kept nothing of does not rule it out."""
    params_ = run.job.params or {}
    asked = params_.get("request") or params_
    return all(name not in asked or str(asked[name]) == str(value) for name, value in given.items())


class KindCommand(RunCommand):
    """Start (or cancel) runs of a declared kind: ``kind`` for an alias (``judge``), else the first
    argument (``run KIND``)."""

    kind = ""

    def add_arguments(self, parser) -> None:
        if self.kind:
            self.add_kind_parser(parser, kinds.get(self.kind))
            return
        sub = parser.add_subparsers(dest="kind", required=True, metavar="KIND",
                                    title="kinds", description=", ".join(k.name for k in kinds.all_kinds()))
        for kind in kinds.all_kinds():
            self.add_kind_parser(sub.add_parser(kind.name, help=kind.help, description=kind.help), kind)

    def add_kind_parser(self, parser, kind: kinds.RunKind) -> None:
        parser.add_argument("--study", required=True, help="the study's name")
        add_parameter_options(parser, kind)
        parser.add_argument("--wait", action="store_true", help="show progress and wait for the end (a worker does "
                                                                "the work); exit 1 unless every item succeeded")
        parser.add_argument("--cancel", action="store_true", help=f"cancel the study's {kind.name} runs in progress "
                                                                  "instead")

    def handle(self, *args, **opts) -> None:
        kind = kinds.get(self.kind or opts["kind"])
        study = self.find_study(opts)
        if opts["cancel"]:
            given = parameters(kind, opts)
            runs = Run.objects.filter(kinds.runs_of(kind.name), job__study=study, job__status__in=ACTIVE)
            return self.cancel_runs([r for r in runs.select_related("job") if _asked(r, given)],
                                    f"study {study.name} ({kind.name}{', ' if given else ''}"
                                    f"{', '.join(f'{k}={v}' for k, v in given.items())})")
        row, job = self.start_kind(kind, study, opts)
        if job is not None:
            self.print_summary(row)
        self.exit_status(job)

    def start_kind(self, kind: kinds.RunKind, study: Study, opts: dict[str, Any]) -> tuple[Any, Job | None]:
        """Start a run of ``kind`` with the options given (as the runs page and REST start it) and follow it
        as ``start_and_follow`` does; (the kind's row, the ended job or None when it was only queued)."""
        self.noun = client_for(kind.engine_kind).noun
        self.kind_report = kind.report

        def start(queue: bool) -> Any:
            try:
                return kinds.start(kind.name, study, parameters(kind, opts), None)
            except serializers.ValidationError as exc:
                raise refusal(exc) from None

        return self.start_and_follow(start, opts, label=f"{kind.name} in {study.name}")

    kind_report: Callable[[Any], str] | None = None

    def print_summary(self, row: Any) -> None:  # noqa: B027 - an alias may print its kind's figures
        """What an alias prints after the run ended (``interventions``: IFR per kind and mode)."""

    def describe(self, row: Any) -> str:
        run, n = kinds.run_of(row), row.job.total
        return f"{kinds.name_of(run)} run {run.pk} (job {row.job.pk}): {n} {self.noun}{'s' if n != 1 else ''}"

    def report(self, row: Any) -> str:
        return self.kind_report(row) if self.kind_report is not None else ""
