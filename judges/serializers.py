from __future__ import annotations

from rest_framework import serializers

from annotation.api.serializers import HtmlUrlMixin, JobSerializer
from judges.models import JudgeConfig, JudgeRun, validate_template
from runs.kinds import RunParams
from runs.outbound import shown_url

# What a user sets on an LLM judge (the web form shows the same fields).
EDITABLE_FIELDS = [
    "name", "model", "base_url", "api_key_env", "temperature", "max_tokens", "context_tokens", "mode", "output_mode", "concurrency",
    "rate_limit_per_minute", "max_retries", "timeout_seconds", "price_input_per_mtok", "price_output_per_mtok",
]


class JudgeSerializer(HtmlUrlMixin, serializers.ModelSerializer):
    source = serializers.CharField(read_only=True)
    prompt_template = serializers.CharField(required=False, allow_blank=False, trim_whitespace=False,
                                            validators=[validate_template],
                                            help_text="a new value makes a new prompt version")
    prompt_version = serializers.CharField(required=False, max_length=50,
                                           help_text="the prompt version to use (or to name a new template)")
    # Blank until a run of an "auto" judge found what the server accepts: "" is one of its values.
    output_mode_resolved = serializers.ChoiceField(choices=JudgeConfig.OutputMode.choices, allow_blank=True,
                                                   read_only=True, help_text="what auto found the server "
                                                   "accepts; empty until a run found it")

    class Meta:
        model = JudgeConfig
        fields = ["id", "study", "source", "provider", *EDITABLE_FIELDS, "output_mode_resolved", "prompt_version",
                  "prompt_template", "version", "created_at", "updated_at", "html_url"]
        read_only_fields = ["id", "study", "source", "provider", "output_mode_resolved", "version", "created_at",
                            "updated_at"]
        # Uniqueness per study is checked in validate(): the study comes from the URL.
        validators: list = []

    def validate(self, attrs):
        study = self.context["study"]
        name = attrs.get("name")
        if name is not None:
            taken = JudgeConfig.objects.filter(study=study, name=name)
            if self.instance is not None:
                taken = taken.exclude(pk=self.instance.pk)
            if taken.exists():
                raise serializers.ValidationError({"name": f"the study has a judge named {name!r} already"})
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


class JudgeDetailSerializer(JudgeSerializer):
    disagreements = serializers.SerializerMethodField()

    class Meta(JudgeSerializer.Meta):
        fields = JudgeSerializer.Meta.fields + ["disagreements"]

    def get_disagreements(self, obj: JudgeConfig) -> int | None:
        from judges import services

        # null for a member the visibility gate does not let read it (annotation.gate); no membership in the
        # context: the caller checked nothing, so nothing is shown.
        if "membership" not in self.context:
            return None
        return services.visible_disagreement_count(obj, self.context["membership"])


class JudgeRunRequestSerializer(RunParams):
    judge = serializers.CharField(label="Judge", help_text="name of one of the study's judges")
    traces = serializers.ChoiceField(choices=JudgeRun.Scope.choices, default=JudgeRun.Scope.ALL, label="Traces",
                                     help_text="which of the selected traces this judge labels")
    model = serializers.CharField(required=False, allow_blank=True, label="Only the model",
                                  help_text="the traces of this model only; empty: every model")
    domain = serializers.CharField(required=False, allow_blank=True, label="Only the domain",
                                   help_text="the traces of problems of this domain only; empty: every domain")
    answer_correct = serializers.BooleanField(required=False, allow_null=True, default=None, label="Correct answer",
                                              help_text="the traces whose final answer is right (yes), wrong (no) "
                                                        "or either (any)")
    trace_ids = serializers.ListField(child=serializers.CharField(), required=False, max_length=100_000,
                                      label="Trace IDs", help_text="these traces only (their trace_id)")

    def validate_judge(self, value: str) -> JudgeConfig:
        judge = JudgeConfig.objects.filter(study=self.context["study"], name=value).first()
        if judge is None:
            raise serializers.ValidationError(f"no judge named {value!r} in this study")
        return judge


class JudgeRunSerializer(HtmlUrlMixin, serializers.ModelSerializer):
    judge = serializers.SlugRelatedField(slug_field="name", read_only=True)
    job = JobSerializer(read_only=True)
    # The engine's figures live on the run (runs.Run); named by their source so
    # the OpenAPI schema takes each type from that model's field.
    force = serializers.ReadOnlyField(source="run.force")
    budget_usd = serializers.ReadOnlyField(source="run.budget_usd")
    requests = serializers.ReadOnlyField(source="run.requests")
    cache_hits = serializers.ReadOnlyField(source="run.cache_hits")
    prompt_tokens = serializers.ReadOnlyField(source="run.prompt_tokens")
    completion_tokens = serializers.ReadOnlyField(source="run.completion_tokens")
    unknown_token_calls = serializers.ReadOnlyField(source="run.unknown_token_calls")
    cost_usd = serializers.ReadOnlyField(source="run.cost_usd")
    warnings = serializers.ReadOnlyField(source="run.warnings")
    notes = serializers.ReadOnlyField(source="run.notes")
    output_mode = serializers.ReadOnlyField(source="run.output_mode")
    stop_reason = serializers.ReadOnlyField(source="run.stop_reason")

    class Meta:
        model = JudgeRun
        fields = ["id", "judge", "scope", "filters", "force", "budget_usd", "judge_version", "prompt_version", "job",
                  "requests", "cache_hits", "prompt_tokens", "completion_tokens", "unknown_token_calls", "cost_usd",
                  "warnings", "notes", "output_mode",
                  "labels_created", "labels_changed", "labels_unchanged", "labels_removed", "stop_reason",
                  "created_at", "html_url"]
        read_only_fields = fields
