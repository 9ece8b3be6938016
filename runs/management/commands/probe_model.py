import json
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from runs.chat_template import ChatTemplateError, template_from_text
from runs.continuation import ModelServer, ServerUnreachable, probe_model
from runs.transport import FatalRunError


class Command(BaseCommand):
    requires_system_checks: list[str] = []
    help = ("Detect which continuation modes (completions, prefill, instructed) an OpenAI-compatible server "
            "supports, with the evidence, and the strongest one.")

    def add_arguments(self, parser):
        parser.add_argument("--base-url", required=True, help="e.g. http://127.0.0.1:8080/v1")
        parser.add_argument("--model", required=True, help="the model name the server expects")
        parser.add_argument("--chat-template-file", type=Path,
                            help="the model's chat template: a Jinja file or its tokenizer_config.json "
                                 "(needed for the completions mode)")
        parser.add_argument("--api-key-env", default="", help="environment variable holding the API key")
        parser.add_argument("--timeout", type=float, default=30.0, help="seconds per probe request")
        parser.add_argument("--json", action="store_true", help="print the result as JSON")

    def handle(self, *args, **opts):
        template, eos = "", ""
        if opts["chat_template_file"]:
            path: Path = opts["chat_template_file"]
            if not path.is_file():
                raise CommandError(f"{path}: no such file")
            try:
                source = template_from_text(path.read_text(encoding="utf-8"))
            except (ChatTemplateError, UnicodeDecodeError) as exc:
                raise CommandError(f"{path}: {exc}") from None
            template, eos = source.template, source.eos_token
        server = ModelServer(base_url=opts["base_url"], model=opts["model"], api_key_env=opts["api_key_env"],
                             chat_template=template, eos_token=eos, probe_timeout_seconds=opts["timeout"])
        try:
            result = probe_model(server)
        except (ServerUnreachable, FatalRunError) as exc:
            raise CommandError(str(exc)) from None
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
        if result.chosen is None:
            raise CommandError("the server supports no continuation mode (see the evidence above)")
