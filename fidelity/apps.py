from django.apps import AppConfig


class FidelityConfig(AppConfig):
    name = "fidelity"
    verbose_name = "Reasoning fidelity"

    def ready(self) -> None:
        from fidelity.runclient import FidelityClient
        from runs.clients import register

        register(FidelityClient())  # fidelity runs are runs of the run engine
