"""Which gunicorn worker answered: the test spreads requests over every worker and checks
that each of them sees the same cached state."""

import os
from collections.abc import Callable

from django.http import HttpRequest, HttpResponseBase


class WorkerPidMiddleware:
    """Adds ``X-Worker-Pid``. It is the outermost middleware, so the header is set after the
    cache middleware stored the response and is never part of what is cached."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        response = self.get_response(request)
        response["X-Worker-Pid"] = str(os.getpid())
        return response
