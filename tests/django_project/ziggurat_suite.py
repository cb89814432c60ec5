"""Django's own cache tests (tests/cache/tests.py of the Django source) applied to
``ZigguratCache``: the backend contract (``BaseCacheTests``) and the cache middleware and
utilities on top of it.

Run from this directory with the Django sources' ``tests`` directory on the path::

    django-admin test ziggurat_suite --settings=settings
"""

from typing import Any

from cache import tests as dj
from django.conf import settings
from django.test import TestCase, override_settings

BACKEND = "ziggurat.contrib.django.ZigguratCache"


def options(**extra: Any) -> dict[str, Any]:
    """OPTIONS of a small cache in the run's private directory."""
    return {"directory": settings.ZIGGURAT_DIRECTORY, "size": "16MiB", **extra}


def backend_caches(location: str, **extra: Any) -> dict[str, Any]:
    """The seven aliases of Django's tests minus the culling ones: ziggurat evicts by its
    own policy, not by MAX_ENTRIES/CULL_FREQUENCY (the cull tests skip themselves)."""
    return dj.caches_setting_for_tests(
        BACKEND=BACKEND,
        LOCATION=location,
        OPTIONS=options(**extra),
        exclude={"cull", "zero_cull"},
    )


def single(location: str, **params: Any) -> dict[str, Any]:
    """A "default" alias only, as the middleware tests use."""
    return {"default": {"BACKEND": BACKEND, "LOCATION": location, "OPTIONS": options(), **params}}


@override_settings(CACHES=backend_caches("dj-base"))
class ZigguratCacheTests(dj.BaseCacheTests, TestCase):
    """The whole backend contract, with the per-process L1 on."""


@override_settings(CACHES=backend_caches("dj-l2", l1_items=0))
class ZigguratL2OnlyCacheTests(dj.BaseCacheTests, TestCase):
    """The same contract with L1 off: every read goes to the shared segment."""


@override_settings(
    CACHES={
        **single("dj-mw"),
        "other": {
            "BACKEND": BACKEND,
            "LOCATION": "dj-mw-other",
            "TIMEOUT": "1",
            "OPTIONS": options(),
        },
    }
)
class ZigguratCacheMiddlewareTest(dj.CacheMiddlewareTest):
    """UpdateCacheMiddleware, FetchFromCacheMiddleware and cache_page."""


@override_settings(CACHES=single("dj-utils"))
class ZigguratCacheUtils(dj.CacheUtils):
    """django.utils.cache's key learning and header patching."""


@override_settings(CACHES=single("dj-utils-prefixed", KEY_PREFIX="cacheprefix"))
class ZigguratPrefixedCacheUtils(dj.PrefixedCacheUtils):
    """The same with a KEY_PREFIX."""


@override_settings(CACHES=single("dj-head"))
class ZigguratCacheHEADTest(dj.CacheHEADTest):
    """HEAD requests answered from cached GETs."""


@override_settings(CACHES=single("dj-i18n"))
class ZigguratCacheI18nTest(dj.CacheI18nTest):
    """Cache keys by language and time zone."""


@override_settings(CACHES=single("dj-i18n-prefixed", KEY_PREFIX="cacheprefix"))
class ZigguratPrefixedCacheI18nTest(dj.PrefixedCacheI18nTest):
    """The same with a KEY_PREFIX."""


@override_settings(CACHES=single("dj-template"))
class ZigguratTestWithTemplateResponse(dj.TestWithTemplateResponse):
    """Cache headers on TemplateResponse."""
