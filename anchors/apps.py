from django.apps import AppConfig


class AnchorsConfig(AppConfig):
    name = "anchors"
    verbose_name = "Step importance (thought anchors)"
    #: Module whose @register calls add export kinds (scoring.exports loads it on first use).
    export_kinds = "anchors.export_kinds"

    def ready(self) -> None:
        from anchors import runkinds
        from anchors.runclient import ImportanceClient
        from runs.clients import register

        register(ImportanceClient())  # step-importance runs are runs of the run engine
        runkinds.declare()
