"""Settings for running Django's own cache tests against ``ZigguratCache``.

The caches' segments live in ``ZIGGURAT_DJANGO_DIR`` (a private directory the caller
creates and removes), or in a fresh temporary directory under /dev/shm.
"""

import os
import tempfile

SECRET_KEY = "ziggurat-django-suite"
DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3"}}
# "cache" is the app of Django's cache tests: their Poll model needs its table.
INSTALLED_APPS = ["django.contrib.contenttypes", "django.contrib.auth", "cache"]
CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
TEMPLATES = [{"BACKEND": "django.template.backends.django.DjangoTemplates", "APP_DIRS": True}]
USE_TZ = False
DEFAULT_AUTO_FIELD = "django.db.models.AutoField"
# Django's own runner forces "en"; CacheI18nTest relies on it.
LANGUAGE_CODE = "en"

ZIGGURAT_DIRECTORY = os.environ.get("ZIGGURAT_DJANGO_DIR") or tempfile.mkdtemp(
    prefix="ziggurat-django-", dir="/dev/shm"
)
