from django.apps import AppConfig


class JudgesConfig(AppConfig):
    name = "judges"
    verbose_name = "Judges"
    #: Module whose declare() declares its kinds of run (runs.kinds loads it when the kinds are first read).
    run_kinds = "judges.runkinds"

    def ready(self) -> None:
        from judges import signals  # noqa: F401  (signals connects the receivers)
        from judges.runclient import JudgeClient
        from judges.tagging import TagClient
        from runs.clients import register

        register(JudgeClient())  # judge runs are runs of the run engine
        register(TagClient())  # and so are its step-function tagging runs
