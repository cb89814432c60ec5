"""A WSGI server behind ziggurat's WSGICacheMiddleware on cache argv[1], the Python side
of the cross-language HTTP tests: it prints {"port"} once listening and {"call": path}
each time the app runs. The app answers "python <n>" with max-age=60 and the tag
"posts"."""

import json
import sys
from wsgiref.simple_server import WSGIRequestHandler, make_server

from ziggurat import Cache
from ziggurat.http import WSGICacheMiddleware

calls = 0


def app(environ, start_response):
    global calls
    calls += 1
    print(json.dumps({"call": environ["PATH_INFO"]}), flush=True)
    start_response(
        "200 OK",
        [("Cache-Control", "max-age=60"), ("Cache-Tag", "posts"), ("Content-Type", "text/plain")],
    )
    return [f"python {calls}".encode()]


class Quiet(WSGIRequestHandler):
    def log_message(self, format, *args):
        pass


cache = Cache(sys.argv[1], size="16MiB")
wrapped = WSGICacheMiddleware(
    app, cache, allowed_hosts=["site.test"], purge_token="a-purge-token-of-16+"
)
server = make_server("127.0.0.1", 0, wrapped, handler_class=Quiet)
print(json.dumps({"port": server.server_port}), flush=True)
server.serve_forever()
