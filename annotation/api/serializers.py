from __future__ import annotations

from django.urls import reverse
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from annotation import jobs
from annotation.importing.adapters import UPLOAD_FORMATS
from annotation.models import DESCRIPTION_MAX, Job, Membership, Problem, Skeleton, SkeletonStep, Step, Study, Trace
from annotation.review import queues
from annotation.services import study_name_taken, upload_too_large


class HtmlUrlMixin(serializers.Serializer):
    html_url = serializers.SerializerMethodField()

    def get_html_url(self, obj) -> str | None:
        request = self.context.get("request")
        url = obj.get_absolute_url() if hasattr(obj, "get_absolute_url") else None
        return request.build_absolute_uri(url) if request and url else url


def _free_study_name(name: str, instance: Study | None) -> str:
    if study_name_taken(name, exclude=instance):
        raise serializers.ValidationError("a study with this name already exists (names are compared ignoring case)")
    return name


class StudySerializer(HtmlUrlMixin, serializers.ModelSerializer):
    role = serializers.SerializerMethodField()
    primary_judge = serializers.SlugRelatedField(slug_field="name", read_only=True, allow_null=True)  # none chosen

    class Meta:
        model = Study
        fields = ["id", "name", "description", "blind", "segmenter", "thought_segmenter", "primary_judge",
                  "default_profile", "role", "created_at", "html_url"]
        read_only_fields = ["id", "created_at", "default_profile"]
        extra_kwargs = {"description": {"max_length": DESCRIPTION_MAX}}

    def validate_name(self, value: str) -> str:
        return _free_study_name(value, self.instance)

    def get_role(self, obj: Study) -> str | None:
        roles = self.context.get("roles") or {}
        return roles.get(obj.pk)


class StudyUpdateSerializer(serializers.ModelSerializer):
    primary_judge = serializers.CharField(required=False, allow_null=True, allow_blank=True,
                                          help_text="name of one of the study's judges; null to unset")

    class Meta:
        model = Study
        fields = ["name", "description", "blind", "segmenter", "thought_segmenter", "primary_judge"]
        extra_kwargs = {"description": {"max_length": DESCRIPTION_MAX}}

    def validate_name(self, value: str) -> str:
        return _free_study_name(value, self.instance)

    def validate_primary_judge(self, value):
        if not value:
            return None
        judge = self.instance.judges.filter(name=value).first() if self.instance else None
        if judge is None:
            raise serializers.ValidationError(f"no judge named {value!r} in this study")
        return judge


class ImportRequestSerializer(serializers.Serializer):
    file = serializers.FileField()
    # lm-eval is CLI-only: its samples file is read with the results JSON beside it.
    format = serializers.ChoiceField(choices=UPLOAD_FORMATS, default="reasonaudit")
    skip_invalid = serializers.BooleanField(default=False)
    # Empty: the study's thought_segmenter.
    thought_segmenter = serializers.ChoiceField(choices=Study.Segmenter.choices, required=False, allow_blank=True,
                                                default="")

    def validate_file(self, upload):
        # Refused here, before the job stores anything (annotation.services.do_create_import_job).
        problem = upload_too_large(upload.size)
        if problem is not None:
            raise serializers.ValidationError(problem)
        return upload


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
        # start/end index the step's channel text: the trace's thought, or its raw output for the answer.
        fields = ["step", "channel", "text", "start", "end"]


class TraceListSerializer(HtmlUrlMixin, serializers.ModelSerializer):
    problem_id = serializers.CharField(source="problem.problem_id")

    class Meta:
        model = Trace
        fields = ["id", "trace_id", "problem_id", "model", "answer", "answer_correct", "answer_origin", "n_steps",
                  "n_thought_steps", "thought_truncated", "empty", "flagged", "html_url"]


