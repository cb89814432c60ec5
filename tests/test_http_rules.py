"""The HTTP cache's rules as the Python middleware reaches them: ``ziggurat.http.rules``,
``storable`` and the engine call the ``ziggurat-http`` crate (its own tests carry the RFC
cases); here, what the crossing adds: the results' Python types, the errors for bad
input, and the inputs the former Python rules failed on.
"""

from __future__ import annotations

import pytest
from ziggurat import _native
from ziggurat.http import rules, storable
from ziggurat.http.options import Options
from ziggurat.http.store import Stored, encode

YEAR_0 = b"Sat, 01 Jan 0000 00:00:00 GMT"


def test_a_date_in_year_0_is_a_date_not_an_error() -> None:
    # The proleptic Gregorian calendar has a year 0; Python's calendar module has not.
    h = [(b"expires", YEAR_0), (b"date", b"Sun, 06 Nov 1994 08:49:37 GMT")]
    # Explicitly stale (Expires long before Date): stored for validation, lifetime 0.
    m = storable.decide(Options(), 200, [*h, (b"etag", b'"e"')], storable.Request(), 1.0)
    assert isinstance(m, storable.Meta) and m.lifetime == 0.0
    m = storable.decide(
        Options(), 200, [(b"date", YEAR_0), (b"cache-control", b"max-age=9")], storable.Request()
    )
    # A Date of year 0 makes it older than its max-age on arrival (unparsed, it would be 0).
    assert m == "stale"
    m = storable.decide(
        Options(heuristic=True), 200, [(b"last-modified", YEAR_0)], storable.Request()
    )
    # Heuristic freshness: 10 % of its age, at most a day.
    assert isinstance(m, storable.Meta) and m.lifetime == 86400.0


def test_results_keep_their_python_types() -> None:
    cc = rules.parse_cache_control([b'private="a, b", max-age=5'])
    assert cc == {"private": "a, b", "max-age": "5"} and list(cc) == ["private", "max-age"]
    h = [(b"vary", b"B, a"), (b"connection", b"X, y")]
    assert rules.connection_listed(h) == {b"x", b"y"}
    assert rules.vary_digest(["a", "b"], [(b"a", b"1")]) == (
        b"2431de83d7406d821e23d080bb731625",
        (b"1", None),
    )
    assert rules.split_tags([b"a,b a"]) == ["a", "b"]
    assert {b"connection", b"te"} <= rules.HOP_BY_HOP
    assert rules.cache_status("hit", ttl=3, collapsed=True, stored=False) == (
        b"ziggurat; hit; ttl=3; collapsed"
    )
    m = storable.decide(
        Options(),
        200,
        [(b"cache-control", b"max-age=60, must-revalidate"), (b"cache-tag", b"t u"), (b"x", b"1")],
        storable.Request(headers=[(b"accept", b"a")], key_headers=("accept",)),
    )
    assert isinstance(m, storable.Meta)
    assert m.headers == ((b"cache-control", b"max-age=60, must-revalidate"), (b"x", b"1"))
    assert m.flags == frozenset({"must-revalidate"}) and m.tags == ("t", "u")
    assert (m.vary, m.vary_values, m.ttl) == (("accept",), (b"a",), 60.0)
    s = Stored(200, (), b"", 0.0, 0.0, 0.0, 60.0, 0.0, 30.0, frozenset(), None, None, (), (), ())
    # 95 s past its freshness: the request's stale-if-error=99 allows it, 90 does not.
    v = encode(s)

    def exchange(cc: dict[str, str | None]) -> _native.HttpExchange:
        return _native.HttpExchange("GET", [], cc, False, b"k", b"k", 155.0)

    x = exchange({"stale-if-error": "99"})
    assert x.stale_if_error(Options().native, v, 0, "x", 155.0) == (
        b"ziggurat; hit; ttl=-95; fwd-status=0; detail=x"
    )
    assert (
        exchange({"stale-if-error": "90"}).stale_if_error(Options().native, v, 0, "x", 155.0)
        is None
    )
    assert (
        frozenset({"no-cache", "must-revalidate", "proxy-revalidate", "s-maxage"})
        == storable.STALE_FORBIDDING
    )


def test_header_lines_may_be_lists() -> None:
    # ASGI lets a header line be any pair of bytes: some servers and apps give lists.
    h = [[b"cache-control", b"max-age=5"], [b"vary", b"accept"], (b"age", b"2")]
    assert rules.fields(h, b"vary") == [b"accept"]  # type: ignore[arg-type]
    m = storable.decide(
        Options(),
        200,
        h,
        storable.Request(headers=[[b"accept", b"x"]]),  # type: ignore[arg-type, list-item]
    )
    assert isinstance(m, storable.Meta) and m.vary_values == (b"x",) and m.initial_age == 2.0
    with pytest.raises(TypeError, match=r"^fields\(\): headers must be"):
        rules.fields([[b"a", b"1", b"2"]], b"a")  # type: ignore[list-item]


def test_bad_input_names_the_rule() -> None:
    with pytest.raises(
        TypeError, match=r"^field\(\): headers must be a sequence of \(name, value\)"
    ):
        rules.field([(b"a", "text")], b"a")  # type: ignore[list-item]
    with pytest.raises(TypeError, match=r"^parse_cache_control\(\): values must be an iterable"):
        rules.parse_cache_control(["max-age=5"])  # type: ignore[list-item]
    with pytest.raises(ValueError, match=r'^vary_digest\(\): header name "Ā" is not Latin-1'):
        rules.vary_digest(["\u0100"], [])
    with pytest.raises(ValueError, match=r"^cache_status\(\): .* is not ASCII"):
        rules.cache_status("fwd", detail="é")
    with pytest.raises(TypeError, match=r"^exchange\(\): cc must map directive names"):
        _native.HttpExchange("GET", [], {"max-age": 5}, False, b"k", b"k", 0.0)  # type: ignore[dict-item]
    with pytest.raises(TypeError, match=r"^decide\(\): status must be an int"):
        storable.decide(Options(), "200", [], storable.Request())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^reply\(\): value is not a stored response"):
        _native.HttpExchange("GET", [], {}, False, b"k", b"k", 0.0).reply(b"junk", 0.0, [], None)
    # Any int is a status: one no rule names is stored by no rule.
    assert storable.decide(Options(), 10**30, [], storable.Request()) == "status"
