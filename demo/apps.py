from django.apps import AppConfig


class DemoConfig(AppConfig):
    """The bundled demo study (`manage.py demo`). It sits above every other app
    -- it imports, judges and scores -- so it is an app of its own, and nothing
    imports it."""

    name = "demo"
    verbose_name = "Demo study"
