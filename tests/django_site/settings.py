"""Settings of the site served by gunicorn in test_django_workers.py: the views, the
``cache_page`` view and the template fragment cache, on ``ZigguratCache``.

The caller names the cache (``ZIG_DJANGO_SITE_CACHE``, unique per server) and a private
directory for its segments (``ZIG_DJANGO_SITE_DIR``), and removes both afterwards.
"""

import os

HERE = os.path.dirname(os.path.abspath(__file__))

SECRET_KEY = "ziggurat-django-site"
DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]
ROOT_URLCONF = "django_site.urls"
WSGI_APPLICATION = "django_site.wsgi.application"
INSTALLED_APPS: list[str] = []
DATABASES: dict[str, dict[str, str]] = {}
USE_TZ = True
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [os.path.join(HERE, "templates")],
    }
]
CACHES = {
    "default": {
        "BACKEND": "ziggurat.contrib.django.ZigguratCache",
        "LOCATION": os.environ["ZIG_DJANGO_SITE_CACHE"],
        "TIMEOUT": 300,
        "OPTIONS": {"size": "16MiB", "directory": os.environ["ZIG_DJANGO_SITE_DIR"]},
    }
}
# GZipMiddleware sits outside the views, as in most projects: a cache_page hit passes
# through it on its way out.
MIDDLEWARE = [
    "django_site.worker_pid.WorkerPidMiddleware",
    "django.middleware.gzip.GZipMiddleware",
]
