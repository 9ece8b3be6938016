"""One run of any kind as the REST API shows it (runs.api): what the 202 of every start answers, the list of
a study's runs and ``GET runs/{id}/``, the same shape whatever the kind."""

from __future__ import annotations

from typing import Any

from django.urls import reverse
from drf_spectacular.utils import extend_schema_field, extend_schema_serializer
from rest_framework import serializers

from annotation import jobs
from runs import kinds
from runs.clients import client_for
from runs.models import Run

#: How many failure reasons a run's detail lists (the record keeps the first 50).
FAILURES_SHOWN = 50


class ProgressSerializer(serializers.Serializer):
    done = serializers.IntegerField()
    total = serializers.IntegerField()
    failed = serializers.IntegerField()


def _absolute(request, url: str | None) -> str | None:
    return request.build_absolute_uri(url) if request is not None and url else url


# Named apart from faithfulness.api's "Run" in the OpenAPI schema.
@extend_schema_serializer(component_name="AnyRun")
class RunSerializer(serializers.ModelSerializer):
    """A run in a list: the kind as declared (runs.kinds), its job's status and live progress, the engine's
    counters and cost, and where to read more."""

    run = serializers.IntegerField(source="pk", read_only=True)
    job = serializers.IntegerField(source="job_id", read_only=True)
    kind = serializers.SerializerMethodField()
    label = serializers.SerializerMethodField()
    record = serializers.SerializerMethodField(help_text="the pk of the kind's own row (judge run, generation run, ...)")
    status = serializers.CharField(source="job.status", read_only=True)
    error = serializers.CharField(source="job.error", read_only=True)
    progress = serializers.SerializerMethodField()
    cost_is_lower_bound = serializers.SerializerMethodField(
        help_text="some calls' tokens are unknown, so the cost is at least cost_usd")
    created_by = serializers.SerializerMethodField()
    finished_at = serializers.DateTimeField(source="job.finished_at", read_only=True, allow_null=True)
    url = serializers.SerializerMethodField()
    job_url = serializers.SerializerMethodField()
    html_url = serializers.SerializerMethodField(help_text="the kind's page of the run, else its job's page")

    class Meta:
        model = Run
        fields = ["run", "job", "kind", "label", "record", "status", "error", "progress", "force", "budget_usd",
                  "requests", "cache_hits", "prompt_tokens", "completion_tokens", "unknown_token_calls", "cost_usd",
                  "cost_is_lower_bound", "warnings", "stop_reason", "output_mode", "created_by", "created_at",
                  "finished_at", "url", "job_url", "html_url"]
        read_only_fields = fields

    def get_kind(self, run: Run) -> str:
        return kinds.name_of(run)

    def get_label(self, run: Run) -> str:
        try:
            return client_for(run.kind).label_for(run)
        except LookupError:
            return run.kind

    def get_record(self, run: Run) -> int | None:
        return (run.job.params or {}).get("run")

    @staticmethod
    def _progress(run: Run) -> dict[str, int]:
        return jobs.live_progress(run.job) if not run.job.finished else {
            "done": run.job.done, "total": run.job.total, "failed": run.job.failed}

    @extend_schema_field(ProgressSerializer)
    def get_progress(self, run: Run) -> dict[str, int]:
        return self._progress(run)

    def get_cost_is_lower_bound(self, run: Run) -> bool:
        return run.unknown_token_calls > 0

    def get_created_by(self, run: Run) -> str | None:
        return run.job.created_by.username if run.job.created_by_id else None

    def get_url(self, run: Run) -> str | None:
        return _absolute(self.context.get("request"), reverse("api-run", args=[run.pk]))

    def get_job_url(self, run: Run) -> str | None:
        return _absolute(self.context.get("request"), reverse("api-job", args=[run.job_id]))

    def get_html_url(self, run: Run) -> str | None:
        try:
            page = client_for(run.kind).page(run)
        except LookupError:
            page = None
        return _absolute(self.context.get("request"), page or reverse("job", args=[run.job_id]))


@extend_schema_serializer(component_name="AnyRunDetail")
class RunDetailSerializer(RunSerializer):
    """One run: the list's fields, the parameters it was started with, its run-level notes, the first reasons
    items failed, and the job's result once it ended. What every start answers with its 202."""

    params = serializers.SerializerMethodField(help_text="the parameters as asked (what a retry asks again)")
    notes = serializers.JSONField(read_only=True, help_text="run-level warnings: {message: items that raised it}")
    failures = serializers.SerializerMethodField(help_text="the first reasons items failed")
    result = serializers.JSONField(source="job.result", read_only=True, allow_null=True)

    class Meta(RunSerializer.Meta):
        fields = [*RunSerializer.Meta.fields, "params", "notes", "failures", "result"]
        read_only_fields = fields

    def get_params(self, run: Run) -> dict[str, Any]:
        return dict((run.job.params or {}).get("request") or {})

    def get_failures(self, run: Run) -> list[str]:
        if not run.job.failed:
            return []
        try:
            return client_for(run.kind).failure_reasons(run, FAILURES_SHOWN)
        except LookupError:
            return []
