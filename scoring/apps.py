from django.apps import AppConfig


class ScoringConfig(AppConfig):
    name = "scoring"
    verbose_name = "Scoring"
    #: Module whose @register calls add export kinds (scoring.exports loads
    #: the ``export_kinds`` of every installed app on first use).
    export_kinds = "scoring.export_kinds"

    def ready(self) -> None:
        from annotation import signals
        from annotation.review.filters import register_trace_condition
        from scoring.filters import lucky_guess
        from scoring.receivers import on_data_changed

        signals.data_changed.connect(on_data_changed, dispatch_uid="scoring.recompute_on_data_changed")
        register_trace_condition("lucky_guess", lucky_guess)
