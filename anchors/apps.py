from django.apps import AppConfig


class AnchorsConfig(AppConfig):
    name = "anchors"
    verbose_name = "Step importance (thought anchors)"
    #: Module whose @register calls add export kinds (scoring.exports loads it on first use).
    export_kinds = "anchors.export_kinds"
    #: Module whose declare() declares its kinds of run (runs.kinds loads it when the kinds are first read).
    run_kinds = "anchors.runkinds"

    def ready(self) -> None:
        from anchors.importing import FORMAT, import_analysis
        from anchors.panels import review_panel
        from anchors.runclient import ImportanceClient
        from annotation.importing.adapters import register_path_format
        from annotation.review.panels import register_panel
        from runs.clients import register

        register(ImportanceClient())  # step-importance runs are runs of the run engine
        register_panel("step-importance", review_panel)  # the heat map on the review page
        # annotation (lower in the app order) cannot import this app: the format is registered here. A folder's
        # files name the model only through the data's layout, so --model is optional.
        register_path_format(FORMAT, import_analysis,
                             label="Thought Anchors analyses (a .zip or .tar.gz of problem folders)",
                             root_names=frozenset({"correct_base_solution", "incorrect_base_solution"}),
                             needs_model=False)
