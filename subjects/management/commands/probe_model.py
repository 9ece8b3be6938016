import json
from pathlib import Path

from django.core.management.base import CommandError

from annotation.commands import RefusingCommand
from annotation.models import Study
from runs.continuation import ModelServer, ProbeResult, ServerUnreachable, probe_model
from runs.transport import FatalRunError
from subjects import services
from subjects.models import SubjectModel


class Command(RefusingCommand):
    requires_system_checks: list[str] = []
    help = ("Detect which continuation modes (completions, prefill, instructed) an OpenAI-compatible server "
            "supports, with the evidence, and the strongest one. With --study, probe a subject model of the study "
            "and record the mode on it; with --base-url, probe any server and record nothing.")

    def add_arguments(self, parser):
        target = parser.add_mutually_exclusive_group(required=True)
        target.add_argument("--study", help="the study of the subject model named by --model (records the result)")
        target.add_argument("--base-url", help="e.g. http://127.0.0.1:8080/v1 (a plain probe: records nothing)")
        parser.add_argument("--model", required=True,
                            help="with --study: the subject model's name; with --base-url: the model name the "
                                 "server expects")
        parser.add_argument("--chat-template-file", type=Path,
                            help="with --base-url: the model's chat template, a Jinja file or its "
                                 "tokenizer_config.json (needed for the completions mode)")
        parser.add_argument("--api-key-env", default="", help="with --base-url: environment variable with the API key")
        parser.add_argument("--timeout", type=float, default=30.0, help="with --base-url: seconds per probe request")
        parser.add_argument("--json", action="store_true", help="print the result as JSON")

    def handle(self, *args, **opts):
        self.recorded = ""
        if opts["study"]:
            if opts["chat_template_file"]:
                raise CommandError("--chat-template-file goes with --base-url; a subject model's template is set "
                                   "with add_model --chat-template-file")
            result = self._probe_subject(opts["study"], opts["model"])
        else:
            result = self._probe_server(opts)
        if opts["json"]:
            self.stdout.write(json.dumps(result.to_dict(), indent=2, ensure_ascii=False))
        else:
            reported = f" (the server says {result.model_reported})" if result.model_reported else ""
            self.stdout.write(f"{result.model}{reported} at {result.base_url}")
            for e in result.modes:
                status = e.status if e.status is not None else "-"
                self.stdout.write(f"  {e.mode:<12} {'yes' if e.supported else 'no ':<3}  HTTP {status}  "
                                  f"{e.first_tokens!r}  {e.reason}")
            self.stdout.write(f"continuation mode: {result.chosen or 'none'}")
            if self.recorded:
                self.stdout.write(self.recorded)
        if result.chosen is None:
            raise CommandError("the server supports no continuation mode (see the evidence above)")

    def _probe_subject(self, study_name: str, name: str) -> ProbeResult:
        study = Study.objects.filter(name=study_name).first()
        if study is None:
            raise CommandError(f"no study named {study_name!r}")
        subject = SubjectModel.objects.filter(study=study, name=name).first()
        if subject is None:
            names = ", ".join(SubjectModel.objects.filter(study=study).order_by("name").values_list("name", flat=True))
            raise CommandError(f"no subject model named {name!r} in {study.name!r} (subject models: {names or 'none'})")
        try:
            result = services.do_probe_subject_model(subject)
        except (services.Unreachable, services.ProbeFailed) as exc:
            raise CommandError(str(exc)) from None
        self.recorded = f"recorded on subject model {subject.name} of {study.name!r}: continuation " \
                        f"{subject.continuation or 'none (not probed)'}"
        return result

    def _probe_server(self, opts) -> ProbeResult:
        template, eos = "", ""
        if opts["chat_template_file"]:
            try:
                source = services.chat_template_from_file(opts["chat_template_file"])
            except ValueError as exc:
                raise CommandError(str(exc)) from None
            template, eos = source.template, source.eos_token
        server = ModelServer(base_url=opts["base_url"], model=opts["model"], api_key_env=opts["api_key_env"],
                             chat_template=template, eos_token=eos, probe_timeout_seconds=opts["timeout"])
        try:
            return probe_model(server)
        except (ServerUnreachable, FatalRunError) as exc:
            raise CommandError(str(exc)) from None
