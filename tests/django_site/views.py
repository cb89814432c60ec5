"""The site's views. Each view that the caches should run once per host counts its runs
host-wide with ``cache.incr``, so the test can tell one run from one per worker."""

import json
import os
import uuid
from typing import Any

from django.core.cache import cache
from django.core.cache.utils import make_template_fragment_key
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.views.decorators.cache import cache_page, never_cache
from django.views.decorators.http import require_POST


def count(name: str) -> int:
    """Adds one to the host-wide counter ``name`` (created at 0) and returns it."""
    cache.add(f"count:{name}", 0, timeout=None)
    return cache.incr(f"count:{name}")


def _rendering(request: HttpRequest, kind: str) -> dict[str, Any]:
    return {
        "path": request.get_full_path(),
        "rendered_by": os.getpid(),
        "run": count(f"{kind}-{request.GET.get('t', '')}"),
        "id": uuid.uuid4().hex,
        # Long enough for GZipMiddleware to compress it.
        "padding": "lorem ipsum " * 40,
    }


@cache_page(60)
def cached_page(request: HttpRequest) -> HttpResponse:
    """A page cached whole for 60 s by ``cache_page``; counts its runs under
    ``cached-<t>``."""
    return JsonResponse(_rendering(request, "cached"))


def plain_page(request: HttpRequest) -> HttpResponse:
    """A page cached only by the per-site middleware (when the settings install it);
    counts its runs under ``plain-<t>``."""
    return JsonResponse(_rendering(request, "plain"))


@never_cache
def fragment_page(request: HttpRequest, var: str) -> HttpResponse:
    """A page rendered on every request around a fragment cached for 60 s per ``var``."""
    return render(
        request,
        "fragment.html",
        {
            "var": var,
            "pid": os.getpid(),
            "request_id": uuid.uuid4().hex,
            # Called by the template only when the fragment is rendered, not when it is
            # served from the cache.
            "render_count": lambda: count(f"fragment:{var}"),
        },
    )


@never_cache
@require_POST
def invalidate_fragment(request: HttpRequest, var: str) -> HttpResponse:
    """Deletes the cached fragment for ``var``, for every worker."""
    key = make_template_fragment_key("fragment_name", [var])
    return JsonResponse({"deleted": cache.delete(key)})


@never_cache
def value(request: HttpRequest, key: str) -> HttpResponse:
    """GET: the value under ``key`` (``null`` when absent); POST: stores the request body's
    JSON under ``key``; DELETE: removes it."""
    if request.method == "POST":
        cache.set(f"value:{key}", json.loads(request.body), timeout=None)
    elif request.method == "DELETE":
        cache.delete(f"value:{key}")
    return JsonResponse({"value": cache.get(f"value:{key}")})


@never_cache
@require_POST
def incr(request: HttpRequest, name: str) -> HttpResponse:
    """Adds one to the counter ``name``; returns the new count."""
    return JsonResponse({"count": count(name)})


@never_cache
def counter(request: HttpRequest, name: str) -> HttpResponse:
    """The counter ``name`` (0 before its first increment)."""
    return JsonResponse({"count": cache.get(f"count:{name}", 0)})


@never_cache
@require_POST
def clear(request: HttpRequest) -> HttpResponse:
    """Empties the cache for every worker of the host."""
    cache.clear()
    return JsonResponse({"cleared": True})


@never_cache
def opened_by(request: HttpRequest) -> HttpResponse:
    """The pid of the first process that opened the cache (see wsgi.py)."""
    return JsonResponse({"pid": cache.get("site:opened-by")})
