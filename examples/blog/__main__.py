"""Run the blog with four workers: ``python -m examples.blog [--server uvicorn] [--port N]
[--db sqlite]``.

The database is a private PostgreSQL server started for the run (``--db sqlite``: an SQLite
file; ``DATABASE_URL=postgresql://...``: that existing database, kept as it is). It and the
cache segment live in fresh directories, removed on exit; the blog is seeded with a few
months of posts if it has none.
"""

from __future__ import annotations

import argparse
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from examples.blog.store import seed
from examples.shortener.demo_database import CHOICES, DemoDatabase


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--server", choices=["gunicorn", "uvicorn"], default="gunicorn")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--db", choices=CHOICES, default="postgresql")
    args = p.parse_args(argv)
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    work = tempfile.mkdtemp(prefix="ziggurat-blog-")
    token = secrets.token_urlsafe(16)
    database = DemoDatabase(args.db, os.environ.get("DATABASE_URL"), Path(work))
    try:
        database.start()
        url = database.fresh("blog")
        seed(url)
        return _serve(args, root, work, token, url)
    finally:
        database.stop()
        shutil.rmtree(work, ignore_errors=True)


def _serve(args: argparse.Namespace, root: str, work: str, token: str, url: str) -> int:
    env = dict(os.environ)
    env.update(
        BLOG_DB=url,
        BLOG_CACHE="blog-" + secrets.token_hex(4),
        BLOG_CACHE_DIR=work,
        BLOG_ADMIN_TOKEN=token,
        PYTHONPATH=root + os.pathsep + env.get("PYTHONPATH", ""),
    )
    if args.server == "gunicorn":
        cmd = [sys.executable, "-m", "gunicorn", "-w", str(args.workers)]
        cmd += ["-b", f"127.0.0.1:{args.port}", "examples.blog.app:wsgi_app"]
    else:
        cmd = [sys.executable, "-m", "uvicorn", "--workers", str(args.workers)]
        cmd += ["--port", str(args.port), "examples.blog.app:asgi_app"]
    print(f"blog on http://127.0.0.1:{args.port}/ ({args.server}, {args.workers} workers)")
    print(f"database {url}; cache in {work}; admin token: {token}")
    print(
        f"new post: curl -d 'title=Hello&body=Text&tags=python' "
        f"-H 'X-Admin-Token: {token}' http://127.0.0.1:{args.port}/admin/posts"
    )
    # SIGTERM ends the demo as Ctrl-C does: the server stops, the directory goes.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    server = subprocess.Popen(cmd, cwd=root, env=env)
    try:
        return server.wait()
    except KeyboardInterrupt:
        return 0
    finally:
        if server.poll() is None:
            server.terminate()
            try:
                server.wait(15)
            except subprocess.TimeoutExpired:
                server.kill()


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
