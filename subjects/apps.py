from django.apps import AppConfig


class SubjectsConfig(AppConfig):
    name = "subjects"
    verbose_name = "Subject models"

    def ready(self) -> None:
        from runs.clients import register
        from subjects import runkinds
        from subjects.runclient import GenerationClient

        register(GenerationClient())  # generation runs are runs of the run engine
        runkinds.declare()  # generation and probe on the runs page
