"""The WSGI application. Importing it writes the pid of the importing process under
``site:opened-by`` unless a process did first: with ``gunicorn --preload`` that is the
master, which so opens the cache before it forks the workers; without, the first worker.
"""

import os

from django.core.cache import cache
from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "django_site.settings")

application = get_wsgi_application()
cache.add("site:opened-by", os.getpid(), timeout=None)
