import argparse
from pathlib import Path

from django.core.exceptions import ValidationError
from django.core.management.base import CommandError

from annotation.commands import RefusingCommand
from annotation.models import Study
from judges import services
from judges.models import JudgeConfig
from judges.serializers import EDITABLE_FIELDS

AUTO = object()  # --max-tokens auto: unset, derived per trace


def _max_tokens(value: str):
    if value.strip().lower() == "auto":
        return AUTO
    try:
        return int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number or auto, not {value!r}") from None


class Command(RefusingCommand):
    requires_system_checks: list[str] = []
    help = "Create or update an LLM judge (any OpenAI-compatible endpoint) of a study."

    def add_arguments(self, parser):
        parser.add_argument("--study", required=True)
        parser.add_argument("--name", required=True, help="judge name; its labels are the source judge:NAME")
        parser.add_argument("--base-url", required=True, help="e.g. http://127.0.0.1:8080/v1")
        parser.add_argument("--model", required=True)
        parser.add_argument("--mode", choices=JudgeConfig.Mode.values)
        parser.add_argument("--api-key-env", help="environment variable holding the API key (never stored)")
        parser.add_argument("--concurrency", type=int, help="requests in flight")
        parser.add_argument("--temperature", type=float)
        parser.add_argument("--max-tokens", type=_max_tokens, metavar="N|auto",
                            help="tokens per answer; auto (the default) derives it from each trace's steps")
        parser.add_argument("--output-mode", choices=JudgeConfig.OutputMode.values)
        parser.add_argument("--max-retries", type=int)
        parser.add_argument("--timeout", type=float, dest="timeout_seconds", help="seconds per request")
        parser.add_argument("--rate-limit", type=int, dest="rate_limit_per_minute", help="requests per minute")
        parser.add_argument("--price-input", type=float, dest="price_input_per_mtok", help="USD per 1M prompt tokens")
        parser.add_argument("--price-output", type=float, dest="price_output_per_mtok",
                            help="USD per 1M completion tokens")
        parser.add_argument("--prompt-version", help="use this prompt version (with --prompt-file: create it)")
        parser.add_argument("--prompt-file", type=Path, help="a prompt template (a new version when it differs)")

    def handle(self, *args, **opts):
        study = Study.objects.filter(name=opts["study"]).first()
        if study is None:
            raise CommandError(f"no study named {opts['study']!r}")
        judge = JudgeConfig.objects.filter(study=study, name=opts["name"]).first()
        if judge is not None and judge.builtin:
            raise CommandError(f"{judge.name} is the built-in judge; choose another name")
        fields = {"name": opts["name"], "base_url": opts["base_url"], "model": opts["model"]}
        for key in EDITABLE_FIELDS:
            if opts.get(key) is not None:
                fields[key] = opts[key]
        if fields.get("max_tokens") is AUTO:
            fields["max_tokens"] = None
        if opts["prompt_file"]:
            if not opts["prompt_file"].is_file():
                raise CommandError(f"{opts['prompt_file']}: no such file")
            fields["prompt_template"] = opts["prompt_file"].read_text()
        candidate = judge or JudgeConfig(study=study)
        for key, value in fields.items():
            setattr(candidate, key, value)
        try:
            candidate.full_clean(exclude=["study"], validate_unique=False)
        except ValidationError as exc:
            problems = "; ".join(f"{k}: {' '.join(v)}" for k, v in exc.message_dict.items())
            raise CommandError(problems) from None
        try:
            judge, created = services.do_save_judge(study, fields, judge=judge, prompt_version=opts["prompt_version"])
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        verb = "created" if created else "updated"
        self.stdout.write(f"{verb} judge {judge.name} in {study.name!r}: {judge.model} at {judge.base_url}, "
                          f"version {judge.version}, prompt version {judge.prompt_version}")
