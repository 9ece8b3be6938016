from django.apps import AppConfig


class SubjectsConfig(AppConfig):
    name = "subjects"
    verbose_name = "Subject models"

    def ready(self) -> None:
        from annotation.jobs import end_on_cancel
        from runs.clients import register
        from subjects import runkinds
        from subjects.runclient import GenerationClient
        from subjects.services import PROBE_JOB_KIND

        register(GenerationClient())  # generation runs are runs of the run engine
        end_on_cancel(PROBE_JOB_KIND)  # a probe is three short requests: a cancel ends its job at once
        runkinds.declare()  # generation and probe on the runs page
