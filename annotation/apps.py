from django.apps import AppConfig


class AnnotationConfig(AppConfig):
    name = "annotation"
    verbose_name = "Annotation"

    def ready(self) -> None:
        from django.contrib.auth.signals import user_logged_in

        from annotation import one_time, signals, study_summary

        user_logged_in.connect(one_time.spend_on_sign_in, dispatch_uid="annotation.one_time_password_spent")

        # The stored review progress (StudySummary) describes the data before a change.
        signals.data_changed.connect(study_summary.invalidate, dispatch_uid="annotation.study_summary_on_data_changed")
