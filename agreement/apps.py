from django.apps import AppConfig


class AgreementConfig(AppConfig):
    """Agreement between label sources, calibration studies, the annotators
    view and the export kinds and jobs of labels and agreement.

    Depends on ``scoring`` (scores, label sources, the export registry),
    never the reverse: ``scoring.exports`` finds this app's kinds through
    ``export_kinds`` below.
    """

    name = "agreement"
    verbose_name = "Agreement"
    #: Module whose @register calls add export kinds (loaded on first use by
    #: scoring.exports, not at start-up: it pulls in pandas).
    export_kinds = "agreement.exports"

    def ready(self) -> None:
        from agreement import stored
        from annotation.signals import data_changed
        from scoring.hooks import register_summary

        # The pages' default reports are stored by the score job and marked stale when the data changes. By its
        # dotted path: the writer loads the agreement services (pandas), which start-up must not (scoring.hooks).
        register_summary("agreement.stored_writer.refresh")
        data_changed.connect(stored.invalidate, dispatch_uid="agreement.stored_on_data_changed")
