from django.contrib import admin

from judges.models import JudgeCall, JudgeConfig, JudgeRun, JudgeRunChunk, JudgeTraceResult, PromptVersion


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


class JudgeRunChunkInline(admin.TabularInline):
    model = JudgeRunChunk
    extra = 0
    fields = ["index", "status", "holder", "lease_until", "attempts"]
    readonly_fields = fields


@admin.register(JudgeRun)
class JudgeRunAdmin(admin.ModelAdmin):
    list_display = ["pk", "judge", "scope", "requests", "cache_hits", "cost_usd", "created_at"]
    raw_id_fields = ["job", "judge"]
    inlines = [JudgeRunChunkInline]


@admin.register(JudgeTraceResult)
class JudgeTraceResultAdmin(admin.ModelAdmin):
    list_display = ["judge", "trace", "status", "answer_correct", "attempts", "cost_usd", "updated_at"]
    list_filter = ["status"]
    raw_id_fields = ["judge", "trace", "run"]


@admin.register(JudgeCall)
class JudgeCallAdmin(admin.ModelAdmin):
    list_display = ["run", "trace", "attempt", "output_mode", "outcome", "http_status", "latency_ms", "at"]
    list_filter = ["outcome"]
    raw_id_fields = ["run", "trace"]
