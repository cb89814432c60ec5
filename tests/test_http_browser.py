"""The blog in a real browser: headless Chromium, driven by Selenium through the system's
chromedriver, against the blog under gunicorn (WSGI) with four workers and the response cache
on. A comment posted through the post page's HTML form is on that page at every reload,
whichever worker serves it.

The worker behind each reload is read from the ``X-Served-By`` header (the worker's pid, added
outside the cache) in Chromium's own network log, so the test sees the responses the browser
got, hits and revalidations alike.

Chromium comes from Debian's ``chromium`` and ``chromium-driver`` packages (CI installs them);
Selenium is given both paths, so Selenium Manager never downloads a browser or a driver.
"""

from __future__ import annotations

import json
import os
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from http_servers import Server, free_port, serving

pytestmark = pytest.mark.timeout(120)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
RELOADS = 24  # sync workers close every connection: the kernel spreads reloads over workers
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _browser_missing() -> str | None:
    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if not os.access(p, os.X_OK)]
    if missing:
        return f"{' and '.join(missing)} not installed (apt-get install chromium chromium-driver)"
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (requirements-dev.txt)"
    return None


@pytest.fixture(scope="module")
def blog() -> Iterator[Server]:
    sys.path.insert(0, ROOT)
    from examples.blog.store import seed

    base = f"/dev/shm/zigbrowser-{uuid.uuid4().hex}"
    os.mkdir(base, 0o700)
    db = os.path.join(base, "blog.sqlite3")
    seed(db)
    port = free_port()
    env = dict(os.environ)
    env.update(
        BLOG_DB=db,
        BLOG_CACHE="blog-" + uuid.uuid4().hex[:8],
        BLOG_CACHE_DIR=base,
        BLOG_ADMIN_TOKEN="browser-admin-token-0123456789",
        PYTHONPATH=ROOT + os.pathsep + env.get("PYTHONPATH", ""),
    )
    cmd = [sys.executable, "-m", "gunicorn", "-w", "4", "-b", f"127.0.0.1:{port}"]
    cmd += ["--log-level", "warning", "examples.blog.app:wsgi_app"]
    with serving("wsgi", cmd, port, base, cwd=ROOT, env=env, ready="/about") as srv:
        yield srv


@pytest.fixture
def chromium(tmp_path: Path) -> Iterator[Any]:
    problem = _browser_missing()
    if problem is not None:
        # CI installs Chromium: there its absence is a failure, never a silent skip.
        if os.environ.get("CI"):
            pytest.fail(f"the browser test cannot run in CI: {problem}")
        pytest.skip(problem)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    # Offline: with both paths given Selenium Manager has nothing to find, and must not try.
    os.environ["SE_OFFLINE"] = "true"
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for arg in (
        "--headless=new",
        "--no-sandbox",  # CI runs as root, where Chromium's sandbox cannot start
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--window-size=1000,1400",
        f"--user-data-dir={tmp_path / 'profile'}",
    ):
        opts.add_argument(arg)
    opts.set_capability("goog:loggingPrefs", {"performance": "ALL"})
    driver = webdriver.Chrome(options=opts, service=Service(executable_path=CHROMEDRIVER))
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()


def _document_responses(driver: Any, path: str) -> list[dict[str, str]]:
    """Headers (lower-cased names) of the responses to ``path`` since the last call."""
    out = []
    for entry in driver.get_log("performance"):
        msg = json.loads(entry["message"])["message"]
        if msg.get("method") != "Network.responseReceived":
            continue
        resp = msg["params"]["response"]
        if resp["url"].split("#")[0].endswith(path):
            out.append({k.lower(): v for k, v in resp["headers"].items()})
    return out


def test_comment_posted_in_the_browser_is_seen_by_every_worker(
    blog: Server, chromium: Any, tmp_path: Path
) -> None:
    from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    base = f"http://127.0.0.1:{blog.port}"
    chromium.get(base + "/")
    post_path = chromium.find_element(By.CSS_SELECTOR, "article h2 a").get_attribute("pathname")
    assert post_path and post_path.startswith("/posts/")
    # Warm the post page into the shared cache first, so the comment has something to purge.
    for _ in range(3):
        chromium.get(base + post_path)
    assert "0 comments" in chromium.find_element(By.ID, "comments").text
    _document_responses(chromium, post_path)

    text = f"Seen from every worker {uuid.uuid4().hex[:8]}"
    chromium.find_element(By.NAME, "author").send_keys("Browser")
    chromium.find_element(By.NAME, "body").send_keys(text)
    chromium.find_element(By.CSS_SELECTOR, "#comments form button").click()
    # The form's 303 lands back on the post page, at its comments; until the new page has
    # loaded, the old one's elements go stale under the wait.
    WebDriverWait(
        chromium, 20, ignored_exceptions=(NoSuchElementException, StaleElementReferenceException)
    ).until(
        lambda d: (
            d.current_url.split("#")[0].endswith(post_path)
            and text in d.find_element(By.ID, "comments").text
        )
    )

    workers: set[str] = set()
    statuses: list[str] = []
    for i in range(RELOADS):
        # A reload asks every cache on the way to revalidate (Cache-Control: max-age=0); going
        # to the page again, as by a link, lets the shared cache answer: both must show it.
        if i % 2:
            chromium.get(base + post_path)
        else:
            chromium.refresh()
        comments = chromium.find_element(By.ID, "comments").text
        assert text in comments, (i, comments)
        assert "1 comment" in comments, (i, comments)
        for headers in _document_responses(chromium, post_path):
            workers.add(headers.get("x-served-by", ""))
            statuses.append(headers.get("cache-status", ""))
        if len(workers - {""}) >= 3 and i >= 8:
            break
    workers.discard("")
    assert len(workers) >= 2, (workers, statuses)
    assert all(s.startswith("ziggurat;") for s in statuses), statuses
    assert any(s.startswith("ziggurat; hit") for s in statuses), statuses

    shot = tmp_path / "post-with-comment.png"
    assert chromium.save_screenshot(str(shot))
    data = shot.read_bytes()
    assert len(data) > len(PNG_MAGIC) and data.startswith(PNG_MAGIC)
