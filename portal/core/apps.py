from django.apps import AppConfig
from django.conf import settings

# The Celery app is loaded where Django starts (web, manage.py, tests: Django imports this
# module while it sets up), not by importing the `portal` package: `import portal.sizing.estimator`
# stays free of Django and Celery, and tasks queued by the web process still go through the
# configured app and broker. Workers find it themselves: `celery -A portal` loads `portal.celery`.
import portal.celery  # noqa: F401


class CoreConfig(AppConfig):
    name = "portal.core"
    label = "core"
    verbose_name = "Core"

    def ready(self):
        for path in settings.LOCAL_DIRS:
            path.mkdir(parents=True, exist_ok=True)
