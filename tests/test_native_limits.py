"""The limits the Cache's rules apply are read from the extension, one home per rule."""

from __future__ import annotations

import math

import pytest
from ziggurat import Cache, _native


def test_the_extension_exports_each_limit_its_rules_apply(shm_dir: str) -> None:
    assert _native.MAX_TTL == 100 * 365 * 86400.0
    assert _native.MAX_SIZE == 1 << 50
    assert _native.MAX_KEY == 4096
    assert _native.MAX_TAGS == 8
    assert _native.parse_size(_native.MAX_SIZE) == _native.MAX_SIZE
    with pytest.raises(ValueError, match="positive number of bytes"):
        _native.parse_size(_native.MAX_SIZE + 1)
    c = Cache("limits", size="8MiB", directory=shm_dir)
    try:
        c.set("at-the-limit", 1, ttl=_native.MAX_TTL)
        c.set("never", 1, ttl=math.inf)
        with pytest.raises(ValueError, match="at most 100 years"):
            c.set("past-it", 1, ttl=math.nextafter(_native.MAX_TTL, math.inf))
        with pytest.raises(ValueError, match=f"at most {_native.MAX_TAGS} tags"):
            c.set("k", 1, tags=[f"t{i}" for i in range(_native.MAX_TAGS + 1)])
    finally:
        c.unlink()
