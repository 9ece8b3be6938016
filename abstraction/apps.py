from django.apps import AppConfig


class AbstractionConfig(AppConfig):
    name = "abstraction"
    verbose_name = "Abstraction benchmark"
    default_auto_field = "django.db.models.BigAutoField"
    #: Export kinds (scoring.exports loads this module on first use).
    export_kinds = "abstraction.export_kinds"
    #: Module whose declare() declares its kinds of run (runs.kinds loads it when the kinds are first read).
    run_kinds = "abstraction.runkinds"

    def ready(self) -> None:
        from abstraction.importing import FORMAT, LEVELS, import_outputs
        from abstraction.models import ITEM_DOMAIN
        from abstraction.runclient import AbstractionClient
        from annotation.importing.adapters import register_path_format
        from annotation.models import register_suite_problems
        from runs.clients import register

        register(AbstractionClient())  # benchmark runs are runs of the run engine
        # annotation (lower in the app order) cannot import this app: the format is registered here.
        register_path_format(FORMAT, import_outputs, label="Abstraction benchmark outputs (a .zip or .tar.gz of the folder)",
                             root_names=frozenset(LEVELS))
        # The benchmark's items (imported or generated, one problem each, domain "abstraction") belong to the
        # benchmark as a fidelity suite's variants belong to their suite: the study's problem and trace lists,
        # counts, generation, judges and scores leave them out (issue 31: 384 zero-step traces mixed in).
        register_suite_problems("domain", ITEM_DOMAIN)
