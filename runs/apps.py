from django.apps import AppConfig


class RunsConfig(AppConfig):
    name = "runs"
    verbose_name = "Runs of model calls"

    def ready(self) -> None:
        from runs import tasks  # noqa: F401  (registers the chunk task in every process that queues it)
