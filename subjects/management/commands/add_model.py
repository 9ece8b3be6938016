from pathlib import Path

from django.core.exceptions import ValidationError
from django.core.management.base import CommandError

from annotation.commands import RefusingCommand
from annotation.models import Study
from subjects import services
from subjects.models import SubjectModel


class Command(RefusingCommand):
    requires_system_checks: list[str] = []
    help = ("Create or update a subject model (a model under test at any OpenAI-compatible endpoint) of a study. "
            "The base URL is checked first with GET /models (skip with --no-check); nothing is saved if it fails.")

    def add_arguments(self, parser):
        parser.add_argument("--study", required=True)
        parser.add_argument("--name", required=True, help="subject model name; its traces carry it as model")
        parser.add_argument("--base-url", required=True, help="e.g. http://127.0.0.1:8080/v1")
        parser.add_argument("--model", required=True)
        parser.add_argument("--api", choices=SubjectModel.Api.values)
        parser.add_argument("--api-key-env", help="environment variable holding the API key (never stored)")
        parser.add_argument("--system-prompt")
        parser.add_argument("--template", help="prompt template name (zero-shot, gsm8k-8shot-cot, or the study's own)")
        parser.add_argument("--template-version", type=int, help="a version of --template (default: the newest)")
        parser.add_argument("--temperature", type=float)
        parser.add_argument("--top-p", type=float)
        parser.add_argument("--seed", type=int)
        parser.add_argument("--max-tokens", type=int)
        parser.add_argument("--stop", action="append", help="a stop string (repeat for several)")
        parser.add_argument("--samples", type=int, dest="n_samples", help="k: completions per problem")
        parser.add_argument("--concurrency", type=int, help="requests in flight")
        parser.add_argument("--rate-limit", type=int, dest="rate_limit_per_minute", help="requests per minute")
        parser.add_argument("--timeout", type=float, dest="timeout_seconds", help="seconds per request")
        parser.add_argument("--max-retries", type=int)
        parser.add_argument("--price-input", type=float, dest="price_input_per_mtok", help="USD per 1M prompt tokens")
        parser.add_argument("--price-output", type=float, dest="price_output_per_mtok",
                            help="USD per 1M completion tokens")
        parser.add_argument("--chat-template-file", type=Path,
                            help="the model's chat template, a Jinja file or its tokenizer_config.json (needed "
                                 "for the completions continuation mode; see probe_model)")
        parser.add_argument("--thinking", choices=["on", "off", "default"],
                            help="a reasoning model's thinking: on, off, or the server's default")
        parser.add_argument("--thinking-switch", choices=SubjectModel.ThinkingSwitch.values,
                            help="how --thinking is sent: template (chat_template_kwargs.enable_thinking, "
                                 "the default), prompt (/think, /no_think appended), or both")
        parser.add_argument("--reasoning-effort", choices=[*SubjectModel.ReasoningEffort.values[1:], "default"],
                            help="reasoning_effort sent with every request")
        parser.add_argument("--thinking-budget", type=int,
                            help="thinking tokens before the server closes the thought (sent as thinking_budget; "
                                 "0 or more; -1 removes it)")
        parser.add_argument("--no-check", action="store_true", help="do not ask the server first")

    def handle(self, *args, **opts):
        study = Study.objects.filter(name=opts["study"]).first()
        if study is None:
            raise CommandError(f"no study named {opts['study']!r}")
        fields = {"name": opts["name"], "base_url": opts["base_url"], "model": opts["model"]}
        for key in ("api", "api_key_env", "system_prompt", "temperature", "top_p", "seed", "max_tokens", "stop",
                    "n_samples", "concurrency", "rate_limit_per_minute", "timeout_seconds", "max_retries",
                    "price_input_per_mtok", "price_output_per_mtok"):
            if opts.get(key) is not None:
                fields[key] = opts[key]
        if opts["thinking"] is not None:
            fields["thinking"] = "" if opts["thinking"] == "default" else opts["thinking"]
        if opts["thinking_switch"] is not None:
            fields["thinking_switch"] = opts["thinking_switch"]
        if opts["reasoning_effort"] is not None:
            fields["reasoning_effort"] = "" if opts["reasoning_effort"] == "default" else opts["reasoning_effort"]
        if opts["thinking_budget"] is not None:
            if opts["thinking_budget"] < -1:
                raise CommandError(f"--thinking-budget {opts['thinking_budget']}: give 0 or more tokens (-1 removes it)")
            fields["thinking_budget"] = None if opts["thinking_budget"] == -1 else opts["thinking_budget"]
        try:
            if opts["chat_template_file"]:
                source = services.chat_template_from_file(opts["chat_template_file"])
                fields["chat_template"], fields["eos_token"] = source.template, source.eos_token
            if not opts["no_check"]:
                services.check_reachable(opts["base_url"])
            if opts["template"]:
                fields["prompt_template"] = services.find_template(study, opts["template"], opts["template_version"])
            subject = SubjectModel.objects.filter(study=study, name=opts["name"]).first()
            subject, created = services.do_save_subject(study, fields, subject=subject)
        except ValidationError as exc:
            problems = "; ".join(f"{k}: {' '.join(v)}" for k, v in exc.message_dict.items())
            raise CommandError(problems) from None
        except (ValueError, services.Unreachable) as exc:
            raise CommandError(str(exc)) from None
        verb = "created" if created else "updated"
        t = subject.prompt_template
        self.stdout.write(f"{verb} subject model {subject.name} in {study.name!r}: {subject.model} at "
                          f"{subject.base_url} ({subject.api}), version {subject.version}, template {t.name} "
                          f"v{t.version}, k={subject.n_samples}"
                          f"{', with its chat template' if subject.chat_template else ''}"
                          f"{thinking_summary(subject)}")


def thinking_summary(subject: SubjectModel) -> str:
    parts = []
    if subject.thinking:
        parts.append(f"thinking {subject.thinking} ({subject.thinking_switch})")
    if subject.reasoning_effort:
        parts.append(f"reasoning effort {subject.reasoning_effort}")
    if subject.thinking_budget is not None:
        parts.append(f"thinking budget {subject.thinking_budget}")
    return ", " + ", ".join(parts) if parts else ""
