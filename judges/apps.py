from django.apps import AppConfig


class JudgesConfig(AppConfig):
    name = "judges"
    verbose_name = "Judges"

    def ready(self) -> None:
        from judges import signals  # noqa: F401  (connects the receivers)
