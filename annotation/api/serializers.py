from __future__ import annotations

from rest_framework import serializers

from annotation import jobs
from annotation.importing.adapters import FORMATS
from annotation.models import Job, Membership, Problem, Step, Study, Trace


class HtmlUrlMixin(serializers.Serializer):
    html_url = serializers.SerializerMethodField()

    def get_html_url(self, obj) -> str | None:
        request = self.context.get("request")
        url = obj.get_absolute_url() if hasattr(obj, "get_absolute_url") else None
        return request.build_absolute_uri(url) if request and url else url


class StudySerializer(HtmlUrlMixin, serializers.ModelSerializer):
    role = serializers.SerializerMethodField()
    primary_judge = serializers.SlugRelatedField(slug_field="name", read_only=True)

    class Meta:
        model = Study
        fields = ["id", "name", "description", "blind", "segmenter", "primary_judge", "default_profile", "role",
                  "created_at", "html_url"]
        read_only_fields = ["id", "created_at", "default_profile"]

    def get_role(self, obj: Study) -> str | None:
        roles = self.context.get("roles") or {}
        return roles.get(obj.pk)


class StudyUpdateSerializer(serializers.ModelSerializer):
    primary_judge = serializers.CharField(required=False, allow_null=True, allow_blank=True,
                                          help_text="name of one of the study's judges; null to unset")

    class Meta:
        model = Study
        fields = ["name", "description", "blind", "segmenter", "primary_judge"]

    def validate_primary_judge(self, value):
        if not value:
            return None
        judge = self.instance.judges.filter(name=value).first() if self.instance else None
        if judge is None:
            raise serializers.ValidationError(f"no judge named {value!r} in this study")
        return judge


class ImportRequestSerializer(serializers.Serializer):
    file = serializers.FileField()
    format = serializers.ChoiceField(choices=FORMATS, default="reasonaudit")
    skip_invalid = serializers.BooleanField(default=False)


class JobSerializer(HtmlUrlMixin, serializers.ModelSerializer):
    progress = serializers.SerializerMethodField()

    class Meta:
        model = Job
        fields = ["id", "study", "kind", "status", "params", "progress", "result", "error", "cancel_requested",
                  "created_at", "started_at", "finished_at", "html_url"]

    def get_progress(self, obj: Job) -> dict:
        return jobs.live_progress(obj)


class ProblemSerializer(HtmlUrlMixin, serializers.ModelSerializer):
    class Meta:
        model = Problem
        fields = ["id", "study", "problem_id", "statement", "gold_answer", "domain", "tags", "l_gold", "html_url"]


class StepSerializer(serializers.ModelSerializer):
    step = serializers.IntegerField(source="index")

    class Meta:
        model = Step
        fields = ["step", "text", "start", "end"]


class TraceListSerializer(HtmlUrlMixin, serializers.ModelSerializer):
    problem_id = serializers.CharField(source="problem.problem_id")

    class Meta:
        model = Trace
        fields = ["id", "trace_id", "problem_id", "model", "answer", "answer_correct", "answer_origin", "n_steps",
                  "empty", "flagged", "html_url"]


class TraceSerializer(TraceListSerializer):
    steps = StepSerializer(many=True, read_only=True)

    class Meta(TraceListSerializer.Meta):
        fields = TraceListSerializer.Meta.fields + ["raw", "thought", "auto_answer_correct", "meta", "steps"]


class MembershipSerializer(serializers.ModelSerializer):
    username = serializers.CharField(source="user.username")

    class Meta:
        model = Membership
        fields = ["username", "role"]
