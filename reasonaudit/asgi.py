import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "reasonaudit.settings")
application = get_asgi_application()

from reasonaudit.serving import ready_to_serve  # noqa: E402 - needs the settings above

ready_to_serve()
