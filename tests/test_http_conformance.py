"""The rules of RFC 9111 (and RFC 9110, RFC 9213, RFC 5861) a shared cache must keep, each
checked from the outside, as a conformance suite checks a proxy: through uvicorn +
Starlette and gunicorn + Flask, two workers each sharing one segment.

Every test uses URLs of its own; ``srv.count(name)`` is how many calls reached the app.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from email.utils import formatdate

import pytest
from http_servers import OPTS, Resp, Server, running, url

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module", params=["asgi", "wsgi"])
def srv(request: pytest.FixtureRequest) -> Iterator[Server]:
    with running(request.param, workers=2) as s:
        yield s


# A server whose cache serves stale responses for 60 s when the app fails (Varnish's
# grace), waits at most 1 s for the app when it may do so, and gives responses without
# explicit freshness a default lifetime.
GRACE_OPTS = {**OPTS, "stale_if_error": 60, "app_timeout": 1, "default_ttl": 30}


@pytest.fixture(scope="module", params=["asgi", "wsgi"])
def graced(request: pytest.FixtureRequest) -> Iterator[Server]:
    with running(request.param, workers=2, opts=GRACE_OPTS) as s:
        yield s


def _hit(r: Resp) -> bool:
    return r.cache_status.startswith("ziggurat; hit")


def _twice(srv: Server, *headers: str, **params: str | int) -> tuple[str, Resp, Resp]:
    n = srv.name()
    u = url(n, *headers, **params)
    return n, srv.request(u), srv.request(u)


# -- RFC 9111 §3: statuses --------------------------------------------------------------


@pytest.mark.parametrize("status", [201, 202, 302, 303, 307, 400, 403, 500, 503])
def test_any_understood_status_stored_with_explicit_freshness(srv: Server, status: int) -> None:
    n, r1, r2 = _twice(srv, "Cache-Control: max-age=60", s=status)
    assert r1.status == status and "stored" in r1.cache_status
    assert r2.status == status and _hit(r2) and r2.body == r1.body
    assert srv.count(n) == 1


def test_redirect_with_max_age_is_stored_with_its_location(srv: Server) -> None:
    n, r1, r2 = _twice(srv, "Cache-Control: max-age=60", "Location: https://example.com/t", s=302)
    assert r1.status == r2.status == 302
    assert _hit(r2) and r2.h("location") == "https://example.com/t"
    assert srv.count(n) == 1


@pytest.mark.parametrize(
    "headers",
    [
        ["Expires: {future}"],
        ["Cache-Control: s-maxage=60"],
    ],
)
def test_redirect_other_forms_of_explicit_freshness(srv: Server, headers: list[str]) -> None:
    future = formatdate(time.time() + 3600, usegmt=True)
    n, _, r2 = _twice(srv, *(h.format(future=future) for h in headers), s=307)
    assert r2.status == 307 and _hit(r2)
    assert srv.count(n) == 1


def test_unknown_status_understood_by_its_class(srv: Server) -> None:
    # RFC 9110 §15: a 299 is understood as a 200, a 599 as a 500; with explicit freshness
    # they are stored, and must-understand keeps them out.
    for status in (299, 499, 599):
        n, r1, r2 = _twice(srv, "Cache-Control: max-age=60", s=status)
        assert "stored" in r1.cache_status and _hit(r2) and r2.status == status
        assert srv.count(n) == 1
        n, r1, r2 = _twice(srv, "Cache-Control: max-age=60, must-understand", s=status)
        assert "detail=must-understand" in r1.cache_status and not _hit(r2)
        assert srv.count(n) == 2
    # A 302 that only says public has no freshness: heuristics are for RFC 9110 §15.1's
    # statuses alone.
    n, r1, _ = _twice(srv, "Cache-Control: public", "Location: /x", s=302)
    assert "detail=no-freshness" in r1.cache_status and srv.count(n) == 2


def test_error_status_never_gets_a_default_lifetime(graced: Server) -> None:
    # default_ttl gives a 200 a lifetime, never an error page (cache-poisoning DoS).
    n, _, r2 = _twice(graced, "X-Page: 1")
    assert _hit(r2) and graced.count(n) == 1
    for status in (404, 410, 500, 503):
        n, r1, r2 = _twice(graced, "X-Page: 1", s=status)
        assert "detail=no-freshness" in r1.cache_status and not _hit(r2), status
        assert graced.count(n) == 2


# -- RFC 9111 §5.2.2.3: must-understand ------------------------------------------------


def test_must_understand_overrides_no_store_for_understood_statuses(srv: Server) -> None:
    for status in (200, 302, 404):
        n, r1, r2 = _twice(srv, "Cache-Control: must-understand, no-store, max-age=60", s=status)
        assert "stored" in r1.cache_status and _hit(r2), status
        assert srv.count(n) == 1


def test_must_understand_with_other_statuses_never_stored(srv: Server) -> None:
    n, r1, _ = _twice(srv, "Cache-Control: must-understand, no-store, max-age=60")
    assert "stored" in r1.cache_status  # (not stored before)
    for cc in ("must-understand, no-store, max-age=60", "must-understand, max-age=60"):
        for status in (201, 500):
            n, r1, r2 = _twice(srv, f"Cache-Control: {cc}", s=status)
            assert "detail=must-understand" in r1.cache_status and not _hit(r2), (cc, status)
            assert srv.count(n) == 2


# -- RFC 9111 §5.3: Expires -----------------------------------------------------------------


def _forms(t: float) -> dict[str, str]:
    """A time of the day ``t`` falls in (05:01:18, so that an hour can have one digit)
    in forms RFC 9110 §5.6.7 does not allow."""
    g = time.gmtime(t)
    d, mon, y = f"{g.tm_mday:02d}", time.strftime("%b", g), g.tm_year
    day = time.strftime("%a", g)
    return {
        "two-digit-year": f"{day}, {d} {mon} {y % 100:02d} 05:01:18 GMT",
        "utc": f"{day}, {d} {mon} {y} 05:01:18 UTC",
        "offset": f"{day}, {d} {mon} {y} 05:01:18 +0000",
        "no-comma": f"{day} {d} {mon} {y} 05:01:18 GMT",
        "extra-spaces": f"{day}, {d}  {mon}  {y} 05:01:18 GMT",
        "dashes": f"{day}, {d}-{mon}-{y} 05:01:18 GMT",
        "time-periods": f"{day}, {d} {mon} {y} 05.01.18 GMT",
        "one-digit-hour": f"{day}, {d} {mon} {y} 5:01:18 GMT",
        "lower-case": f"{day.lower()}, {d} {mon.lower()} {y} 05:01:18 gmt",
        "no-weekday": f"{d} {mon} {y} 05:01:18 GMT",
    }


@pytest.mark.parametrize("form", sorted(_forms(0)))
def test_expires_in_a_form_rfc9110_does_not_allow_is_already_expired(
    srv: Server, form: str
) -> None:
    now = time.time()
    expires = _forms(now + 3 * 86400)[form]
    n, r1, r2 = _twice(srv, f"Date: {formatdate(now, usegmt=True)}", f"Expires: {expires}")
    assert not _hit(r2), (form, expires, r1.cache_status)
    assert srv.count(n) == 2


def test_expires_in_the_three_allowed_forms_only_and_on_one_line(srv: Server) -> None:
    now = time.time()
    date = f"Date: {formatdate(now, usegmt=True)}"
    g = time.gmtime(now + 3600)
    for expires in (
        formatdate(now + 3600, usegmt=True),
        time.strftime("%A, %d-%b-%y %H:%M:%S GMT", g),
        time.strftime("%a %b ", g) + f"{g.tm_mday:2d}" + time.strftime(" %H:%M:%S %Y", g),
    ):
        n, _, r2 = _twice(srv, date, f"Expires: {expires}")
        assert _hit(r2), expires
        assert srv.count(n) == 1
    a, b = formatdate(now + 3600, usegmt=True), formatdate(now + 7200, usegmt=True)
    n, _, r2 = _twice(srv, date, f"Expires: {a}", f"Expires: {b}")
    assert not _hit(r2) and srv.count(n) == 2


# -- RFC 9111 §5.1: Age ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "ages",
    [["1a"], ["-5"], ["7200.0"], ["abc"], ["0, 7200"]],
    ids=["prefix", "negative", "float", "text", "list-first-0"],
)
def test_invalid_or_repeated_age_ignored_or_first_used(srv: Server, ages: list[str]) -> None:
    n, r1, r2 = _twice(srv, "Cache-Control: max-age=3600", *(f"Age: {a}" for a in ages))
    assert "stored" in r1.cache_status and _hit(r2), r1.cache_status
    assert int(r2.h("age") or "-1") < 3600
    assert srv.count(n) == 1


def test_first_age_counts(srv: Server) -> None:
    for first_fresh in (["0, 7200"], ["0", "7200"]):
        n, _, r2 = _twice(srv, "Cache-Control: max-age=3600", *(f"Age: {a}" for a in first_fresh))
        assert _hit(r2) and srv.count(n) == 1, first_fresh
    for first_old in (["7200, 0"], ["7200", "0"]):
        n, _, r2 = _twice(
            srv, "Cache-Control: max-age=3600", 'ETag: "a"', *(f"Age: {a}" for a in first_old)
        )
        assert not _hit(r2) and srv.count(n) == 2, first_old


# -- RFC 9110 §7.6.1, RFC 9111 §3.1: hop-by-hop fields ----------------------------------------


def test_connection_listed_fields_never_sent_from_the_cache(srv: Server) -> None:
    n = srv.name()
    u = url(
        n,
        "Cache-Control: max-age=1",
        "Connection: X-Hop, X-Other",
        "X-Hop: 1",
        "X-Other: 2",
        "X-Kept: 3",
        etag='"v"',
    )
    r1 = srv.request(u)
    assert "stored" in r1.cache_status
    assert r1.h("x-hop") is None and r1.h("x-other") is None and r1.h("x-kept") == "3"
    time.sleep(1.5)
    # The 304 that freshens the stored response names them again: they are not merged.
    r2 = srv.request(u)
    assert "fwd-status=304" in r2.cache_status
    r3 = srv.request(u)
    assert _hit(r3)
    for r in (r2, r3):
        assert r.h("x-hop") is None and r.h("x-other") is None and r.h("x-kept") == "3"
    assert srv.count(n) == 2


# -- RFC 9111 §3.2: updating stored headers -------------------------------------------------


def test_304_updates_headers_but_not_those_describing_the_stored_body(srv: Server) -> None:
    n = srv.name()
    u = url(
        n,
        "Cache-Control: max-age=1",
        "Content-Encoding: x-a",
        "Content-MD5: a",
        "X-Note: old",
        etag='"v"',
    )
    first = srv.request(u)
    time.sleep(1.5)
    srv.spec(
        n,
        304,
        [
            ("ETag", '"v"'),
            ("Cache-Control", "max-age=60"),
            ("Content-Encoding", "x-b"),
            ("Content-MD5", "b"),
            ("X-Note", "new"),
        ],
    )
    r2 = srv.request(u)
    assert "fwd-status=304" in r2.cache_status
    r3 = srv.request(u)
    assert _hit(r3)
    for r in (r2, r3):
        assert r.body == first.body
        assert r.h("content-encoding") == "x-a" and r.h("content-md5") == "a"
        assert r.h("x-note") == "new"
    assert srv.count(n) == 2


# -- RFC 9111 §4.2.4, RFC 5861: serving stale when the app fails ------------------------------


@pytest.mark.parametrize("how", ["500", "502", "504", "raise"])
def test_stale_if_error_for_each_failure(srv: Server, how: str) -> None:
    n = srv.name()
    u = url(n, "Cache-Control: max-age=1, stale-if-error=600")
    first = srv.request(u)
    time.sleep(1.5)
    srv.fail(n, how)
    try:
        r = srv.request(u)
    finally:
        srv.fail(n, None)
    assert r.status == 200 and r.body == first.body, how
    assert "detail=stale-if-error" in r.cache_status


def test_grace_option_serves_stale_without_the_directive(graced: Server) -> None:
    for how in ("503", "raise"):
        n = graced.name()
        u = url(n, "Cache-Control: max-age=1")
        first = graced.request(u)
        time.sleep(1.5)
        graced.fail(n, how)
        try:
            r = graced.request(u)
        finally:
            graced.fail(n, None)
        assert r.status == 200 and r.body == first.body, how
        assert "detail=stale-if-error" in r.cache_status


@pytest.mark.parametrize(
    "directive", ["must-revalidate", "proxy-revalidate", "no-cache", "s-maxage=1"]
)
def test_grace_option_never_overrides_forbidding_directives(graced: Server, directive: str) -> None:
    n = graced.name()
    u = url(n, f"Cache-Control: max-age=1, {directive}", etag='"e"')
    graced.request(u)
    time.sleep(1.5)
    graced.fail(n, "503")
    try:
        r = graced.request(u)
    finally:
        graced.fail(n, None)
    assert r.status == 503 and "stale-if-error" not in r.cache_status


def test_app_timeout_serves_stale(graced: Server) -> None:
    n = graced.name()
    u = url(n, "Cache-Control: max-age=1")
    first = graced.request(u)
    time.sleep(1.5)
    graced.fail(n, "sleep 4")
    try:
        r = graced.request(u)
    finally:
        graced.fail(n, None)
    assert r.status == 200 and r.body == first.body
    assert "detail=stale-if-error-timeout" in r.cache_status


def test_app_timeout_never_serves_what_directives_forbid(graced: Server) -> None:
    n = graced.name()
    u = url(n, "Cache-Control: max-age=1, must-revalidate", etag='"e"')
    graced.request(u)
    time.sleep(1.5)
    graced.fail(n, "sleep 2")
    try:
        r = graced.request(u)
    finally:
        graced.fail(n, None)
    # The app was waited for: its (new) answer, not the stale one.
    assert r.status == 200 and "stale" not in r.cache_status.split("detail=")[-1]
    assert "fwd=stale" in r.cache_status


# -- RFC 9213: targeted cache-control fields -------------------------------------------------


def test_cdn_cache_control_overrides_cache_control_and_is_forwarded(srv: Server) -> None:
    n, r1, r2 = _twice(srv, "Cache-Control: no-store", "CDN-Cache-Control: max-age=600")
    assert "stored" in r1.cache_status and _hit(r2)
    assert r1.h("cdn-cache-control") == r2.h("cdn-cache-control") == "max-age=600"
    assert r2.h("cache-control") == "no-store"
    assert srv.count(n) == 1


def test_own_targeted_field_wins_and_is_removed(srv: Server) -> None:
    n, r1, r2 = _twice(
        srv,
        "Cache-Control: max-age=0",
        "CDN-Cache-Control: no-store",
        "Ziggurat-Cache-Control: max-age=600",
    )
    assert "stored" in r1.cache_status and _hit(r2)
    assert r1.h("ziggurat-cache-control") is None and r2.h("ziggurat-cache-control") is None
    assert r2.h("cdn-cache-control") == "no-store"
    assert srv.count(n) == 1


@pytest.mark.parametrize("targeted", ["max-age=0", "no-store", "private", "no-cache"])
def test_cdn_cache_control_forbids_what_cache_control_allows(srv: Server, targeted: str) -> None:
    n, _, r2 = _twice(srv, "Cache-Control: max-age=3600", f"CDN-Cache-Control: {targeted}")
    assert not _hit(r2), targeted
    assert srv.count(n) == 2


def test_invalid_targeted_field_is_ignored(srv: Server) -> None:
    n, _, r2 = _twice(srv, "Cache-Control: no-store", "CDN-Cache-Control: max-age=600")
    assert _hit(r2) and srv.count(n) == 1
    for targeted, cache_control, stored in [
        ("max-age=600, &&", "no-store", False),  # not a Dictionary
        ('max-age="600"', "no-store", False),  # wrong type: the directive is dropped
        ("MaX-aGe=0", "max-age=3600", True),  # keys are lower-case: Cache-Control decides
        ("", "max-age=3600", True),  # empty
    ]:
        n, _, r2 = _twice(srv, f"Cache-Control: {cache_control}", f"CDN-Cache-Control: {targeted}")
        assert _hit(r2) is stored, (targeted, cache_control)
        assert srv.count(n) == (1 if stored else 2)


def test_cdn_cache_control_ignores_expires(srv: Server) -> None:
    now = time.time()
    n, _, r2 = _twice(
        srv,
        f"Date: {formatdate(now, usegmt=True)}",
        f"Expires: {formatdate(now - 600, usegmt=True)}",
        "CDN-Cache-Control: max-age=600",
    )
    assert _hit(r2) and srv.count(n) == 1


# -- the options' checks -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "kw, error, words",
    [
        ({"stale_if_error": -1}, ValueError, "stale_if_error"),
        ({"app_timeout": "5"}, TypeError, "app_timeout"),
        ({"targeted_fields": "CDN-Cache-Control"}, TypeError, "targeted_fields"),
        ({"targeted_fields": ["Cache-Control"]}, ValueError, "targeted_fields"),
        ({"targeted_forward": [""]}, ValueError, "targeted_forward"),
    ],
)
def test_new_options_refuse_bad_values(kw: dict[str, object], error: type, words: str) -> None:
    import uuid

    from ziggurat import Cache
    from ziggurat.http import CacheMiddleware, WSGICacheMiddleware

    async def app(scope: object, receive: object, send: object) -> None:
        return None

    cache = Cache("conf-opts-" + uuid.uuid4().hex[:8], size="8MiB")
    try:
        for mw, who in ((CacheMiddleware, "CacheMiddleware()"), (WSGICacheMiddleware, "WSGI")):
            with pytest.raises(error) as e:
                mw(app, cache, **kw)  # type: ignore[operator]
            assert who in str(e.value) and words in str(e.value)
            assert "unknown option" not in str(e.value)
    finally:
        cache.unlink()
