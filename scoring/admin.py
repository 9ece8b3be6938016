from django.contrib import admin

from scoring.models import ScoreSet, ScoringProfile


@admin.register(ScoringProfile)
class ScoringProfileAdmin(admin.ModelAdmin):
    list_display = ["name", "study", "version", "is_current", "created_at"]
    list_filter = ["study", "is_current"]


@admin.register(ScoreSet)
class ScoreSetAdmin(admin.ModelAdmin):
    # Read-only: score sets are written whole by the recompute job.
    list_display = ["study", "source", "profile", "n_traces", "computed_at"]
    list_filter = ["study", "source"]
    readonly_fields = ["study", "source", "profile", "computed_at", "token", "n_traces", "hazard", "job"]

    def has_add_permission(self, request) -> bool:
        return False
