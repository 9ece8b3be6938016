from django.apps import AppConfig


class JudgesConfig(AppConfig):
    name = "judges"
    verbose_name = "Judges"

    def ready(self) -> None:
        from judges import runkinds, signals  # noqa: F401  (signals connects the receivers)
        from judges.runclient import JudgeClient
        from runs.clients import register

        register(JudgeClient())  # judge runs are runs of the run engine
        runkinds.declare()  # and start from the runs page
