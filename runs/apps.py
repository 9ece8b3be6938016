from django.apps import AppConfig


class RunsConfig(AppConfig):
    name = "runs"
    verbose_name = "Runs of model calls"

    def ready(self) -> None:
        from annotation import jobs
        from runs import tasks  # noqa: F401  (registers the chunk task in every process that queues it)
        from runs.clients import page_of_job

        jobs.register_link(page_of_job)  # the job page links to the page of the run's kind
