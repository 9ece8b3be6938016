from django.contrib import admin

from scoring.models import ScoringProfile


@admin.register(ScoringProfile)
class ScoringProfileAdmin(admin.ModelAdmin):
    list_display = ["name", "study", "version", "is_current", "created_at"]
    list_filter = ["study", "is_current"]
