import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "reasonaudit.settings")
application = get_wsgi_application()

from reasonaudit.serving import ready_to_serve  # noqa: E402 - needs the settings above

ready_to_serve()
