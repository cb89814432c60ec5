"""Model-based test: a Segment behaves exactly like a dict with tags.

A hypothesis ``RuleBasedStateMachine`` drives set (including overwrites with longer and
shorter values), get, delete, add, clear and invalidate_tag through two handles on the
same file, with str and bytes forms of the same keys, and compares every answer with a
plain-dict model.  TTLs are only long ones here (no fake clock): expiry itself is tested
in test_segment_basic.py.  The segment is large enough that nothing is ever evicted, and
an invariant asserts ``stats()["evictions"] == 0`` so the model stays exact.

Guarantees: the API contract, plus G1 within one host (a second handle sees every change
at once) and stamp behaviour (even at rest, +2 per write).
"""

from __future__ import annotations

import os
import shutil
import uuid

import hypothesis.strategies as st
from helpers_segment import STRESS, MiB, Segment, as_key, new_name
from hypothesis import HealthCheck, settings
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

BASE_KEYS = [
    "a", "b", "c", "key:1", "key:2", "user/42", "é", "日本語", "\x00", "k" * 120,
    "a\x00b", "A",
]  # fmt: skip
TAGS = ["t0", "t1", "t2", "t3", "ünï"]

key_st = st.builds(
    lambda base, as_bytes: base.encode() if as_bytes else base,
    st.sampled_from(BASE_KEYS),
    st.booleans(),
)
value_st = st.one_of(
    st.binary(min_size=1, max_size=64),
    st.binary(min_size=65, max_size=4096),
    st.builds(lambda n, b: bytes([b]) * n, st.integers(4097, 100_000), st.integers(0, 255)),
)
tags_st = st.lists(st.sampled_from(TAGS), max_size=3, unique=True)
ttl_st = st.sampled_from([None, 3600, 86_400.5])


class SegmentModel(RuleBasedStateMachine):
    """Segment vs ``dict[bytes, (value, tags)]``."""

    def __init__(self) -> None:
        super().__init__()
        self.dir = f"/dev/shm/zigtest-{uuid.uuid4().hex}"
        os.mkdir(self.dir, 0o700)
        self.seg = Segment(new_name("model"), 64 * MiB, directory=self.dir)
        self.other = Segment(self.seg.name, self.seg.size, directory=self.dir)
        self.model: dict[bytes, tuple[bytes, frozenset[str]]] = {}

    @initialize()
    def empty_at_start(self) -> None:
        assert self.seg.stats()["entries"] == 0

    def _fit(self, value: bytes) -> bytes:
        return value[: self.seg.max_value_size]

    @rule(key=key_st, value=value_st, tags=tags_st, ttl=ttl_st)
    def set(self, key: str | bytes, value: bytes, tags: list[str], ttl: float | None) -> None:
        value = self._fit(value)
        self.seg.set(key, value, ttl=ttl, tags=tags)
        self.model[as_key(key)] = (value, frozenset(tags))

    @rule(key=key_st, value=value_st, tags=tags_st, ttl=ttl_st)
    def add(self, key: str | bytes, value: bytes, tags: list[str], ttl: float | None) -> None:
        value = self._fit(value)
        expected = as_key(key) not in self.model
        assert self.seg.add(key, value, ttl=ttl, tags=tags) is expected
        if expected:
            self.model[as_key(key)] = (value, frozenset(tags))

    @precondition(lambda self: self.model)
    @rule(data=st.data(), grow=st.booleans())
    def overwrite_resized(self, data: st.DataObject, grow: bool) -> None:
        """Overwrite an existing key with a value at least twice as long, or much shorter."""
        key = data.draw(st.sampled_from(sorted(self.model)))
        old, tags = self.model[key]
        n = min(len(old) * 2 + 17, self.seg.max_value_size, 150_000) if grow else max(1, len(old) // 3)
        value = bytes([(old[0] + 1) % 256]) * n
        self.seg.set(key, value, tags=tags)
        self.model[key] = (value, tags)
        assert self.other.get(key) == value

    @rule(key=key_st)
    def get(self, key: str | bytes) -> None:
        expected = self.model.get(as_key(key))
        assert self.seg.get(key) == (expected[0] if expected else None)

    @rule(key=key_st)
    def get_other_handle(self, key: str | bytes) -> None:
        expected = self.model.get(as_key(key))
        assert self.other.get(key) == (expected[0] if expected else None)

    @rule(key=key_st)
    def delete(self, key: str | bytes) -> None:
        expected = as_key(key) in self.model
        assert self.seg.delete(key) is expected
        self.model.pop(as_key(key), None)

    @rule(key=key_st, value=value_st)
    def stamp_moves_by_two(self, key: str | bytes, value: bytes) -> None:
        before = self.other.stamp(key)
        self.seg.set(key, self._fit(value))
        self.model[as_key(key)] = (self._fit(value), frozenset())
        assert self.other.stamp(key) == before + 2

    @rule(tag=st.sampled_from(TAGS), via_other=st.booleans())
    def invalidate_tag(self, tag: str, via_other: bool) -> None:
        (self.other if via_other else self.seg).invalidate_tag(tag)
        self.model = {k: v for k, v in self.model.items() if tag not in v[1]}

    @rule()
    def clear(self) -> None:
        self.seg.clear()
        self.model.clear()

    @invariant()
    def nothing_evicted(self) -> None:
        assert self.seg.stats()["evictions"] == 0, "model is only exact without eviction"

    def teardown(self) -> None:
        try:
            for key, (value, _tags) in self.model.items():
                assert self.seg.get(key) == value
                assert self.seg.stamp(key) % 2 == 0
            for base in BASE_KEYS:
                if as_key(base) not in self.model:
                    assert self.other.get(base) is None
            report = self.seg.verify()
            assert report["ok"], report
        finally:
            self.other.close()
            self.seg.unlink()
            self.seg.close()
            shutil.rmtree(self.dir, ignore_errors=True)


SegmentModel.TestCase.settings = settings(
    max_examples=1000 if STRESS else 60,
    stateful_step_count=60 if STRESS else 40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
test_segment_matches_dict_model = SegmentModel.TestCase
