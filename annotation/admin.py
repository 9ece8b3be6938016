from django.contrib import admin

from annotation import models as m


class MembershipInline(admin.TabularInline):
    model = m.Membership
    extra = 0
    autocomplete_fields = ["user"]


@admin.register(m.Study)
class StudyAdmin(admin.ModelAdmin):
    list_display = ["name", "blind", "segmenter", "created_at"]
    search_fields = ["name"]
    inlines = [MembershipInline]


@admin.register(m.Problem)
class ProblemAdmin(admin.ModelAdmin):
    list_display = ["problem_id", "study", "domain", "l_gold"]
    list_filter = ["study", "domain"]
    search_fields = ["problem_id", "statement"]
    raw_id_fields = ["approved_skeleton"]


class SkeletonStepInline(admin.TabularInline):
    model = m.SkeletonStep
    extra = 0


@admin.register(m.Skeleton)
class SkeletonAdmin(admin.ModelAdmin):
    list_display = ["problem", "version", "status", "created_at"]
    list_filter = ["status"]
    raw_id_fields = ["problem"]
    inlines = [SkeletonStepInline]


@admin.register(m.Trace)
class TraceAdmin(admin.ModelAdmin):
    list_display = ["trace_id", "study", "model", "n_steps", "answer_correct", "answer_origin"]
    list_filter = ["study", "model", "answer_origin", "empty"]
    search_fields = ["trace_id"]
    raw_id_fields = ["problem"]


@admin.register(m.StepLabel)
class StepLabelAdmin(admin.ModelAdmin):
    list_display = ["step", "kind", "annotator", "judge", "verdict", "version", "updated_at"]
    list_filter = ["kind", "verdict"]
    raw_id_fields = ["step", "annotator", "judge"]


@admin.register(m.LabelHistory)
class LabelHistoryAdmin(admin.ModelAdmin):
    list_display = ["step", "kind", "source_name", "actor", "at", "via"]
    raw_id_fields = ["step", "label", "actor"]

    def has_change_permission(self, request, obj=None) -> bool:
        return False  # the audit trail is append-only

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


@admin.register(m.Job)
class JobAdmin(admin.ModelAdmin):
    list_display = ["pk", "study", "kind", "status", "done", "total", "created_at"]
    list_filter = ["kind", "status"]


admin.site.register(m.TraceReview)


@admin.register(m.Assignment)
class AssignmentAdmin(admin.ModelAdmin):
    list_display = ["study", "trace", "annotator", "position"]
    list_filter = ["study"]
    raw_id_fields = ["trace", "annotator"]
