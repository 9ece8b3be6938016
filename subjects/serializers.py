from __future__ import annotations

from rest_framework import serializers

from annotation.api.serializers import HtmlUrlMixin, JobSerializer
from reasonlib import selection
from runs import params
from runs.kinds import RunParams
from runs.outbound import shown_url
from subjects.models import GenerationRun, PromptTemplate, SubjectModel

# What a user sets on a subject model (the web form shows the same fields).
EDITABLE_FIELDS = [
    "name", "base_url", "model", "api_key_env", "api", "system_prompt", "temperature", "top_p", "seed", "max_tokens",
    "stop", "n_samples", "concurrency", "rate_limit_per_minute", "timeout_seconds", "max_retries",
    "price_input_per_mtok", "price_output_per_mtok", "chat_template", "eos_token",
    "thinking", "thinking_switch", "reasoning_effort", "thinking_budget",
]


class SubjectModelSerializer(HtmlUrlMixin, serializers.ModelSerializer):
    template = serializers.CharField(required=False, write_only=True, help_text="prompt template name")
    template_version = serializers.IntegerField(required=False, write_only=True, min_value=1,
                                                help_text="a version of the template (default: the newest)")
    prompt_template = serializers.SerializerMethodField()
    check = serializers.BooleanField(required=False, default=True, write_only=True,
                                     help_text="after saving, probe the server in a background job (kind "
                                               "probe); the request itself never contacts it")

    class Meta:
        model = SubjectModel
        fields = ["id", "study", *EDITABLE_FIELDS, "continuation", "probe_result", "prompt_template", "template",
                  "template_version", "check", "version", "created_at", "updated_at", "html_url"]
        # The continuation mode and its evidence come from the probe (POST subject-models/{id}/probe/) only.
        read_only_fields = ["id", "study", "continuation", "probe_result", "version", "created_at", "updated_at"]
        validators: list = []  # uniqueness per study: subjects.services.do_save_subject

    def get_prompt_template(self, obj: SubjectModel) -> dict:
        t = obj.prompt_template
        return {"name": t.name, "version": t.version, "kind": t.kind}

    def validate(self, attrs):
        if self.instance is None:
            for key in ("name", "model", "base_url"):
                if not attrs.get(key):
                    raise serializers.ValidationError({key: "this field is required"})
        return attrs

    def to_representation(self, instance):
        data = super().to_representation(instance)
        if data.get("base_url"):
            data["base_url"] = shown_url(data["base_url"])
        return data


class GenerationRunRequestSerializer(RunParams):
    model = serializers.CharField(label="Subject model", help_text="name of one of the study's subject models")
    problems = serializers.CharField(default=GenerationRun.Scope.ALL, max_length=2000, label="Problems",
                                     help_text="all, missing (lacking some of their K samples), or a filter: "
                                               "first:N, ids:A,B-C, pid:X,Y, sample:N@SEED")
    samples = params.serializer_field("samples", required=False)

    def validate_problems(self, value: str) -> str:
        try:
            scope, problem_filter = selection.scope_and_filter(value)
        except selection.FilterError as exc:
            raise serializers.ValidationError(str(exc)) from None
        return problem_filter or scope

    def validate_model(self, value: str) -> SubjectModel:
        subject = SubjectModel.objects.filter(study=self.context["study"], name=value).select_related(
            "prompt_template").first()
        if subject is None:
            raise serializers.ValidationError(f"no subject model named {value!r} in this study")
        return subject


class GenerationRunSerializer(HtmlUrlMixin, serializers.ModelSerializer):
    model = serializers.CharField(source="subject.name", read_only=True)
    job = JobSerializer(read_only=True)
    requests = serializers.IntegerField(source="run.requests", read_only=True)
    cache_hits = serializers.IntegerField(source="run.cache_hits", read_only=True)
    prompt_tokens = serializers.IntegerField(source="run.prompt_tokens", read_only=True)
    completion_tokens = serializers.IntegerField(source="run.completion_tokens", read_only=True)
    unknown_token_calls = serializers.IntegerField(source="run.unknown_token_calls", read_only=True)
    cost_usd = serializers.FloatField(source="run.cost_usd", read_only=True)
    stop_reason = serializers.CharField(source="run.stop_reason", read_only=True)

    class Meta:
        model = GenerationRun
        fields = ["id", "model", "config_version", "scope", "samples", "job", "requests", "cache_hits",
                  "prompt_tokens", "completion_tokens", "unknown_token_calls", "cost_usd", "traces_created",
                  "traces_unchanged", "samples_failed", "failures", "stop_reason", "created_at", "html_url"]
        read_only_fields = fields


class PromptTemplateSerializer(HtmlUrlMixin, serializers.ModelSerializer):
    """One version of a named prompt template (read); POST the same fields to save the next version."""

    class Meta:
        model = PromptTemplate
        fields = ["id", "study", "name", "version", "kind", "template", "exemplars", "created_at", "html_url"]
        read_only_fields = ["id", "study", "version", "kind", "created_at"]
        validators: list = []  # versions: subjects.services.do_save_template


class PromptTemplatePreviewSerializer(serializers.Serializer):
    template = serializers.CharField(trim_whitespace=False)
    exemplars = serializers.JSONField(required=False, default=list)
    problem_id = serializers.CharField(required=False, allow_blank=True, default="")


class PromptTemplatePreviewResultSerializer(serializers.Serializer):
    problem_id = serializers.CharField()
    text = serializers.CharField()
