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

import math
import os
import random
import shutil
import time
import uuid

import hypothesis.strategies as st
import pytest
from helpers_segment import STRESS, MiB, Segment, as_key, distinct_tags, make_value, new_name
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
N_TAGS = 5  # tags are drawn as indices into SegmentModel.tags

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
tags_st = st.lists(st.integers(0, N_TAGS - 1), max_size=3, unique=True)
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
        # Distinct tags may share a cell of the hashed tag table and over-invalidate each
        # other (a documented trade-off); the model is exact only for tags that do not.
        self.tags = distinct_tags(self.seg, N_TAGS, prefix="tâg")

    @initialize()
    def empty_at_start(self) -> None:
        assert self.seg.stats()["entries"] == 0

    def _fit(self, value: bytes) -> bytes:
        return value[: self.seg.max_value_size]

    @rule(key=key_st, value=value_st, tags=tags_st, ttl=ttl_st)
    def set(self, key: str | bytes, value: bytes, tags: list[int], ttl: float | None) -> None:
        value = self._fit(value)
        names = [self.tags[i] for i in tags]
        self.seg.set(key, value, ttl=ttl, tags=names)
        self.model[as_key(key)] = (value, frozenset(names))

    @rule(key=key_st, value=value_st, tags=tags_st, ttl=ttl_st)
    def add(self, key: str | bytes, value: bytes, tags: list[int], ttl: float | None) -> None:
        value = self._fit(value)
        names = [self.tags[i] for i in tags]
        expected = as_key(key) not in self.model
        assert self.seg.add(key, value, ttl=ttl, tags=names) is expected
        if expected:
            self.model[as_key(key)] = (value, frozenset(names))

    @precondition(lambda self: self.model)
    @rule(data=st.data(), grow=st.booleans())
    def overwrite_resized(self, data: st.DataObject, grow: bool) -> None:
        """Overwrite an existing key with a longer (about double) or a much shorter value."""
        key = data.draw(st.sampled_from(sorted(self.model)))
        old, tags = self.model[key]
        n = (
            min(len(old) * 2 + 17, self.seg.max_value_size, 150_000)
            if grow
            else max(1, len(old) // 3)
        )
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

    @rule(index=st.integers(0, N_TAGS - 1), via_other=st.booleans())
    def invalidate_tag(self, index: int, via_other: bool) -> None:
        tag = self.tags[index]
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
    max_examples=60,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
test_segment_matches_dict_model = SegmentModel.TestCase


class SegmentModelStress(SegmentModel):
    """The same machine, many more and longer runs (``make stress``)."""


SegmentModelStress.TestCase.settings = settings(
    max_examples=2000,
    stateful_step_count=80,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
SegmentModelStress.TestCase.pytestmark = [
    pytest.mark.stress,
    pytest.mark.timeout(3600),
    pytest.mark.skipif(not STRESS, reason="set ZIGGURAT_STRESS=1 (make stress)"),
]
test_segment_matches_dict_model_stress = SegmentModelStress.TestCase


# --------------------------------------------------------------------------- with eviction


@pytest.mark.parametrize(
    "ops",
    [
        pytest.param(60_000, id="ci"),
        pytest.param(
            2_000_000,
            id="stress",
            marks=[
                pytest.mark.stress,
                pytest.mark.timeout(3600),
                pytest.mark.skipif(not STRESS, reason="set ZIGGURAT_STRESS=1 (make stress)"),
            ],
        ),
    ],
)
def test_eviction_never_resurrects(shm_dir: str, ops: int) -> None:
    """Model with eviction (G1 within a process + API contract): on a small segment that
    evicts all the time (S3-FIFO copy-forward of hot entries), a get returns the latest value
    set for the key or a miss, never an older value, a deleted one, one whose tag was
    invalidated since, or an expired one; and verify() stays clean.
    """
    seg = Segment(new_name("evict"), 2 * MiB, directory=shm_dir)
    try:
        rng = random.Random(ops)
        keys = [b"ev-%04d" % i for i in range(3000)]
        hot = keys[:40]  # read often: their slots get a frequency, so eviction copies them
        tags = distinct_tags(seg, 6, prefix="ev")
        latest: dict[bytes, bytes | None] = {}
        tagged: dict[bytes, str] = {}
        expiring: dict[bytes, float] = {}  # key -> monotonic deadline
        wrong: list[tuple[int, bytes, str]] = []
        big = min(60_000, seg.max_value_size)
        for i in range(ops):
            key = rng.choice(hot) if rng.random() < 0.5 else rng.choice(keys)
            r = rng.random()
            if r < 0.45:
                got = seg.get(key)
                want = latest.get(key)
                if got is not None and got != want:
                    wrong.append((i, key, "stale" if want is not None else "resurrected"))
                elif got is not None and time.monotonic() > expiring.get(key, math.inf) + 0.01:
                    wrong.append((i, key, "expired value returned"))
            elif r < 0.85:
                value = make_value(key + b"#%d" % i, rng, rng.choice((10, 200, 2000, big)))
                tag = rng.choice(tags) if rng.random() < 0.3 else None
                ttl = 0.05 if rng.random() < 0.05 else None
                seg.set(key, value, tags=[tag] if tag else (), ttl=ttl)
                latest[key] = value
                tagged.pop(key, None)
                expiring.pop(key, None)
                if tag:
                    tagged[key] = tag
                if ttl:
                    expiring[key] = time.monotonic() + ttl
            elif r < 0.97:
                seg.delete(key)
                latest[key] = None
            else:
                tag = rng.choice(tags)
                seg.invalidate_tag(tag)
                for k in [k for k, t in tagged.items() if t == tag]:
                    latest[k] = None
                    del tagged[k]
            if expiring and i % 64 == 0:
                now = time.monotonic()
                for k in [k for k, d in expiring.items() if now > d + 0.01]:
                    latest[k] = None
                    del expiring[k]
            if len(wrong) >= 10:
                break
        assert wrong == [], wrong
        stats = seg.stats()
        assert stats["evictions"] > 1000, "the segment did not evict: the test proves nothing"
        assert stats["bytes_used"] <= stats["bytes_capacity"]
        report = seg.verify()
        assert report["ok"], report
    finally:
        seg.unlink()
        seg.close()
