"""The stored-response format and the key scheme as the middleware uses them: values are
the crate's versioned bytes, so what any front end stored is served, and bytes of another
version or cut short are a miss that the next fill replaces. In process, on a real
``Cache``."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from ziggurat import Cache, _native
from ziggurat.http.engine import Engine, Fill, Hit, Pass, now
from ziggurat.http.options import Options
from ziggurat.http.store import Stored, base_key, decode, encode, lookup, save, url_key

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def cache() -> Iterator[Cache]:
    c = Cache(f"test-stored-{time.monotonic_ns()}", size="8MiB")
    try:
        yield c
    finally:
        c.unlink()


def _stored(at: float, **kw: Any) -> Stored:
    fields: dict[str, Any] = dict(
        status=200,
        headers=((b"content-type", b"text/plain"), (b"etag", b'"v1"')),
        body=b"hello",
        request_time=at,
        response_time=at,
        initial_age=0.0,
        lifetime=60.0,
        swr=0.0,
        sie=0.0,
        flags=frozenset({"must-revalidate"}),
        etag=b'"v1"',
        last_modified=None,
        vary=(),
        vary_values=(),
        tags=("posts", "p-1"),
    )
    fields.update(kw)
    return Stored(**fields)


def test_a_response_round_trips_through_its_bytes() -> None:
    s = _stored(1000.5, vary=("accept", "cookie"), vary_values=(b"a", None), last_modified=b"x")
    value = encode(s)
    assert value[:4] == b"ZH\x01R"
    back = decode(value)
    assert type(back) is Stored and back.value is value
    assert back._replace(value=b"") == s
    # Another version, cut short, or a pickle: no entry.
    for bad in (b"ZH\x02" + value[3:], value[:-1], value + b"\x00", b"\x80\x04K\x01.", b""):
        assert decode(bad) is None


def test_bytes_another_front_end_stored_are_served(cache: Cache) -> None:
    # Stored straight as the crate's bytes (what a front end in another language writes):
    # served as a hit, and the hit keeps its tags for purges.
    t = now()
    cache.set(base_key("http", "example.com", b"/x"), encode(_stored(t)), ttl=60, tags=["posts"])
    e = Engine(cache, Options(allowed_hosts=("example.com",)))
    d = e.classify("GET", "http", b"example.com", b"/x", [], None, now())
    assert isinstance(d, Hit) and d.body == b"hello"
    assert e.fresh("http", b"example.com", b"/x", [], now()) is d
    cache.invalidate_tags("posts")
    assert isinstance(e.classify("GET", "http", b"example.com", b"/x", [], None, now()), Fill)


@pytest.mark.parametrize(
    "value",
    [b"ZH\x01R\x00\xc8", b"ZH\x09R", b"garbage", ("V1", ("accept",), "g", 0.0)],
    ids=["truncated", "future-version", "foreign", "old-tuple"],
)
def test_a_value_that_decodes_to_nothing_is_a_miss(cache: Cache, value: Any) -> None:
    key = base_key("http", "example.com", b"/x")
    cache.set(key, value, ttl=60)
    e = Engine(cache, Options(allowed_hosts=("example.com",)))
    assert e.fresh("http", b"example.com", b"/x", [], now()) is None
    d = e.classify("GET", "http", b"example.com", b"/x", [], None, now())
    assert isinstance(d, Fill) and d.stale is None and d.key == key
    # The fill replaces it; the next request is a hit.
    assert isinstance(d.head(200, [(b"cache-control", b"max-age=60")], now(), now()), int)
    r = d.complete(b"new", now())
    assert r.status == 200 and d.stored
    h = e.classify("GET", "http", b"example.com", b"/x", [], None, now())
    assert isinstance(h, Hit) and h.body == b"new"


@pytest.mark.parametrize(
    "fields",
    [
        {"status": 0},
        {"status": 99},
        {"status": 600},
        {"headers": ((b"x", b"a\r\nset-cookie: pwn=1"),)},
        {"headers": ((b"x", b"a\nb"),)},
        {"headers": ((b"x", b"a\rb"),)},
        {"headers": ((b"x", b"a\x00b"),)},
        {"headers": ((b"x y", b"1"),)},
        {"headers": ((b"x:", b"1"),)},
        {"headers": ((b"", b"1"),)},
        {"etag": b'"v1"\r\nx: 1'},
    ],
    ids=[
        "status-0",
        "status-99",
        "status-600",
        "crlf-in-value",
        "lf-in-value",
        "cr-in-value",
        "nul-in-value",
        "space-in-name",
        "colon-in-name",
        "empty-name",
        "crlf-in-etag",
    ],
)
def test_a_stored_response_no_server_may_send_is_a_miss(cache: Cache, fields: Any) -> None:
    # What a writer of the segment could store: a fresh response that would otherwise be
    # served as stored. The app answers instead, and its response replaces it.
    key = base_key("http", "example.com", b"/x")
    value = encode(_stored(now(), **fields))
    assert decode(value) is None
    cache.set(key, value, ttl=60)
    e = Engine(cache, Options(allowed_hosts=("example.com",)))
    assert e.fresh("http", b"example.com", b"/x", [], now()) is None
    d = e.classify("GET", "http", b"example.com", b"/x", [], None, now())
    assert isinstance(d, Fill) and d.stale is None
    assert isinstance(d.head(200, [(b"cache-control", b"max-age=60")], now(), now()), int)
    assert d.complete(b"new", now()).status == 200 and d.stored
    h = e.classify("GET", "http", b"example.com", b"/x", [], None, now())
    assert isinstance(h, Hit) and h.body == b"new" and h.status == 200


def test_variants_live_under_a_record_in_the_same_format(cache: Cache) -> None:
    t = now()
    base = base_key("http", "h", b"/v")
    saved, _ = save(cache, base, _stored(t, vary=("accept",), vary_values=(b"fr",)), 60, t)
    record = cache.get(base)
    assert isinstance(record, bytes) and record[:4] == b"ZH\x01V"
    names, generation, until = decode(record)  # type: ignore[misc]
    assert names == ("accept",) and len(generation) == 12 and until == pytest.approx(t + 60)
    found, key = lookup(cache, base, [(b"accept", b"fr")])
    assert found == saved and key.startswith(base + b"\x00v" + generation.encode())
    assert lookup(cache, base, [(b"accept", b"de")])[0] is None


def test_keys() -> None:
    assert url_key("https://Example.com:8443/a?b") == b"zh2:https://example.com:8443 /a?b"
    with pytest.raises(ValueError, match=r"^purge\(\): url must be an absolute http\(s\) URL"):
        url_key("/relative")
    long = base_key("http", "h", b"/" + b"x" * 5000)
    assert long.startswith(b"zh2:#") and len(long) == 69
    assert _native.http_lock_key(base_key("http", "h", b"/")) == b"zh2L:http://h /"


def test_classification_reads_headers_as_bytes_only(cache: Cache) -> None:
    e = Engine(cache, Options(allowed_hosts=("example.com",)))
    d = e.classify("GET", "http", b"example.com", b"/", [(bytearray(b"x"), b"1")], None, now())
    assert isinstance(d, Pass) and d.status == b"ziggurat; fwd=bypass; detail=error"
    with pytest.raises(TypeError, match=r"^classify\(\): headers must be a sequence of \(name"):
        e._classifier.classify("GET", "http", b"example.com", b"/", [(b"x",)])
