from django.apps import AppConfig


class AnnotationConfig(AppConfig):
    name = "annotation"
    verbose_name = "Annotation"

    def ready(self) -> None:
        from annotation import signals, study_summary

        # The stored review progress (StudySummary) describes the data before a change.
        signals.data_changed.connect(study_summary.invalidate, dispatch_uid="annotation.study_summary_on_data_changed")
