from django.contrib import admin

from runs.models import ModelCall, Run, RunChunk


class RunChunkInline(admin.TabularInline):
    model = RunChunk
    extra = 0
    fields = ["index", "status", "holder", "lease_until", "attempts"]
    readonly_fields = fields


@admin.register(Run)
class RunAdmin(admin.ModelAdmin):
    list_display = ["pk", "kind", "job", "requests", "cache_hits", "unknown_token_calls", "cost_usd", "created_at"]
    list_filter = ["kind"]
    raw_id_fields = ["job"]
    inlines = [RunChunkInline]


@admin.register(ModelCall)
class ModelCallAdmin(admin.ModelAdmin):
    list_display = ["run", "item", "attempt", "output_mode", "outcome", "http_status", "latency_ms", "at"]
    list_filter = ["outcome"]
    raw_id_fields = ["run"]