class TraceSerializer(TraceListSerializer):
    steps = StepSerializer(many=True, read_only=True)

    class Meta(TraceListSerializer.Meta):
        fields = TraceListSerializer.Meta.fields + ["raw", "thought", "auto_answer_correct", "meta", "regime", "steps"]


class MembershipSerializer(serializers.ModelSerializer):
    username = serializers.CharField(source="user.username")

    class Meta:
        model = Membership
        fields = ["username", "role"]


# --------------------------------------------------------------------------
# Problems and skeletons


class ProblemDetailSerializer(ProblemSerializer):
    approved_skeleton = serializers.SerializerMethodField(help_text="version number of the approved skeleton, or null")

    class Meta(ProblemSerializer.Meta):
        fields = ProblemSerializer.Meta.fields + ["approved_skeleton", "meta", "created_at"]

    def get_approved_skeleton(self, obj: Problem) -> int | None:
        sk = obj.approved_skeleton
        return sk.version if sk else None


class ProblemUpdateSerializer(serializers.ModelSerializer):
    tags = serializers.ListField(child=serializers.CharField(max_length=100), required=False, max_length=100)

    class Meta:
        model = Problem
        fields = ["statement", "gold_answer", "domain", "tags"]


class SkeletonStepSerializer(serializers.ModelSerializer):
    check = serializers.CharField(source="check_expr", allow_blank=True, required=False)

    class Meta:
        model = SkeletonStep
        fields = ["position", "text", "check"]


class SkeletonSerializer(serializers.ModelSerializer):
    steps = SkeletonStepSerializer(many=True, read_only=True)
    # Null for a skeleton imported with its problem (no author) and for one not approved yet.
    created_by = serializers.SlugRelatedField(slug_field="username", read_only=True, allow_null=True)
    approved_by = serializers.SlugRelatedField(slug_field="username", read_only=True, allow_null=True)
    is_current = serializers.SerializerMethodField(help_text="the problem's approved skeleton (sets L_gold)")
    html_url = serializers.SerializerMethodField()

    class Meta:
        model = Skeleton
        fields = ["id", "problem", "version", "status", "note", "created_by", "created_at", "approved_by",
                  "approved_at", "is_current", "steps", "html_url"]

    def get_is_current(self, obj: Skeleton) -> bool:
        return obj.problem.approved_skeleton_id == obj.pk

    def get_html_url(self, obj: Skeleton) -> str:
        url = reverse("problem", args=[obj.problem_id]) + "#history"
        request = self.context.get("request")
        return request.build_absolute_uri(url) if request else url


class SkeletonStepInSerializer(serializers.Serializer):
    text = serializers.CharField(max_length=2000)
    check = serializers.CharField(max_length=500, required=False, allow_blank=True, default="")


class SkeletonCreateSerializer(serializers.Serializer):
    steps = SkeletonStepInSerializer(many=True, allow_empty=False)
    note = serializers.CharField(required=False, allow_blank=True, default="", max_length=2000)
    status = serializers.ChoiceField(choices=["draft", "approved"], default="draft",
                                     help_text="approved needs the owner or adjudicator role")


class SkeletonUpdateSerializer(serializers.Serializer):
    status = serializers.ChoiceField(choices=["approved"], help_text="approve this version")


# --------------------------------------------------------------------------
# Labels


class LabelSerializer(serializers.Serializer):
    step = serializers.IntegerField(min_value=1, help_text="1-based step number")
    verdict = serializers.ChoiceField(choices=["valid", "invalid", "neutral"])
    skeleton_refs = serializers.ListField(child=serializers.IntegerField(min_value=1), required=False, default=list)
    note = serializers.CharField(required=False, allow_blank=True, default="", max_length=5000)


