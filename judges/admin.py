from django.contrib import admin

from judges.models import JudgeConfig


@admin.register(JudgeConfig)
class JudgeConfigAdmin(admin.ModelAdmin):
    list_display = ["name", "study", "provider", "model", "mode", "version"]
    list_filter = ["provider", "mode"]
