"""An HTTP response cache on a ``ziggurat.Cache``: ASGI and WSGI middleware, one set of rules.

Responses are stored in the cache's shared segment, so every worker process of the host
serves what any of them stored, and ``cache.invalidate_tags("lists")`` or ``purge(cache,
url)`` in any worker removes them for all. The app names a response's tags in the
``Cache-Tag`` header (removed before the client sees it).

>>> from ziggurat import Cache
>>> from ziggurat.http import CacheMiddleware, WSGICacheMiddleware, purge
>>> cache = Cache("doc-http", size="16MiB")
>>> async def app(scope, receive, send): ...
>>> asgi_app = CacheMiddleware(app, cache, allowed_hosts=["example.com"])
>>> purge(cache, "https://example.com/posts/")
False
>>> cache.unlink()

Options, their defaults, and the caching rules are described in docs/http.md.
"""

from ziggurat.http.asgi import CacheMiddleware
from ziggurat.http.options import DEFAULT_BYPASS_HEADERS
from ziggurat.http.store import purge
from ziggurat.http.wsgi import WSGICacheMiddleware

__all__ = ["DEFAULT_BYPASS_HEADERS", "CacheMiddleware", "WSGICacheMiddleware", "purge"]
