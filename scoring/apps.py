from django.apps import AppConfig


class ScoringConfig(AppConfig):
    name = "scoring"
    verbose_name = "Scoring"
    #: Module whose @register calls add export kinds (scoring.exports loads
    #: the ``export_kinds`` of every installed app on first use).
    export_kinds = "scoring.export_kinds"

    def ready(self) -> None:
        from annotation import signals
        from annotation.gate import Source
        from annotation.review.filters import register_trace_condition
        from runs.clients import register
        from scoring.filters import lucky_guess
        from scoring.hooks import register_summary
        from scoring.receivers import on_data_changed
        from scoring.runclient import ScoreClient

        register(ScoreClient())  # a score job is a run of the run engine, spread over every worker process
        signals.data_changed.connect(on_data_changed, dispatch_uid="scoring.recompute_on_data_changed")
        register_trace_condition("lucky_guess", lucky_guess, frozenset({Source.SCORES}),
                                 help="a lucky guess by the final labels under the default profile (needs scores)")
        # The score job stores the review progress of the study list with the scores.
        register_summary("annotation.study_summary_writer.refresh")