class LabelsSerializer(serializers.Serializer):
    """The requesting user's labels on one trace (GET and PUT)."""

    version = serializers.IntegerField(min_value=0, help_text="the version last read; PUT answers 409 when it is stale")
    complete = serializers.BooleanField(
        required=False, help_text="true only when every step is labelled; left out: complete when every step is")
    rating = serializers.FloatField(min_value=0, max_value=10, allow_null=True, required=False,
                                    help_text="holistic 0-10 rating; null clears it, left out keeps it")
    labels = LabelSerializer(many=True)
    answer_correct = serializers.BooleanField(
        allow_null=True, required=False,
        help_text="reviewer override of the answer verdict; null hands back to the automatic check; "
                  "leave it out to keep it as it is",
    )


class LabelsOutSerializer(LabelsSerializer):
    answer_origin = serializers.CharField(read_only=True)
    skipped = serializers.BooleanField(read_only=True)
    flag = serializers.CharField(read_only=True)
    html_url = serializers.CharField(read_only=True)


class VisibleLabelSerializer(serializers.Serializer):
    step = serializers.IntegerField()
    source = serializers.CharField(help_text="human, judge:NAME or final")
    annotator = serializers.CharField(help_text="user or judge name")
    verdict = serializers.CharField()
    skeleton_refs = serializers.ListField(child=serializers.IntegerField())
    confidence = serializers.FloatField(allow_null=True)
    reason = serializers.CharField()


class TraceDetailSerializer(TraceSerializer):
    labels = serializers.SerializerMethodField(help_text="labels visible to you: yours, and every source once revealed")
    labels_hidden = serializers.SerializerMethodField(
        help_text="true while the study is blind and you have not labelled the trace completely"
    )

    class Meta(TraceSerializer.Meta):
        fields = TraceSerializer.Meta.fields + ["labels", "labels_hidden"]

    @extend_schema_field(VisibleLabelSerializer(many=True))
    def get_labels(self, obj) -> list[dict]:
        return self.context.get("labels", [])

    def get_labels_hidden(self, obj) -> bool:
        return bool(self.context.get("labels_hidden"))


# --------------------------------------------------------------------------
# Adjudication, queues, members


class AdjudicationSerializer(serializers.Serializer):
    version = serializers.IntegerField(min_value=0, help_text="version of the final label you last read (0: none)")
    verdict = serializers.ChoiceField(choices=["valid", "invalid", "neutral"])
    skeleton_refs = serializers.ListField(child=serializers.IntegerField(min_value=1), required=False, default=list)
    reason = serializers.CharField(max_length=5000)


class DisagreementSerializer(serializers.Serializer):
    step_id = serializers.IntegerField()
    trace = serializers.IntegerField()
    step = serializers.IntegerField()
    text = serializers.CharField()
    labels = VisibleLabelSerializer(many=True)
    final = VisibleLabelSerializer(allow_null=True)
    version = serializers.IntegerField(help_text="version of the final label (0: none yet)")
    html_url = serializers.CharField()


def annotators_per_trace_field() -> serializers.IntegerField:
    """``k`` of every assignment endpoint (a study's queues, a cohort, a calibration sample), in the one
    range of annotation.queues.ANNOTATORS_PER_TRACE."""
    low, high = queues.ANNOTATORS_PER_TRACE
    return serializers.IntegerField(min_value=low, max_value=high, default=1, help_text=queues.ANNOTATORS_PER_TRACE_HELP)


class AssignmentRequestSerializer(serializers.Serializer):
    annotators = serializers.ListField(child=serializers.CharField(), allow_empty=False, help_text="usernames")
    k = annotators_per_trace_field()
    stratify = serializers.BooleanField(default=True, help_text="balance each model's traces across annotators")
    only_unassigned = serializers.BooleanField(default=True)


class QueueItemSerializer(serializers.Serializer):
    position = serializers.IntegerField()
    trace = TraceListSerializer()
    status = serializers.CharField(help_text="todo, started, done or skipped")


class MemberRequestSerializer(serializers.Serializer):
    username = serializers.CharField(max_length=150)
    role = serializers.ChoiceField(choices=Membership.Role.values)
