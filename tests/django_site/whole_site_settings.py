"""The same site with Django's per-site cache: every GET response the views do not mark
uncacheable is stored for ``CACHE_MIDDLEWARE_SECONDS`` by ``UpdateCacheMiddleware`` and
served by ``FetchFromCacheMiddleware`` before any view runs.
"""

from django_site.settings import *  # noqa: F403

CACHE_MIDDLEWARE_SECONDS = 60
CACHE_MIDDLEWARE_KEY_PREFIX = "whole-site"
MIDDLEWARE = [
    "django_site.worker_pid.WorkerPidMiddleware",
    "django.middleware.cache.UpdateCacheMiddleware",
    "django.middleware.cache.FetchFromCacheMiddleware",
]
