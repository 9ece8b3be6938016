from django.contrib import admin

from judges.models import JudgeConfig, JudgeRun, JudgeTraceResult, PromptVersion


class PromptVersionInline(admin.TabularInline):
    model = PromptVersion
    extra = 0
    readonly_fields = ["version", "template", "note", "created_by", "created_at"]
    can_delete = False


@admin.register(JudgeConfig)
class JudgeConfigAdmin(admin.ModelAdmin):
    list_display = ["name", "study", "provider", "model", "mode", "output_mode", "version", "prompt_version"]
    list_filter = ["provider", "mode"]
    search_fields = ["name", "model"]
    readonly_fields = ["version", "output_mode_resolved", "prompt_template", "prompt_version"]
    inlines = [PromptVersionInline]


@admin.register(JudgeRun)
class JudgeRunAdmin(admin.ModelAdmin):
    list_display = ["pk", "judge", "scope", "labels_created", "labels_changed", "created_at"]
    raw_id_fields = ["job", "run", "judge"]


@admin.register(JudgeTraceResult)
class JudgeTraceResultAdmin(admin.ModelAdmin):
    list_display = ["judge", "trace", "status", "answer_correct", "attempts", "cost_usd", "updated_at"]
    list_filter = ["status"]
    raw_id_fields = ["judge", "trace", "run"]
