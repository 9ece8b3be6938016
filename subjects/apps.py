from django.apps import AppConfig


class SubjectsConfig(AppConfig):
    name = "subjects"
    verbose_name = "Subject models"
    #: Module whose declare() declares its kinds of run (runs.kinds loads it when the kinds are first read).
    run_kinds = "subjects.runkinds"

    def ready(self) -> None:
        from annotation.jobs import end_on_cancel
        from runs.clients import register
        from subjects.runclient import GenerationClient
        from subjects.services import PROBE_JOB_KIND

        register(GenerationClient())  # generation runs are runs of the run engine
        end_on_cancel(PROBE_JOB_KIND)  # a probe is three short requests: a cancel ends its job at once
