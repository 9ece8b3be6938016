from django.apps import AppConfig


class JudgesConfig(AppConfig):
    name = "judges"
    verbose_name = "Judges"

    def ready(self) -> None:
        from judges import signals  # noqa: F401  (connects the receivers)
        from judges.runclient import JudgeClient
        from runs.clients import register

        register(JudgeClient())  # judge runs are runs of the run engine
