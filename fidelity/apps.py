from django.apps import AppConfig


class FidelityConfig(AppConfig):
    name = "fidelity"
    verbose_name = "Reasoning fidelity"
    #: scoring.exports loads the `fidelity` export kind from here on first use.
    export_kinds = "fidelity.export_kinds"
    #: Module whose declare() declares its kinds of run (runs.kinds loads it when the kinds are first read).
    run_kinds = "fidelity.runkinds"

    def ready(self) -> None:
        from fidelity import importing
        from fidelity.extractor import FormsClient
        from fidelity.runclient import FidelityClient
        from fidelity.running import plan_run_items
        from runs.clients import register

        register(FidelityClient(planner=plan_run_items))  # fidelity runs are runs of the run engine
        register(FormsClient())  # and so are LLM logical-form extractions
        importing.register()  # --format menatqa / gsm-plus (annotation cannot import this app)
        from annotation.importing.adapters import register_path_format
        from fidelity import symbolic_import

        # a folder of templates and/or generated instances: read by its path (also an uploaded archive)
        register_path_format(symbolic_import.FORMAT, symbolic_import.import_symbolic,
                             label="GSM-Symbolic templates or instances (a .zip or .tar.gz of the folder)",
                             root_names=symbolic_import.ROOTS, needs_model=False, options=("instances", "seed"))
        from annotation.models import register_suite_problems, register_suite_relation
        from fidelity.models import Variant

        # Variants (and their traces) belong to their suite, not to the study's problem set.
        register_suite_relation(Variant, "problem")
        register_suite_problems("meta__has_key", importing.IMPORT_KEY)  # imported variants (GSM-Plus, MenatQA)
